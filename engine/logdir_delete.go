// Deleting topics the way a broker's log manager does: DeleteTopic renames
// each partition directory <topic>-<p>.<uuid>-delete at once (the name is
// free, and a crash cannot resurrect the topic), and the renamed
// directories are removed file.delete.delay.ms later, so readers that
// still hold the topic's files finish. A read-write open finds the -delete
// directories a previous mount left and waits the delay again before
// removing them (Kafka's LogManager.loadLogs and deleteLogs).

package engine

import (
	"path/filepath"
	"sort"
	"time"
)

// topicDeleteInterval is how often a read-write LogDir looks for -delete
// directories whose delay has passed.
const topicDeleteInterval = time.Second

// pendingDelete is a -delete directory waiting for its removal.
type pendingDelete struct {
	dir string
	due time.Time
}

// scheduleDelete queues the -delete directory dir for removal after the
// mount-wide file.delete.delay.ms (the broker's default, which Kafka's log
// manager uses for whole partitions: log.segment.delete.delay.ms), counted
// from now; a delay of 0 removes it at once in the background.
func (d *LogDir) scheduleDelete(dir string) {
	delay := d.defaults.FileDeleteDelayMs
	if delay <= 0 {
		d.removeInBackground(dir)
		return
	}
	d.del.Lock()
	d.del.pending = append(d.del.pending, pendingDelete{dir: dir, due: d.now().Add(time.Duration(delay) * time.Millisecond)})
	d.del.Unlock()
}

// RemoveDeletedTopics removes the -delete directories (of deleted topics,
// or left by an earlier mount) whose file.delete.delay.ms has passed at
// now, and reports how many it removed. A directory that cannot be removed
// is logged and left for the next open. A read-write LogDir calls it every
// second with its clock; tests call it with theirs.
func (d *LogDir) RemoveDeletedTopics(now time.Time) int {
	d.del.Lock()
	var due []string
	keep := d.del.pending[:0]
	for _, p := range d.del.pending {
		if now.Before(p.due) {
			keep = append(keep, p)
		} else {
			due = append(due, p.dir)
		}
	}
	clear(d.del.pending[len(keep):])
	d.del.pending = keep
	d.del.Unlock()
	removed := 0
	for _, dir := range due {
		if err := d.fs.RemoveAll(dir); err != nil {
			d.log.Warn("removing deleted partition directory (the next open tries again)", "dir", dir, "err", err)
			continue
		}
		removed++
		d.log.Info("removed deleted partition directory", "dir", filepath.Base(dir))
	}
	if removed > 0 {
		if err := d.fs.SyncDir(d.path); err != nil {
			d.log.Warn("sync data dir after removal", "err", err)
		}
	}
	return removed
}

// PendingTopicDeletions returns the names of the -delete directories
// waiting for file.delete.delay.ms, sorted.
func (d *LogDir) PendingTopicDeletions() []string {
	d.del.Lock()
	defer d.del.Unlock()
	out := make([]string, 0, len(d.del.pending))
	for _, p := range d.del.pending {
		out = append(out, filepath.Base(p.dir))
	}
	sort.Strings(out)
	return out
}

// startDeleteLoop removes due -delete directories at every tick until Close.
func (d *LogDir) startDeleteLoop(tick <-chan time.Time, stopTicker func()) {
	d.every(tick, stopTicker, func() { d.RemoveDeletedTopics(d.now()) })
}

// removeInBackground removes dir now, in the background (Close waits).
func (d *LogDir) removeInBackground(dir string) {
	d.bg.Add(1)
	go func() {
		defer d.bg.Done()
		if err := d.fs.RemoveAll(dir); err != nil {
			d.log.Warn("removing deleted partition directory", "dir", dir, "err", err)
			return
		}
		if err := d.fs.SyncDir(d.path); err != nil {
			d.log.Warn("sync data dir after removal", "dir", dir, "err", err)
		}
	}()
}
