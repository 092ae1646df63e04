package engine

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/topicfs/topicfs/engine/index"
	"github.com/topicfs/topicfs/engine/vfs"
)

// File suffixes of a segment (part of Kafka's on-disk format).
const (
	logSuffix       = ".log"
	indexSuffix     = ".index"
	timeIndexSuffix = ".timeindex"
	txnIndexSuffix  = ".txnindex"
	deletedSuffix   = ".deleted"
	cleanedSuffix   = ".cleaned"
	swapSuffix      = ".swap"
)

// unknownTs marks a lazily computed timestamp that has not been computed yet.
const unknownTs = math.MinInt64

// segmentName returns the 20-digit file-name prefix of a segment.
func segmentName(base int64) string { return fmt.Sprintf("%020d", base) }

// ParseSegmentName splits a file name like 00000000000000000042.log.deleted
// into its base offset (42) and the rest after the first dot (log.deleted).
// The stem must be decimal digits only (no sign), of any length as Kafka
// accepts, and fit an int64; ok is false for every other name
// (leader-epoch-checkpoint, partition.metadata, ...). Recovery and
// topicfs check both sort a partition directory's files with it.
func ParseSegmentName(name string) (base int64, ext string, ok bool) {
	dot := strings.IndexByte(name, '.')
	if dot <= 0 {
		return 0, "", false
	}
	for _, c := range name[:dot] {
		if c < '0' || c > '9' {
			return 0, "", false
		}
	}
	b, err := strconv.ParseInt(name[:dot], 10, 64)
	if err != nil {
		return 0, "", false
	}
	return b, name[dot+1:], true
}

// segFiles holds the actual paths of a segment's files. A path is "" when
// the file does not exist.
type segFiles struct {
	log, index, timeIndex, txnIndex string
}

func (f segFiles) all() []string {
	var out []string
	for _, p := range []string{f.log, f.index, f.timeIndex, f.txnIndex} {
		if p != "" {
			out = append(out, p)
		}
	}
	return out
}

// counters are a partition's statistics, shared by its segments.
type counters struct {
	bytesAppended   atomic.Int64
	recordsAppended atomic.Int64
	batchesAppended atomic.Int64
	bytesRead       atomic.Int64
	reads           atomic.Int64
	flushes         atomic.Int64
	rolls           atomic.Int64
	segmentsDeleted atomic.Int64
	corruptions     atomic.Int64
	lastRoll        atomic.Pointer[rollInfo]
}

// rollInfo is the last roll of a partition: why and when.
type rollInfo struct {
	reason RollReason
	at     time.Time
}

// Segment is one .log file with its offset, time and transaction indexes.
//
// Readers may call every method concurrently with the partition's single
// writer. The writer appends to the active (last) segment only; bytes become
// visible to readers when Size() is published after the write. A sealed
// segment never changes. A Segment is reference counted: the partition's
// segment list holds one reference and every Snapshot one more; the files
// are closed when the last reference is released.
type Segment struct {
	fs       vfs.FS
	base     int64
	logger   *slog.Logger
	stats    *counters
	indexMax int   // segment.index.bytes
	interval int64 // index.interval.bytes (for rebuilds)
	readOnly bool
	lru      *indexLRU     // bounds the sealed segments with open indexes
	lruSlot  int           // index in lru.segs, -1 when not a member (lru.mu)
	idxUse   atomic.Uint64 // lru tick of the last lookup

	log     vfs.File // nil: a virtual empty segment (read-only partition with no files)
	created time.Time

	size         atomic.Int64             // committed bytes
	next         atomic.Int64             // next offset; -1 = not computed yet
	pubSeq       atomic.Uint64            // odd while an append publishes size and next (committed)
	nextBound    atomic.Int64             // a sealed segment's next offset at most (the next segment's base); -1 unknown
	maxTs        atomic.Int64             // largest timestamp; unknownTs = not computed yet
	idxSizes     atomic.Pointer[[2]int64] // a sealed segment's IndexSizes; nil until asked, or after a rebuild
	firstBatchTs atomic.Int64             // max timestamp of the first batch; unknownTs = not computed yet
	sealed       atomic.Bool
	refs         atomic.Int32
	syncedSize   atomic.Int64                 // committed size at the last fsync of the .log
	idxSynced    atomic.Bool                  // sealed indexes fsynced
	bmemo        atomic.Pointer[batchMemo]    // batches checked before (batchmemo.go); nil until used
	verified     atomic.Pointer[verifiedSpan] // bytes written from verified batches (verifiedspan.go); nil: none

	// w is the writer's state, touched only under the partition's writer
	// mutex (or by the single goroutine that opens the partition).
	w struct {
		ib           indexBuilder
		rollJitterMs int64
		reserved     int64 // .log bytes [0, reserved) have disk blocks (prealloc.go)
		noPrealloc   bool  // reserving failed: write without
	}

	// mu protects the index handles and the file paths (renamed on delete).
	mu struct {
		sync.RWMutex
		files    segFiles
		idxFS    vfs.FS // where the indexes live (a private MemFS for in-memory rebuilds)
		loaded   bool   // oidx/tidx/txn hold the indexes (possibly nil txn)
		writable bool   // the indexes were opened for appends (active segment)
		oidx     *index.OffsetIndex
		tidx     *index.TimeIndex
		txn      *index.TxnIndex
		closed   bool
	}
}

// indexBuilder applies Kafka's index rule (LogSegment.append / recover):
// before a batch, if more than index.interval.bytes were written since the
// last entry, add (batch last offset, batch position) to the offset index and
// (max timestamp so far, its batch's last offset) to the time index.
type indexBuilder struct {
	bytesSince  int64
	maxTs       int64 // -1 = none
	offsetOfMax int64 // -1 = none
}

func newIndexBuilder() indexBuilder { return indexBuilder{maxTs: -1, offsetOfMax: -1} }

// add accounts for one batch at pos; it returns whether an index entry is due.
func (b *indexBuilder) add(lastOffset, maxTs, pos, size, interval int64) (entry bool) {
	if maxTs > b.maxTs {
		b.maxTs, b.offsetOfMax = maxTs, lastOffset
	}
	if b.bytesSince > interval {
		entry = true
		b.bytesSince = 0
	}
	b.bytesSince += size
	return entry
}

// BaseOffset returns the offset in the segment's name: a lower bound of the
// offsets it holds.
func (s *Segment) BaseOffset() int64 { return s.base }

// Size returns the committed size in bytes: readers may read [0, Size()).
func (s *Segment) Size() int64 { return s.size.Load() }

// Sealed reports whether the segment is no longer the active one.
func (s *Segment) Sealed() bool { return s.sealed.Load() }

// LogPath returns the current path of the .log file (it ends in .deleted
// once the segment was deleted).
func (s *Segment) LogPath() string {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.mu.files.log
}

// Created returns when this process created or opened the segment.
func (s *Segment) Created() time.Time { return s.created }

// NextOffset returns the last offset + 1 of the data the segment holds, or
// BaseOffset when it is empty.
func (s *Segment) NextOffset() int64 {
	if n := s.next.Load(); n >= 0 {
		return n
	}
	n, err := s.computeNextOffset()
	if err != nil {
		s.logger.Error("engine: cannot compute next offset", "segment", s.LogPath(), "err", err)
		return s.base
	}
	s.next.CompareAndSwap(-1, n)
	return s.next.Load()
}

// computeNextOffset finds the last batch from the last offset-index entry
// (Kafka's readNextOffset).
func (s *Segment) computeNextOffset() (int64, error) {
	end := s.Size()
	var pos int64
	next := s.base
	err := s.withIndexes(func(oidx *index.OffsetIndex, _ *index.TimeIndex) {
		if oidx != nil && oidx.Entries() > 0 {
			_, pos = oidx.Entry(oidx.Entries() - 1)
		}
	})
	if err != nil {
		return 0, err
	}
	if pos > end {
		pos = 0
	}
	for pos < end {
		h, err := s.peekHeader(pos, end)
		if err != nil {
			if errors.Is(err, io.EOF) {
				break
			}
			return 0, err
		}
		next = h.lastOffset + 1
		pos += h.size
	}
	return max(next, s.base), nil
}

// withIndexes calls fn with the segment's indexes. If they were not loaded,
// it opens them just for fn and closes them again, so that computing a
// sealed segment's cached NextOffset or MaxTimestamp (which the policies ask
// of every segment) does not keep every index in memory; readers that look
// offsets up load them for good.
func (s *Segment) withIndexes(fn func(*index.OffsetIndex, *index.TimeIndex)) error {
	s.mu.RLock()
	if s.mu.loaded {
		fn(s.mu.oidx, s.mu.tidx)
		s.usedLocked()
		return nil
	}
	s.mu.RUnlock()
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.mu.closed {
		return fmt.Errorf("engine: segment %d: %w", s.base, ErrClosed)
	}
	if s.mu.loaded {
		fn(s.mu.oidx, s.mu.tidx)
		return nil
	}
	if err := s.openIndexesLocked(false); err != nil {
		s.logger.Warn("engine: rebuilding index", "segment", s.mu.files.log, "reason", err)
		if _, err := s.rebuildLocked(false, nil); err != nil {
			return err
		}
		fn(s.mu.oidx, s.mu.tidx) // rebuilt: keep them
		return nil
	}
	fn(s.mu.oidx, s.mu.tidx)
	return s.closeIndexesLocked()
}

// IndexSizes returns the bytes the segment's offset and time index
// entries take (8 and 12 per entry): Kafka's OffsetIndex and TimeIndex
// sizeInBytes, by which its cleaner groups segments. Indexes not loaded
// are opened just for this.
//
// A sealed segment's answer is remembered (its indexes change only when
// rebuilt, which forgets it), so the cleaner's grouping of the same
// segments round after round does not open their indexes again.
func (s *Segment) IndexSizes() (offsetBytes, timeBytes int64, err error) {
	if c := s.idxSizes.Load(); c != nil {
		return c[0], c[1], nil
	}
	sealed := s.Sealed()
	err = s.withIndexes(func(o *index.OffsetIndex, t *index.TimeIndex) {
		if o != nil {
			offsetBytes = int64(o.Entries()) * 8
		}
		if t != nil {
			timeBytes = int64(t.Entries()) * 12
		}
	})
	if err == nil && sealed {
		s.idxSizes.Store(&[2]int64{offsetBytes, timeBytes})
	}
	return offsetBytes, timeBytes, err
}

// MaxTimestamp returns the largest record timestamp in the segment, or the
// .log file's modification time (ms) when it holds no timestamps.
func (s *Segment) MaxTimestamp() int64 {
	ts := s.maxTs.Load()
	if ts == unknownTs {
		ts = -1
		err := s.withIndexes(func(_ *index.OffsetIndex, tidx *index.TimeIndex) {
			if tidx != nil {
				if t, _ := tidx.LastEntry(); t >= 0 {
					ts = t
				}
			}
		})
		if err != nil {
			return s.created.UnixMilli()
		}
		s.maxTs.CompareAndSwap(unknownTs, ts)
		ts = s.maxTs.Load()
	}
	if ts >= 0 {
		return ts
	}
	if fi, err := s.fs.Stat(s.LogPath()); err == nil {
		return fi.ModTime().UnixMilli()
	}
	return s.created.UnixMilli()
}

// FirstBatchTime returns the max timestamp of the first batch, or -1.
func (s *Segment) FirstBatchTime() int64 {
	if ts := s.firstBatchTs.Load(); ts != unknownTs {
		return ts
	}
	ts := int64(-1)
	if s.Size() > 0 {
		if h, err := s.peekHeader(0, s.Size()); err == nil {
			ts = h.maxTs
		}
	}
	if s.Size() > 0 {
		s.firstBatchTs.CompareAndSwap(unknownTs, ts)
	}
	return ts
}

// Retain adds a reference. It must be balanced by Release.
func (s *Segment) Retain() { s.refs.Add(1) }

// tryRetain adds a reference unless the segment is already closed.
func (s *Segment) tryRetain() bool {
	for {
		n := s.refs.Load()
		if n <= 0 {
			return false
		}
		if s.refs.CompareAndSwap(n, n+1) {
			return true
		}
	}
}

// Release drops a reference; the last one closes the files.
func (s *Segment) Release() {
	if n := s.refs.Add(-1); n == 0 {
		if err := s.close(); err != nil {
			s.logger.Warn("engine: closing segment", "segment", s.LogPath(), "err", err)
		}
	} else if n < 0 {
		panic("engine: Segment.Release without Retain")
	}
}

// close closes the log and index files.
func (s *Segment) close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.mu.closed {
		return nil
	}
	s.mu.closed = true
	if m := s.bmemo.Load(); m != nil {
		m.close()
	}
	s.lru.remove(s)
	var errs []error
	errs = append(errs, s.closeIndexesLocked())
	if s.log != nil {
		errs = append(errs, s.log.Close())
	}
	return errors.Join(errs...)
}

func (s *Segment) closeIndexesLocked() error {
	var errs []error
	if s.mu.oidx != nil {
		errs = append(errs, s.mu.oidx.Close())
		s.mu.oidx = nil
	}
	if s.mu.tidx != nil {
		errs = append(errs, s.mu.tidx.Close())
		s.mu.tidx = nil
	}
	if s.mu.txn != nil {
		errs = append(errs, s.mu.txn.Close())
		s.mu.txn = nil
	}
	s.mu.loaded = false
	return errors.Join(errs...)
}

// loadIndexes opens a sealed segment's indexes on first use. Indexes that
// are missing or fail their sanity check are rebuilt from the .log (in
// memory on a read-only partition).
func (s *Segment) loadIndexes() error {
	s.mu.RLock()
	loaded, closed := s.mu.loaded, s.mu.closed
	s.mu.RUnlock()
	if loaded {
		return nil
	}
	if closed {
		return fmt.Errorf("engine: segment %d: %w", s.base, ErrClosed)
	}
	loadedNow, err := s.loadIndexesSlow()
	if loadedNow {
		s.lru.add(s)
	}
	return err
}

func (s *Segment) loadIndexesSlow() (loadedNow bool, err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.mu.loaded {
		return false, nil
	}
	if s.mu.closed {
		return false, fmt.Errorf("engine: segment %d: %w", s.base, ErrClosed)
	}
	err = s.openIndexesLocked(false)
	if err == nil {
		return true, nil
	}
	if errors.Is(err, ErrClosed) {
		return false, err
	}
	s.logger.Warn("engine: rebuilding index", "segment", s.mu.files.log, "reason", err)
	_, err = s.rebuildLocked(false, nil)
	return err == nil, err
}

// usedLocked ends a use of the loaded indexes under the read lock: it
// releases the lock, stamps the segment as used (indexLRU) and rebuilds
// the indexes if a read of their mapping faulted.
func (s *Segment) usedLocked() {
	faulted := s.faultedLocked()
	s.mu.RUnlock()
	s.lru.used(s)
	if faulted {
		s.rebuildFaulted()
	}
}

// faultedLocked reports that a read of a mapped index faulted: its file
// was cut short behind topicfs's back (index.OffsetIndex.Faulted).
func (s *Segment) faultedLocked() bool {
	return (s.mu.oidx != nil && s.mu.oidx.Faulted()) || (s.mu.tidx != nil && s.mu.tidx.Faulted())
}

// rebuildFaulted rebuilds, once, the indexes of a sealed segment whose
// mapping faulted. (The active segment's belong to the writer: its lookups
// keep answering by scanning.)
func (s *Segment) rebuildFaulted() {
	s.rebuildSealed(func() bool {
		if !s.faultedLocked() {
			return false
		}
		s.logger.Warn("engine: index file cut short under its mapping; rebuilding the indexes", "segment", s.mu.files.log)
		return true
	})
}

// rebuildSealed rebuilds a sealed segment's indexes from its .log when
// need, called holding s.mu, says so (the active segment's belong to the
// writer and stay).
func (s *Segment) rebuildSealed(need func() bool) {
	if !s.Sealed() {
		return
	}
	s.mu.Lock()
	if s.mu.closed || !need() {
		s.mu.Unlock()
		return
	}
	_, err := s.rebuildLocked(false, nil)
	s.mu.Unlock()
	if err != nil {
		s.logger.Error("engine: rebuilding index", "segment", s.LogPath(), "err", err)
		return
	}
	s.lru.add(s)
}

// evictIndexes closes a sealed segment's indexes; the next use reloads them.
func (s *Segment) evictIndexes() {
	if !s.Sealed() {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.mu.closed || !s.mu.loaded {
		return
	}
	if s.mu.writable && !s.idxSynced.Load() && s.mu.idxFS == s.fs {
		// Rolled in this process and not flushed yet: make the entries
		// durable before dropping the mapping.
		if err := errors.Join(s.mu.oidx.Sync(), s.mu.tidx.Sync()); err != nil {
			s.logger.Warn("engine: syncing an evicted index", "segment", s.mu.files.log, "err", err)
			return
		}
		s.idxSynced.Store(true)
	}
	if err := s.closeIndexesLocked(); err != nil {
		s.logger.Warn("engine: closing an evicted index", "segment", s.mu.files.log, "err", err)
	}
}

// openIndexesLocked opens the existing index files. writable opens them for
// appends (the active segment): the index package preallocates them.
func (s *Segment) openIndexesLocked(writable bool) error {
	ifs := s.mu.idxFS
	f := s.mu.files
	if f.index == "" || f.timeIndex == "" {
		if s.Size() > 0 {
			return fmt.Errorf("engine: segment %d: index files missing: %w", s.base, fs.ErrNotExist)
		}
	}
	if f.index == "" && !writable {
		// An empty segment without indexes: nothing to look up.
		s.mu.loaded = true
		return nil
	}
	if f.index == "" {
		base := filepath.Join(filepath.Dir(f.log), segmentName(s.base))
		f.index, f.timeIndex = base+indexSuffix, base+timeIndexSuffix
	}
	if f.timeIndex == "" {
		f.timeIndex = strings.TrimSuffix(f.index, indexSuffix) + timeIndexSuffix
	}
	oidx, err := index.OpenOffsetIndex(ifs, f.index, s.base, s.indexMax, writable)
	if err != nil {
		return err
	}
	tidx, err := index.OpenTimeIndex(ifs, f.timeIndex, s.base, s.indexMax, writable)
	if err != nil {
		oidx.Close()
		return err
	}
	if err := errors.Join(oidx.SanityCheck(), tidx.SanityCheck(), s.validateIndexes(oidx, tidx)); err != nil {
		oidx.Close()
		tidx.Close()
		return err
	}
	var txn *index.TxnIndex
	if f.txnIndex != "" {
		txn, err = index.OpenTxnIndex(ifs, f.txnIndex)
		if err != nil {
			oidx.Close()
			tidx.Close()
			return err
		}
		for _, t := range txn.All() {
			if t.LastOffset < s.base {
				oidx.Close()
				tidx.Close()
				txn.Close()
				return fmt.Errorf("engine: segment %d: txn index entry below base: %w", s.base, index.ErrCorruptIndex)
			}
		}
	}
	s.mu.files = f
	s.mu.oidx, s.mu.tidx, s.mu.txn = oidx, tidx, txn
	s.mu.loaded = true
	s.mu.writable = writable
	return nil
}

// txnPathLocked returns where the txn index lives or would be created.
func (s *Segment) txnPathLocked() string {
	if s.mu.files.txnIndex != "" {
		return s.mu.files.txnIndex
	}
	base := s.mu.files.index
	if base == "" {
		base = filepath.Join(filepath.Dir(s.mu.files.log), segmentName(s.base)) + indexSuffix
	}
	return strings.TrimSuffix(base, indexSuffix) + txnIndexSuffix
}

// appendAbortedTxn records an aborted transaction whose marker is in this segment.
func (s *Segment) appendAbortedTxn(t index.AbortedTxn) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.mu.txn == nil {
		p := s.txnPathLocked()
		txn, err := index.OpenTxnIndex(s.mu.idxFS, p)
		if err != nil {
			return err
		}
		s.mu.txn = txn
		s.mu.files.txnIndex = p
	}
	return s.mu.txn.Append(t)
}

// openSegmentFile opens (or creates) a .log file.
func openLogFile(fsys vfs.FS, path string, readOnly, create bool) (vfs.File, error) {
	flag := os.O_RDWR
	if readOnly {
		flag = os.O_RDONLY
	} else if create {
		flag |= os.O_CREATE
	}
	return fsys.OpenFile(path, flag, 0o644)
}
