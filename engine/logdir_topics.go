// Creating and deleting topics in a LogDir: CreateTopic makes a topic's
// partition directories (durably, so a crash leaves a whole topic or none),
// and DeleteTopic renames them -delete the way Kafka does and removes them in
// the background.

package engine

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/topicfs/topicfs/engine/vfs"
)

// CreateTopic creates a topic with partitions 0..n-1. partitions == 0 means
// the topic's effective num.partitions (the defaults with its [topics.NAME]
// overrides applied); a negative count is ErrInvalidConfig. Errors wrap
// ErrInvalidTopic (bad name, or the reserved metadata topic), ErrTopicExists,
// ErrInvalidConfig, ErrReadOnly or ErrClosed. On failure nothing is left
// behind (unless the process dies: see below).
//
// Creation is all or nothing across a crash. The topic becomes visible only
// once every partition directory exists and is open, and on disk:
//
//  1. topicfs-creating-topic ("<topic> <n>") is written atomically (tmp,
//     fsync, rename, fsync of the data dir): the intent is durable;
//  2. every <topic>-<p> directory is created and the data dir synced once;
//  3. the partitions are opened and the marker is removed (unsynced: a
//     stale marker is harmless, see below).
//
// A crash before 1 completes leaves no marker and no directory (none was
// made yet). After 1, the next read-write open finds the marker and rolls the
// creation forward, making whichever of the n directories are missing, so
// the topic comes back with all its partitions even if CreateTopic never
// returned. Rolling forward is idempotent: a stale marker for a topic that
// exists whole changes nothing. A read-only open cannot repair and logs it.
func (d *LogDir) CreateTopic(name string, partitions int) (*Topic, error) {
	if err := ValidTopicName(name); err != nil {
		return nil, err
	}
	if name == MetadataTopic {
		return nil, fmt.Errorf("%w: %q is reserved", ErrInvalidTopic, name)
	}
	if partitions < 0 {
		return nil, fmt.Errorf("%w: a topic needs at least one partition, got %d", ErrInvalidConfig, partitions)
	}
	d.admin.Lock()
	defer d.admin.Unlock()
	if err := d.writable(); err != nil {
		return nil, err
	}
	if _, err := d.Topic(name); err == nil {
		return nil, fmt.Errorf("%w: %q", ErrTopicExists, name)
	}
	cfg, err := d.topicConfig(name)
	if err != nil {
		return nil, err
	}
	if partitions == 0 {
		partitions = int(cfg.NumPartitions)
		if partitions < 1 { // Config validation forbids it; be safe anyway
			return nil, fmt.Errorf("%w: num.partitions of %q is %d", ErrInvalidConfig, name, cfg.NumPartitions)
		}
	}
	for p := range partitions {
		if _, err := d.fs.Stat(d.partitionDir(name, p)); err == nil {
			return nil, fmt.Errorf("%w: directory %s already exists", ErrTopicExists, d.partitionDir(name, p))
		}
	}
	marker := filepath.Join(d.path, CreatingTopicFile)
	if err := vfs.WriteFileAtomic(d.fs, marker, fmt.Appendf(nil, "%s %d\n", name, partitions), 0o644); err != nil {
		_ = d.fs.Remove(marker)
		return nil, fmt.Errorf("engine: write %s: %w", CreatingTopicFile, err)
	}
	t := &Topic{d: d, name: name}
	t.mu.cfg = cfg
	parts, err := d.createPartitions(name, cfg, 0, partitions, marker)
	if err != nil {
		return nil, err
	}
	// Unsynced on purpose: if the removal is lost, the next open rolls a
	// whole topic "forward", which changes nothing. Any later SyncDir of the
	// data dir (DeleteTopic, checkpoints, Close) makes the removal durable.
	if err := d.fs.Remove(marker); err != nil {
		d.log.Warn("removing topic creation marker", "file", marker, "err", err)
	}
	t.mu.parts = parts
	d.mu.Lock()
	d.mu.topics[name] = t
	d.mu.Unlock()
	d.log.Info("created topic", "topic", name, "partitions", partitions)
	return t, nil
}

// createPartitions creates, syncs and opens partitions [from, to) of topic.
// On failure it closes and removes what it created, and the extra files
// named (a creation marker). Callers hold d.admin.
func (d *LogDir) createPartitions(topic string, cfg Config, from, to int, extra ...string) ([]*Partition, error) {
	var made []string
	undo := func() {
		for i, dir := range made {
			// Renamed first, as DeleteTopic does: a rename needs no file
			// descriptor, so even when the failure was EMFILE the topic's
			// name is free at once; a -delete directory RemoveAll cannot
			// list now is removed at the next open.
			gone := filepath.Join(d.path, deleteDirName(topic, from+i))
			if err := d.fs.Rename(dir, gone); err != nil {
				d.log.Warn("renaming partition directory of a failed topic creation", "dir", dir, "err", err)
				gone = dir
			}
			if err := d.fs.RemoveAll(gone); err != nil {
				d.log.Warn("removing partition directory of a failed topic creation", "dir", gone, "err", err)
			}
		}
		for _, f := range extra {
			_ = d.fs.Remove(f)
		}
		_ = d.fs.SyncDir(d.path)
	}
	if err := d.checkFileHeadroom(to - from); err != nil {
		undo()
		return nil, err
	}
	for p := from; p < to; p++ {
		dir := d.partitionDir(topic, p)
		if err := d.fs.MkdirAll(dir, 0o755); err != nil {
			undo()
			return nil, fmt.Errorf("engine: create partition dir: %w", err)
		}
		made = append(made, dir)
	}
	if err := d.writeTopicID(topic, from, to); err != nil {
		undo()
		return nil, err
	}
	if err := d.fs.SyncDir(d.path); err != nil {
		undo()
		return nil, fmt.Errorf("engine: sync data dir: %w", err)
	}
	parts := make([]*Partition, 0, to-from)
	for p := from; p < to; p++ {
		part, err := OpenPartition(d.fs, d.partitionDir(topic, p), topic, p, PartitionOptions{
			Config:         cfg,
			RecoveryPoint:  0,
			LogStartOffset: 0,
			FirstDirty:     -1,
			CleanShutdown:  true, // nothing to recover in a new directory
			LeaderEpochs:   true,
			Logger:         d.log,
			Now:            d.now,
			indexes:        d.indexes,
		})
		if err != nil {
			for _, q := range parts {
				_ = q.Close()
			}
			undo()
			return nil, err
		}
		parts = append(parts, part)
	}
	return parts, nil
}

// finishCreatingTopic rolls forward a CreateTopic that a crash interrupted
// (see CreateTopic): it makes the missing partition directories the marker
// names, syncs the data dir and removes the marker. Read-only, it only logs.
// A marker that cannot be parsed is logged and removed: it was written
// atomically, so that cannot come from a crash of ours.
func (d *LogDir) finishCreatingTopic() error {
	marker := filepath.Join(d.path, CreatingTopicFile)
	data, err := vfs.ReadFile(d.fs, marker)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("engine: read %s: %w", CreatingTopicFile, err)
	}
	name, count, _ := strings.Cut(strings.TrimSpace(string(data)), " ")
	n, perr := strconv.Atoi(count)
	valid := perr == nil && n >= 1 && ValidTopicName(name) == nil && name != MetadataTopic
	if d.readOnly {
		if valid {
			d.log.Warn("topic creation was interrupted by a crash; a read-write open completes it", "topic", name, "partitions", n)
		}
		return nil
	}
	if valid {
		missing := 0
		for p := range n {
			dir := d.partitionDir(name, p)
			if _, err := d.fs.Stat(dir); err == nil {
				continue
			}
			if err := d.fs.MkdirAll(dir, 0o755); err != nil {
				return fmt.Errorf("engine: complete creation of topic %s: %w", name, err)
			}
			missing++
		}
		if err := d.writeTopicID(name, 0, n); err != nil {
			return fmt.Errorf("engine: complete creation of topic %s: %w", name, err)
		}
		if missing > 0 {
			d.log.Warn("completed a topic creation interrupted by a crash", "topic", name, "partitions", n, "created", missing)
		}
	} else {
		d.log.Warn("removing unreadable topic creation marker", "file", marker, "content", string(data))
	}
	if err := d.fs.SyncDir(d.path); err != nil {
		return fmt.Errorf("engine: sync data dir: %w", err)
	}
	if err := d.fs.Remove(marker); err != nil {
		return fmt.Errorf("engine: remove %s: %w", CreatingTopicFile, err)
	}
	return nil
}

// DeleteTopic removes a topic as Kafka does: it closes the partitions, renames
// each directory to <topic>-<p>.<uuid>-delete (so the name is free at once
// and a crash cannot resurrect it), syncs the data dir, drops the topic's
// persisted config, and removes the renamed directories file.delete.delay.ms
// (the mount-wide value) later, as Kafka's log manager does
// (logdir_delete.go).
// Open readers keep reading what they hold (on the OS file system, open files
// outlive their unlink). Errors wrap ErrUnknownTopic, ErrReadOnly or ErrClosed.
func (d *LogDir) DeleteTopic(name string) error {
	d.admin.Lock()
	defer d.admin.Unlock()
	if err := d.writable(); err != nil {
		return err
	}
	d.mu.Lock()
	t := d.mu.topics[name]
	delete(d.mu.topics, name)
	d.mu.Unlock()
	if t == nil {
		return fmt.Errorf("%w: %q", ErrUnknownTopic, name)
	}
	t.mu.Lock()
	parts := t.mu.parts
	t.mu.parts = nil
	t.mu.deleted = true
	t.mu.Unlock()

	var errs []error
	var renamed []string
	for _, p := range parts {
		if err := p.Close(); err != nil && !errors.Is(err, ErrClosed) {
			d.log.Warn("closing partition of deleted topic", "topic", name, "partition", p.ID(), "err", err)
		}
		to := filepath.Join(d.path, deleteDirName(name, p.ID()))
		if err := d.fs.Rename(p.Dir(), to); err != nil {
			errs = append(errs, fmt.Errorf("engine: rename %s for deletion: %w", p.Dir(), err))
			continue
		}
		renamed = append(renamed, to)
	}
	if err := d.fs.SyncDir(d.path); err != nil {
		errs = append(errs, fmt.Errorf("engine: sync data dir: %w", err))
	}
	if _, ok := d.persisted[name]; ok {
		next := cloneOverrides(d.persisted)
		delete(next, name)
		if err := d.writeTopicsFile(next); err != nil {
			errs = append(errs, err)
		} else {
			d.persisted = next
		}
	}
	for _, dir := range renamed {
		d.scheduleDelete(dir)
	}
	d.log.Info("deleted topic", "topic", name, "partitions", len(parts))
	return errors.Join(errs...)
}

// deleteDirName is Kafka's name for a partition directory pending deletion,
// <topic>-<p>.<uuid>-delete, with the topic truncated so it fits in 255 bytes.
func deleteDirName(topic string, p int) string {
	var u [16]byte
	_, _ = rand.Read(u[:])
	suffix := "-" + strconv.Itoa(p) + "." + hex.EncodeToString(u[:]) + "-delete"
	if len(topic)+len(suffix) > 255 {
		topic = topic[:255-len(suffix)]
	}
	return topic + suffix
}
