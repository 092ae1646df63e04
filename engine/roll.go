// Segment lifecycle of a Partition after the append: rolling to a new
// active segment (rollDue at append time, Roll), creating and sealing segment
// files, flushing to disk (Flush, flush.messages, flush.ms), and retention's
// deletes (DeleteOldestSegments, files renamed .deleted and purged after
// file.delete.delay.ms).

package engine

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/topicfs/topicfs/engine/vfs"
)

// RollReason says why the active segment was sealed and a new one started:
// one of Kafka's roll triggers (LogSegment.shouldRoll), checked at append
// time, or a roll retention made to delete the active segment.
type RollReason string

// The roll reasons, in the order rollDue checks them.
const (
	// RollSize: the next batch would take the segment past segment.bytes.
	RollSize RollReason = "size"
	// RollTime: segment.ms (minus the segment's jitter; capped by
	// max.compaction.lag.ms on compacted topics) passed since the
	// segment's first batch (or its creation).
	RollTime RollReason = "time"
	// RollIndexFull: the offset or time index has no room for another entry.
	RollIndexFull RollReason = "index full"
	// RollOffsetOverflow: the next batch's offsets do not fit in 32 bits
	// relative to the segment's base offset.
	RollOffsetOverflow RollReason = "offset overflow"
	// RollRetention: retention deletes the active segment, so a new empty
	// one starts at the log end offset first (Kafka's deleteSegments).
	RollRetention RollReason = "retention"
	// RollRequested: Roll was called (tests, tools).
	RollRequested RollReason = "requested"
)

// rollDue is Kafka's LogSegment.shouldRoll (docs/FORMATS.md §5.1) for a
// batch of size bytes that follows pending bytes not yet written to s
// (holding pendingEntries index entries; firstPendingTs is the max
// timestamp of the first pending batch). It returns the reason to roll, ""
// for none. exact is false when the answer depends on the pending index
// entries: write them, then ask again.
func (p *Partition) rollDue(s *Segment, ap *appendParams, pending int64, pendingEntries int, firstPendingTs, size, last, maxTs int64) (reason RollReason, exact bool) {
	cur := s.Size() + pending
	overflow := last-s.base > math.MaxInt32 || s.base > last
	if cur == 0 {
		if overflow {
			return RollOffsetOverflow, true
		}
		return "", true
	}
	if cur > ap.cfg.SegmentBytes-size {
		return RollSize, true
	}
	// timeToRoll: the segment waited longer than segment.ms minus its
	// jitter (measured between record timestamps when the first batch has
	// one).
	fb := firstPendingTs
	if s.Size() > 0 {
		fb = s.FirstBatchTime()
	}
	var waited int64
	if fb >= 0 && maxTs >= 0 {
		waited = maxTs - fb
	} else {
		waited = ap.nowMs - s.created.UnixMilli()
	}
	if waited > ap.rollMs-s.w.rollJitterMs {
		return RollTime, true
	}
	s.mu.RLock()
	full := (s.mu.oidx != nil && s.mu.oidx.Entries()+pendingEntries >= s.mu.oidx.MaxEntries()) ||
		(s.mu.tidx != nil && s.mu.tidx.Entries()+pendingEntries >= s.mu.tidx.MaxEntries()-1)
	s.mu.RUnlock()
	switch {
	case full && pendingEntries > 0:
		return "", false
	case full:
		return RollIndexFull, true
	case overflow:
		return RollOffsetOverflow, true
	}
	return "", true
}

// Roll starts a new active segment at the log end offset (no-op when the
// active segment is empty).
func (p *Partition) Roll() error {
	if p.opts.ReadOnly {
		return ErrReadOnly
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed.Load() {
		return ErrClosed
	}
	return p.rollLocked(p.logEnd.Load(), p.cfg.Load(), RollRequested)
}

// rollLocked seals the active segment and starts a new one at
// max(newBase, LEO), for reason. An empty active segment is replaced (or
// kept if it already has that base); that is no roll. Callers hold mu.
func (p *Partition) rollLocked(newBase int64, cfg *Config, reason RollReason) error {
	newBase = max(newBase, p.logEnd.Load())
	l := p.list()
	old := l[len(l)-1]
	if old.Size() == 0 {
		if old.base == newBase {
			return nil
		}
		// Replace the empty active segment.
		s, err := p.createSegment(newBase, cfg)
		if err != nil {
			return err
		}
		nl := append(l[:len(l)-1:len(l)-1], s)
		p.publish(nl)
		p.removeSegmentFiles(old)
		old.Release()
		p.rollSnapshotLocked(newBase)
		return nil
	}
	s, err := p.createSegment(newBase, cfg)
	if err != nil {
		return err
	}
	if err := old.seal(); err != nil {
		p.logger.Warn("engine: sealing segment", "segment", old.LogPath(), "err", err)
	}
	p.releaseReserved(old)
	old.lru.add(old)
	nl := make([]*Segment, len(l), len(l)+1)
	copy(nl, l)
	p.publish(append(nl, s))
	p.stats.rolls.Add(1)
	p.stats.lastRoll.Store(&rollInfo{reason: reason, at: p.now()})
	p.logger.Info("engine: rolled segment", "reason", string(reason), "base", newBase, "previous", old.base, "previousSize", old.Size())
	p.rollSnapshotLocked(newBase)
	return nil
}

// seal turns the active segment into a sealed one: final time-index entry
// (max timestamp so far), indexes trimmed to their entries.
func (s *Segment) seal() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.sealed.Store(true)
	var errs []error
	if s.mu.tidx != nil && s.w.ib.maxTs >= 0 {
		errs = append(errs, finalTimeEntry(s.mu.tidx, s.w.ib.maxTs, s.w.ib.offsetOfMax))
	}
	if s.mu.oidx != nil {
		errs = append(errs, s.mu.oidx.Trim())
	}
	if s.mu.tidx != nil {
		errs = append(errs, s.mu.tidx.Trim())
	}
	return errors.Join(errs...)
}

// newSegment builds a Segment object around an open log file.
func (p *Partition) newSegment(base int64, log vfs.File, files segFiles, size int64, cfg *Config) *Segment {
	s := &Segment{
		fs: p.fs, base: base, logger: p.logger, stats: &p.stats,
		indexMax: int(cfg.SegmentIndexBytes), interval: cfg.IndexIntervalBytes,
		readOnly: p.opts.ReadOnly, log: log, created: p.now(), lru: p.indexes, lruSlot: -1,
	}
	s.refs.Store(1)
	s.size.Store(size)
	s.next.Store(-1)
	s.nextBound.Store(-1)
	s.maxTs.Store(unknownTs)
	s.firstBatchTs.Store(unknownTs)
	s.w.ib = newIndexBuilder()
	if cfg.SegmentJitterMs > 0 && cfg.SegmentMs > 0 {
		s.w.rollJitterMs = rand.Int64N(min(cfg.SegmentJitterMs, cfg.SegmentMs))
	}
	s.mu.files = files
	s.mu.idxFS = p.fs
	return s
}

// segmentPaths returns the normal paths of the segment at base.
func (p *Partition) segmentPaths(base int64) segFiles {
	b := filepath.Join(p.dir, segmentName(base))
	return segFiles{log: b + logSuffix, index: b + indexSuffix, timeIndex: b + timeIndexSuffix}
}

// createSegment creates a new empty active segment at base, replacing any
// files already there. On a read-only partition it makes a virtual one.
func (p *Partition) createSegment(base int64, cfg *Config) (*Segment, error) {
	if p.opts.ReadOnly {
		s := p.newSegment(base, nil, segFiles{log: p.segmentPaths(base).log}, 0, cfg)
		s.next.Store(base)
		s.maxTs.Store(-1)
		s.mu.loaded = true
		return s, nil
	}
	files := p.segmentPaths(base)
	for _, f := range append(files.all(), strings.TrimSuffix(files.log, logSuffix)+txnIndexSuffix) {
		if err := p.fs.Remove(f); err != nil && !errors.Is(err, os.ErrNotExist) {
			return nil, fmt.Errorf("engine: remove stale %s: %w", f, err)
		}
	}
	log, err := p.fs.OpenFile(files.log, os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return nil, fmt.Errorf("engine: create segment: %w", err)
	}
	s := p.newSegment(base, log, files, 0, cfg)
	s.next.Store(base)
	s.maxTs.Store(-1)
	s.mu.Lock()
	err = s.openIndexesLocked(true)
	s.mu.Unlock()
	if err != nil {
		log.Close()
		return nil, fmt.Errorf("engine: create segment indexes: %w", err)
	}
	p.w.dirDirty = true
	return s, nil
}

// removeSegmentFiles unlinks a segment's files (used for empty segments
// that are replaced; their files are not worth a .deleted delay).
func (p *Partition) removeSegmentFiles(s *Segment) {
	if p.opts.ReadOnly || s.log == nil {
		return
	}
	s.mu.RLock()
	files := s.mu.files
	s.mu.RUnlock()
	for _, f := range files.all() {
		if err := p.fs.Remove(f); err != nil && !errors.Is(err, os.ErrNotExist) {
			p.logger.Warn("engine: remove segment file", "file", f, "err", err)
		}
	}
	p.w.dirDirty = true
}

// Flush fsyncs everything appended so far (log files, sealed indexes, the
// directory) and advances the recovery point to the log end offset.
func (p *Partition) Flush() error {
	if p.opts.ReadOnly {
		return nil
	}
	p.flushMu.Lock()
	defer p.flushMu.Unlock()
	p.mu.Lock()
	leo := p.logEnd.Load()
	dirty := p.w.dirDirty
	p.w.dirDirty = false
	p.w.unflushed = 0
	p.w.lastFlush = p.now()
	segs := p.list()
	for _, s := range segs {
		s.Retain() // safe: the list's references cannot go while we hold mu
	}
	p.mu.Unlock()
	defer func() {
		for _, s := range segs {
			s.Release()
		}
	}()
	if leo <= p.recoveryPoint.Load() && !dirty {
		return nil
	}
	fail := func(err error) error {
		p.mu.Lock()
		p.w.dirDirty = p.w.dirDirty || dirty
		p.mu.Unlock()
		return err
	}
	for _, s := range segs {
		if err := s.flush(); err != nil {
			return fail(fmt.Errorf("engine: flush %s: %w", s.LogPath(), err))
		}
	}
	if err := p.syncSnapshots(); err != nil {
		return fail(fmt.Errorf("engine: flush producer snapshots of %s: %w", p.dir, err))
	}
	if dirty {
		if err := p.fs.SyncDir(p.dir); err != nil {
			return fail(fmt.Errorf("engine: sync dir %s: %w", p.dir, err))
		}
	}
	for {
		rp := p.recoveryPoint.Load()
		if leo <= rp || p.recoveryPoint.CompareAndSwap(rp, leo) {
			break
		}
	}
	p.mu.Lock()
	p.pruneSnapshotsLocked()
	p.mu.Unlock()
	p.stats.flushes.Add(1)
	return nil
}

// flush fsyncs the segment's unsynced bytes, and its indexes once sealed.
func (s *Segment) flush() error {
	if s.log == nil {
		return nil
	}
	size := s.Size()
	sealed := s.Sealed()
	if size > s.syncedSize.Load() {
		if err := s.log.Sync(); err != nil {
			return err
		}
		s.syncedSize.Store(size)
	}
	if sealed && !s.idxSynced.Load() {
		s.mu.RLock()
		var errs []error
		if s.mu.oidx != nil {
			errs = append(errs, s.mu.oidx.Sync())
		}
		if s.mu.tidx != nil {
			errs = append(errs, s.mu.tidx.Sync())
		}
		if s.mu.txn != nil {
			errs = append(errs, s.mu.txn.Sync())
		}
		s.mu.RUnlock()
		if err := errors.Join(errs...); err != nil {
			return err
		}
		s.idxSynced.Store(true)
	}
	return nil
}

// DeleteOldestSegments removes the n oldest segments, renaming their files
// .deleted and advancing the log start offset. Asked to remove every
// segment, it rolls first (RollRetention) and removes the old active
// segment too, unless that is empty. It returns the bytes removed.
func (p *Partition) DeleteOldestSegments(n int, reason string) (int64, error) {
	if p.opts.ReadOnly {
		return 0, ErrReadOnly
	}
	if n <= 0 {
		return 0, nil
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed.Load() {
		return 0, ErrClosed
	}
	_, bytes, err := p.deleteOldestLocked(n, reason)
	return bytes, err
}

// DeleteSegmentsBelow removes, oldest first, the segments holding only
// offsets below end: a sealed segment when the next one starts at or below
// end, the active segment when it is not empty and the log end offset is at
// or below end (it rolls first, as Kafka's retention does). Retention plans
// on a list of segments and deletes under the writer lock later; end keeps
// records appended in between. It returns the segments and bytes removed.
func (p *Partition) DeleteSegmentsBelow(end int64, reason string) (int, int64, error) {
	if p.opts.ReadOnly {
		return 0, 0, ErrReadOnly
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed.Load() {
		return 0, 0, ErrClosed
	}
	l := p.list()
	n := 0
	for i, s := range l {
		if i < len(l)-1 && l[i+1].base > end ||
			i == len(l)-1 && (s.Size() == 0 || p.logEnd.Load() > end) {
			break
		}
		n++
	}
	if n == 0 {
		return 0, 0, nil
	}
	return p.deleteOldestLocked(n, reason)
}

// deleteOldestLocked is DeleteOldestSegments under mu.
func (p *Partition) deleteOldestLocked(n int, reason string) (int, int64, error) {
	l := p.list()
	if n >= len(l) && l[len(l)-1].Size() > 0 {
		if err := p.rollLocked(p.logEnd.Load(), p.cfg.Load(), RollRetention); err != nil {
			return 0, 0, err
		}
		l = p.list()
	}
	n = min(n, len(l)-1)
	var bytes int64
	var err error
	i := 0
	now := p.now()
	for ; i < n; i++ {
		if err = p.markDeleted(l[i], now); err != nil {
			break
		}
		bytes += l[i].Size()
	}
	if i == 0 {
		return 0, 0, err
	}
	gone := l[:i]
	p.publish(append([]*Segment(nil), l[i:]...))
	if nb := l[i].base; nb > p.logStart.Load() {
		p.logStart.Store(nb)
		p.truncateEpochsFromStart(nb)
	}
	for _, s := range gone {
		s.Release()
	}
	p.stats.segmentsDeleted.Add(int64(i))
	p.logger.Info("engine: deleted segments", "count", i, "bytes", bytes, "reason", reason,
		"logStartOffset", p.logStart.Load())
	return i, bytes, err
}

// markDeleted renames every file of s with the .deleted suffix and queues
// them for PurgeDeleted, due file.delete.delay.ms (as configured now) after
// now. Callers hold mu.
func (p *Partition) markDeleted(s *Segment, now time.Time) error {
	due := now.Add(time.Duration(p.cfg.Load().FileDeleteDelayMs) * time.Millisecond)
	s.mu.Lock()
	defer s.mu.Unlock()
	f := &s.mu.files
	for _, path := range []*string{&f.log, &f.index, &f.timeIndex, &f.txnIndex} {
		if *path == "" || strings.HasSuffix(*path, deletedSuffix) {
			continue
		}
		if s.mu.idxFS != p.fs && path != &f.log {
			continue // in-memory index: nothing on disk
		}
		np := *path + deletedSuffix
		if err := p.fs.Rename(*path, np); err != nil {
			if path == &f.log {
				return fmt.Errorf("engine: delete segment %s: %w", *path, err)
			}
			p.logger.Warn("engine: rename to .deleted", "file", *path, "err", err)
			continue
		}
		*path = np
		p.w.deleted = append(p.w.deleted, deletedFile{path: np, due: due})
	}
	p.deleteSnapshotLocked(s.base, due) // Kafka deletes a segment's snapshot with it
	p.w.dirDirty = true
	return nil
}

// PurgeDeleted unlinks the .deleted files whose file.delete.delay.ms (the
// one in force when they were deleted) has passed at now. Readers that
// still hold such a segment keep reading their open files.
func (p *Partition) PurgeDeleted(now time.Time) error {
	if p.opts.ReadOnly {
		return nil
	}
	p.mu.Lock()
	var due []string
	keep := p.w.deleted[:0]
	for _, d := range p.w.deleted {
		if !now.Before(d.due) {
			due = append(due, d.path)
		} else {
			keep = append(keep, d)
		}
	}
	clear(p.w.deleted[len(keep):])
	p.w.deleted = keep
	if len(due) > 0 {
		p.w.dirDirty = true
	}
	p.mu.Unlock()
	var errs []error
	for _, f := range due {
		if err := p.fs.Remove(f); err != nil && !errors.Is(err, os.ErrNotExist) {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}
