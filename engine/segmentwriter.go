package engine

import (
	"cmp"
	"errors"
	"fmt"
	"math"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/topicfs/topicfs/engine/index"
	"github.com/topicfs/topicfs/engine/record"
	"github.com/topicfs/topicfs/engine/vfs"
)

// SegmentWriter builds a cleaned segment, <base>.log.cleaned with its
// .index.cleaned and .timeindex.cleaned (and .txnindex.cleaned when it keeps
// an ABORT marker), for ReplaceSegments. It is used by one goroutine (the
// cleaner); the partition keeps serving appends and reads meanwhile.
type SegmentWriter struct {
	p     *Partition
	base  int64
	files segFiles // .cleaned paths
	log   vfs.File
	oidx  *index.OffsetIndex
	tidx  *index.TimeIndex
	txn   *index.TxnIndex

	interval int64
	ib       indexBuilder
	size     int64
	next     int64
	firstTs  int64
	finished bool
	closed   bool

	aborted map[int64]index.AbortedTxn // marker offset -> aborted txn of the old segments
}

// NewCleanedSegment creates an empty cleaned segment at base.
func (p *Partition) NewCleanedSegment(base int64) (*SegmentWriter, error) {
	if p.opts.ReadOnly {
		return nil, ErrReadOnly
	}
	if p.closed.Load() {
		return nil, ErrClosed
	}
	cfg := p.cfg.Load()
	n := p.segmentPaths(base)
	w := &SegmentWriter{
		p: p, base: base, interval: cfg.IndexIntervalBytes, ib: newIndexBuilder(), next: base, firstTs: -1,
		files: segFiles{log: n.log + cleanedSuffix, index: n.index + cleanedSuffix, timeIndex: n.timeIndex + cleanedSuffix},
	}
	for _, f := range append(w.files.all(), strings.TrimSuffix(n.log, logSuffix)+txnIndexSuffix+cleanedSuffix) {
		if err := p.fs.Remove(f); err != nil && !errors.Is(err, os.ErrNotExist) {
			return nil, err
		}
	}
	var err error
	if w.log, err = p.fs.OpenFile(w.files.log, os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o644); err != nil {
		return nil, fmt.Errorf("engine: create cleaned segment: %w", err)
	}
	if w.oidx, err = index.OpenOffsetIndex(p.fs, w.files.index, base, int(cfg.SegmentIndexBytes), true); err != nil {
		w.Abort()
		return nil, err
	}
	if w.tidx, err = index.OpenTimeIndex(p.fs, w.files.timeIndex, base, int(cfg.SegmentIndexBytes), true); err != nil {
		w.Abort()
		return nil, err
	}
	return w, nil
}

// BaseOffset returns the base offset the cleaned segment will be named after.
func (w *SegmentWriter) BaseOffset() int64 { return w.base }

// Size returns the bytes written so far.
func (w *SegmentWriter) Size() int64 { return w.size }

// AppendBatch appends a batch whose offsets are already set (at or above
// the previous batch's next offset), adding index entries by Kafka's rule.
// An ABORT marker kept from the old segments gets its txn index entry back.
func (w *SegmentWriter) AppendBatch(raw []byte) error {
	if w.finished || w.closed {
		return ErrSealed
	}
	b, err := record.Parse(raw)
	if err != nil {
		return err
	}
	if len(raw) != b.Size() {
		return fmt.Errorf("%w: %d bytes for a batch of %d", ErrCorrupt, len(raw), b.Size())
	}
	if (b.Magic >= 2 && b.BaseOffset < w.next) || b.LastOffset() < w.next || b.LastOffset()-w.base > math.MaxInt32 {
		return fmt.Errorf("engine: cleaned segment %d: batch offsets %d..%d after %d: %w",
			w.base, b.BaseOffset, b.LastOffset(), w.next, ErrCorrupt)
	}
	if w.size+int64(len(raw)) > math.MaxInt32 {
		return fmt.Errorf("engine: cleaned segment %d: larger than 2 GiB: %w", w.base, ErrRecordTooLarge)
	}
	if _, err := w.log.WriteAt(raw, w.size); err != nil {
		return fmt.Errorf("engine: write %s: %w", w.files.log, err)
	}
	if w.size == 0 {
		w.firstTs = b.MaxTimestamp
	}
	if w.ib.add(b.LastOffset(), b.MaxTimestamp, w.size, int64(len(raw)), w.interval) {
		if err := sparseEntry(w.oidx, w.tidx, b.LastOffset(), w.size, w.ib.maxTs, w.ib.offsetOfMax); err != nil {
			return err
		}
	}
	w.size += int64(len(raw))
	w.next = b.NextOffset()
	if b.IsControl() && b.IsTransactional() {
		if typ, err := b.ControlType(); err == nil && typ == 0 {
			if t, ok := w.abortedTxn(b.LastOffset()); ok {
				if err := w.appendTxn(t); err != nil {
					return err
				}
			}
		}
	}
	return nil
}

// abortedTxn finds the old txn index entry of the ABORT marker at off.
func (w *SegmentWriter) abortedTxn(off int64) (index.AbortedTxn, bool) {
	if w.aborted == nil {
		w.aborted = map[int64]index.AbortedTxn{}
		snap := w.p.Snapshot()
		for _, s := range snap.Segments {
			for _, t := range s.AbortedTxns() {
				w.aborted[t.LastOffset] = t
			}
		}
		snap.Release()
	}
	t, ok := w.aborted[off]
	return t, ok
}

func (w *SegmentWriter) appendTxn(t index.AbortedTxn) error {
	if w.txn == nil {
		path := strings.TrimSuffix(w.files.index, indexSuffix+cleanedSuffix) + txnIndexSuffix + cleanedSuffix
		txn, err := index.OpenTxnIndex(w.p.fs, path)
		if err != nil {
			return err
		}
		w.txn, w.files.txnIndex = txn, path
	}
	return w.txn.Append(t)
}

// Finish adds the final time-index entry, trims the indexes and fsyncs
// every file. The writer is then ready for ReplaceSegments.
func (w *SegmentWriter) Finish() error {
	if w.closed {
		return ErrClosed
	}
	if w.finished {
		return nil
	}
	var errs []error
	if w.ib.maxTs >= 0 {
		errs = append(errs, finalTimeEntry(w.tidx, w.ib.maxTs, w.ib.offsetOfMax))
	}
	errs = append(errs, w.oidx.Trim(), w.tidx.Trim(), w.log.Sync(), w.oidx.Sync(), w.tidx.Sync())
	if w.txn != nil {
		errs = append(errs, w.txn.Sync())
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("engine: finish cleaned segment %d: %w", w.base, err)
	}
	// The indexes are reopened from their final names by the segment.
	errs = append(errs, w.oidx.Close(), w.tidx.Close())
	if w.txn != nil {
		errs = append(errs, w.txn.Close())
	}
	w.oidx, w.tidx, w.txn = nil, nil, nil
	w.finished = true
	return errors.Join(errs...)
}

// Abort closes and removes the cleaned files (the cleaner gave up).
func (w *SegmentWriter) Abort() error {
	if w.closed {
		return nil
	}
	w.closed = true
	var errs []error
	for _, c := range []interface{ Close() error }{w.oidx, w.tidx, w.txn, w.log} {
		if c != nil && !isNilCloser(c) {
			errs = append(errs, c.Close())
		}
	}
	for _, f := range w.files.all() {
		if err := w.p.fs.Remove(f); err != nil && !errors.Is(err, os.ErrNotExist) {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

func isNilCloser(c interface{ Close() error }) bool {
	switch v := c.(type) {
	case *index.OffsetIndex:
		return v == nil
	case *index.TimeIndex:
		return v == nil
	case *index.TxnIndex:
		return v == nil
	case vfs.File:
		return v == nil
	}
	return false
}

// ReplaceSegments swaps finished cleaned segments in for the segments whose
// base offsets are old, with Kafka's protocol (docs/FORMATS.md §5.3): the
// cleaned files are renamed .swap in descending base order, the old
// segments' files .deleted, the swaps to their final names, and the
// directory is fsynced; then the new segment list is published. A crash at
// any point is finished or rolled back by recovery. It fails with
// ErrConflict if an old segment is no longer in the log (retention or
// another replacement got there first) or is the active segment.
func (p *Partition) ReplaceSegments(old []int64, cleaned []*SegmentWriter) error {
	if p.opts.ReadOnly {
		return ErrReadOnly
	}
	for _, w := range cleaned {
		if !w.finished || w.closed {
			return fmt.Errorf("engine: replace segments: cleaned segment %d not finished", w.base)
		}
	}
	cfg := p.cfg.Load()
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed.Load() {
		return ErrClosed
	}
	l := p.list()
	replaced, err := p.replacedSegments(l, old, cleaned)
	if err != nil {
		return err
	}
	ws := slices.Clone(cleaned)
	slices.SortFunc(ws, func(a, b *SegmentWriter) int { return cmp.Compare(b.base, a.base) })
	if err := p.swapCleaned(ws); err != nil {
		return err
	}
	gone, err := p.commitSwap(l, replaced, ws)
	if err != nil {
		return err
	}
	nl := make([]*Segment, 0, len(l)-len(gone)+len(ws))
	for i, s := range l {
		if !replaced[i] {
			nl = append(nl, s)
		}
	}
	for _, w := range ws {
		nl = append(nl, p.installedSegment(w, cfg))
	}
	slices.SortFunc(nl, func(a, b *Segment) int { return cmp.Compare(a.base, b.base) })
	p.publish(nl)
	p.dropReplacedSnapshotsLocked(gone, ws)
	for _, s := range gone {
		s.Release()
	}
	p.logger.Info("engine: replaced segments", "old", old, "new", len(ws))
	return nil
}

// dropReplacedSnapshotsLocked deletes the producer snapshots named by the
// replaced segments that no cleaned segment takes the place of, as Kafka
// deletes the snapshots of the segments a replacement removes.
func (p *Partition) dropReplacedSnapshotsLocked(gone []*Segment, ws []*SegmentWriter) {
	due := p.now().Add(time.Duration(p.cfg.Load().FileDeleteDelayMs) * time.Millisecond)
	for _, s := range gone {
		if !slices.ContainsFunc(ws, func(w *SegmentWriter) bool { return w.base == s.base }) {
			p.deleteSnapshotLocked(s.base, due)
		}
	}
}

// replacedSegments returns the indexes in l of the segments based at old,
// or ErrConflict if one is missing or active, or if a cleaned segment would
// replace a segment of l not in old.
func (p *Partition) replacedSegments(l []*Segment, old []int64, cleaned []*SegmentWriter) (map[int]bool, error) {
	pos := map[int64]int{}
	for i, s := range l {
		pos[s.base] = i
	}
	replaced := map[int]bool{}
	for _, b := range old {
		i, ok := pos[b]
		if !ok || i == len(l)-1 {
			return nil, fmt.Errorf("%w: segment %d is not a sealed segment of %s", ErrConflict, b, p.dir)
		}
		replaced[i] = true
	}
	for _, w := range cleaned {
		if i, ok := pos[w.base]; ok && !replaced[i] {
			return nil, fmt.Errorf("%w: cleaned segment %d would replace a segment it was not given", ErrConflict, w.base)
		}
	}
	return replaced, nil
}

// renameSegmentFiles renames each file of w from suffix from to suffix to.
func (p *Partition) renameSegmentFiles(w *SegmentWriter, from, to string) error {
	for _, f := range []*string{&w.files.log, &w.files.index, &w.files.timeIndex, &w.files.txnIndex} {
		if *f == "" {
			continue
		}
		n := strings.TrimSuffix(*f, from) + to
		if err := p.fs.Rename(*f, n); err != nil {
			return fmt.Errorf("engine: replace segments: %w", err)
		}
		*f = n
	}
	return nil
}

// swapCleaned is phase 1 of ReplaceSegments: cleaned -> swap, in the order
// of ws (highest base first), made durable. A failure here is undone
// (swap -> cleaned) and the writers stay abortable; a crash is rolled back
// by recovery (a .swap at or above a .cleaned base is dropped).
func (p *Partition) swapCleaned(ws []*SegmentWriter) error {
	undo := func(err error) error {
		for _, w := range ws {
			if strings.HasSuffix(w.files.log, swapSuffix) {
				if uerr := p.renameSegmentFiles(w, swapSuffix, cleanedSuffix); uerr != nil {
					p.logger.Error("engine: undoing a segment swap", "err", uerr)
				}
			}
		}
		return err
	}
	for _, w := range ws {
		if err := p.renameSegmentFiles(w, cleanedSuffix, swapSuffix); err != nil {
			return undo(err)
		}
	}
	if err := p.fs.SyncDir(p.dir); err != nil {
		return undo(fmt.Errorf("engine: replace segments: %w", err))
	}
	return nil
}

// commitSwap is phase 2 of ReplaceSegments: the replaced segments of l are
// marked deleted and the swaps renamed to their final names. From here a
// crash or an error is completed by recovery at the next open (the .swap
// files are durable), so the writers are consumed whatever happens: Abort
// must not remove them. It returns the replaced segments.
func (p *Partition) commitSwap(l []*Segment, replaced map[int]bool, ws []*SegmentWriter) ([]*Segment, error) {
	for _, w := range ws {
		w.closed = true
	}
	committed := func(err error) error {
		for _, w := range ws {
			if w.log != nil {
				w.log.Close()
				w.log = nil
			}
		}
		p.logger.Error("engine: segment swap interrupted; the next open completes it", "dir", p.dir, "err", err)
		return err
	}
	now := p.now()
	var gone []*Segment
	for i := range l {
		if replaced[i] {
			if err := p.markDeleted(l[i], now); err != nil {
				return nil, committed(err)
			}
			gone = append(gone, l[i])
		}
	}
	for _, w := range ws {
		if err := p.renameSegmentFiles(w, swapSuffix, ""); err != nil {
			return nil, committed(err)
		}
	}
	if err := p.fs.SyncDir(p.dir); err != nil {
		// Durable as .swap already; the next Flush syncs the directory again.
		p.w.dirDirty = true
		p.logger.Warn("engine: sync dir after a segment swap", "dir", p.dir, "err", err)
	}
	return gone, nil
}

// installedSegment makes the sealed segment of a swapped-in writer, which
// hands it its log file.
func (p *Partition) installedSegment(w *SegmentWriter, cfg *Config) *Segment {
	s := p.newSegment(w.base, w.log, w.files, w.size, cfg)
	s.sealed.Store(true)
	s.idxSynced.Store(true)
	s.syncedSize.Store(w.size)
	s.next.Store(w.next)
	s.maxTs.Store(w.ib.maxTs)
	if w.size > 0 {
		s.firstBatchTs.Store(w.firstTs)
	}
	w.log = nil
	return s
}
