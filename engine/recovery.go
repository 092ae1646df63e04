package engine

import (
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/topicfs/topicfs/engine/index"
	"github.com/topicfs/topicfs/engine/record"
	"github.com/topicfs/topicfs/engine/vfs"
)

// Recovery follows Kafka's LogLoader (docs/FORMATS.md §5.4):
//
//  1. *.deleted files are removed; *.cleaned files are removed, and so are
//     *.swap files at or above the lowest .cleaned base (an unfinished split);
//  2. the remaining *.log.swap segments replace every non-swap segment file
//     whose base lies in [min swap base, max swap next offset); the .swap
//     suffix is then stripped;
//  3. index files without a .log are deleted, and so are the .log.repairing
//     files of an interrupted salvage;
//  4. unless the previous shutdown was clean, every segment from the one
//     holding the recovery point on is scanned: each batch is checked (CRC,
//     length within the file, offsets increasing) and the indexes (and the
//     txn index) are rebuilt. Unlike Kafka, which truncates at the first
//     invalid byte and deletes every later segment, a damaged segment is
//     salvaged (recoversalvage.go): only its damaged byte ranges are moved
//     aside, every intact batch and every other segment stays;
//  5. a missing or insane index of another segment is rebuilt when first used.
//
// A read-only partition does all of this in memory: it never renames,
// deletes, truncates or writes, and rebuilt indexes live in a private MemFS.

// progressEvery bounds how often a long recovery logs its progress.
const (
	progressSegments = 50
	progressInterval = 10 * time.Second
)

// dirFile is a segment-related file found in a partition directory.
type dirFile struct {
	name string // as listed
	base int64
	ext  string // after the first dot: "log", "index.swap", ...
}

func (f dirFile) kind() string { // "log", "index", ... without temporary suffixes
	k := f.ext
	for _, suf := range []string{deletedSuffix, cleanedSuffix, swapSuffix} {
		k = strings.TrimSuffix(k, suf)
	}
	return k
}

func isSegmentKind(k string) bool {
	return k == "log" || k == "index" || k == "timeindex" || k == "txnindex"
}

// load lists, repairs and opens the partition directory.
func (p *Partition) load() error {
	cfg := p.cfg.Load()
	if err := p.openDir(cfg); err != nil {
		return err
	}
	segs, ls := p.applyLogStart(p.list())
	if len(segs) == 0 {
		s, err := p.createSegment(ls, cfg)
		if err != nil {
			return err
		}
		segs = []*Segment{s}
		p.publish(segs)
	}
	if err := p.activate(segs[len(segs)-1]); err != nil {
		return err
	}
	for i, s := range segs[:len(segs)-1] {
		s.sealed.Store(true)
		s.idxSynced.Store(true)
		s.nextBound.Store(segs[i+1].base)
	}
	for _, s := range segs[:len(segs)-1] {
		s.mu.RLock()
		loaded := s.mu.loaded
		s.mu.RUnlock()
		if loaded { // rebuilt by recovery: count it against the bound
			p.indexes.add(s)
		}
	}
	last := segs[len(segs)-1]
	leo := max(last.NextOffset(), last.base)
	p.logEnd.Store(leo)
	p.logStart.Store(ls)
	if err := p.loadLeaderEpochs(); err != nil {
		return err
	}
	if err := p.settleProducers(segs, ls, leo); err != nil {
		return err
	}
	if !p.opts.ReadOnly {
		// Make what recovery changed durable (scanned segments may hold
		// bytes that only reached the page cache), so that the recovery
		// point can be the log end.
		p.w.dirDirty = true
		p.recoveryPoint.Store(-1)
		if err := p.Flush(); err != nil {
			return err
		}
	}
	p.recoveryPoint.Store(leo)
	return nil
}

// openDir creates (read-write) and lists the partition directory, cleans
// its temporary files, opens and publishes its segments and, unless the
// last shutdown was clean, recovers them.
func (p *Partition) openDir(cfg *Config) error {
	ro := p.opts.ReadOnly
	if !ro {
		if err := vfs.MkdirAllDurable(p.fs, p.dir, 0o755); err != nil {
			return err
		}
	}
	entries, err := p.fs.ReadDir(p.dir)
	if err != nil && !(ro && errors.Is(err, os.ErrNotExist)) {
		return err
	}
	files, err := p.cleanTemporaryFiles(entries)
	if err != nil {
		return err
	}
	p.listSnapshots(entries)
	segs, err := p.openSegments(files, cfg)
	if err != nil {
		for _, s := range segs {
			s.Release()
		}
		return err
	}
	p.publish(segs)
	if len(segs) > 0 && !p.opts.CleanShutdown {
		return p.recoverLog()
	}
	return nil
}

// applyLogStart returns the log start offset: the checkpoint, clamped to the
// first segment of segs. A log that ends below the checkpoint loses every
// segment (deleted and unpublished), and applyLogStart returns no segments.
func (p *Partition) applyLogStart(segs []*Segment) ([]*Segment, int64) {
	ls := max(p.opts.LogStartOffset, 0)
	if len(segs) == 0 {
		return segs, ls
	}
	last := segs[len(segs)-1]
	if leo := max(last.NextOffset(), last.base); ls > leo {
		p.logger.Warn("engine: log end below the log start checkpoint: deleting every segment",
			"logEndOffset", leo, "logStartOffset", ls)
		for _, s := range segs {
			p.removeSegmentFiles(s)
			s.Release()
		}
		p.publish(nil)
		return nil, ls
	}
	return segs, max(ls, segs[0].base)
}

// cleanTemporaryFiles applies steps 1–3 and returns each segment's files by base.
func (p *Partition) cleanTemporaryFiles(entries []os.DirEntry) (map[int64]*segFiles, error) {
	d := p.sortDirFiles(entries)
	valid := p.dropUnfinishedSplit(d)
	normal := d.normal
	if len(valid) > 0 {
		var err error
		if normal, err = p.installSwaps(normal, valid); err != nil {
			return nil, err
		}
	}
	return p.segmentFilesByBase(normal), nil
}

// dirFiles are the segment files of a partition directory, by kind.
type dirFiles struct {
	normal, swaps, cleaned []dirFile
	minCleaned             int64 // lowest base of a .cleaned file, MaxInt64 if none
}

// sortDirFiles sorts the segment files of entries by kind, and removes, as
// it goes, the *.deleted files and the .log.repairing of an interrupted
// salvage (the .log beside it is unchanged).
func (p *Partition) sortDirFiles(entries []os.DirEntry) dirFiles {
	d := dirFiles{minCleaned: math.MaxInt64}
	for _, e := range entries {
		if e.IsDir() {
			continue
		}
		base, ext, ok := ParseSegmentName(e.Name())
		if !ok {
			continue
		}
		f := dirFile{name: e.Name(), base: base, ext: ext}
		switch {
		case strings.HasSuffix(ext, deletedSuffix):
			if ext == "checkpoint"+deletedSuffix {
				continue
			}
			p.remove(f.name)
		case strings.HasSuffix(ext, cleanedSuffix):
			d.cleaned = append(d.cleaned, f)
			d.minCleaned = min(d.minCleaned, base)
		case strings.HasSuffix(ext, swapSuffix):
			d.swaps = append(d.swaps, f)
		case ext == "log"+RepairingSuffix:
			// An interrupted salvage: the .log beside it is unchanged.
			p.logger.Info("engine: deleting the leftover of an interrupted salvage", "file", f.name)
			p.remove(f.name)
		default:
			if isSegmentKind(ext) {
				d.normal = append(d.normal, f)
			}
		}
	}
	return d
}

// dropUnfinishedSplit removes the .swap files at or above the lowest
// .cleaned base (an unfinished split), then every .cleaned file, and returns
// the swaps that remain.
func (p *Partition) dropUnfinishedSplit(d dirFiles) []dirFile {
	var valid []dirFile
	for _, f := range d.swaps {
		if f.base >= d.minCleaned {
			p.logger.Info("engine: deleting swap file of an unfinished split", "file", f.name)
			p.remove(f.name)
			continue
		}
		valid = append(valid, f)
	}
	for _, f := range d.cleaned {
		p.remove(f.name)
	}
	return valid
}

// installSwaps applies step 2: the swaps in valid replace every file of
// normal whose base lies in [min swap base, max swap next offset), and lose
// their .swap suffix (on disk unless read-only). It returns the new normal.
func (p *Partition) installSwaps(normal, valid []dirFile) ([]dirFile, error) {
	ro := p.opts.ReadOnly
	minSwap, maxSwap := int64(math.MaxInt64), int64(math.MinInt64)
	for _, f := range valid {
		if f.kind() != "log" {
			continue
		}
		next, err := p.scanNextOffset(f.name, f.base)
		if err != nil {
			return nil, err
		}
		minSwap, maxSwap = min(minSwap, f.base), max(maxSwap, next)
	}
	kept := normal[:0]
	for _, f := range normal {
		if f.base >= minSwap && f.base < maxSwap {
			p.logger.Info("engine: deleting segment file replaced by a swap", "file", f.name)
			p.remove(f.name)
			continue
		}
		kept = append(kept, f)
	}
	normal = kept
	for _, f := range valid {
		final := strings.TrimSuffix(f.name, swapSuffix)
		name := final
		if ro {
			name = f.name
		} else if err := p.fs.Rename(p.path(f.name), p.path(final)); err != nil {
			return nil, fmt.Errorf("engine: install swap file %s: %w", f.name, err)
		}
		normal = append(normal, dirFile{name: name, base: f.base, ext: strings.TrimSuffix(f.ext, swapSuffix)})
	}
	if !ro {
		if err := p.fs.SyncDir(p.dir); err != nil {
			return nil, err
		}
	}
	p.logger.Info("engine: completed an interrupted segment swap", "swaps", len(valid),
		"from", minSwap, "to", maxSwap)
	return normal, nil
}

// segmentFilesByBase groups the files of normal by segment, and applies
// step 3: an index file without a .log is deleted.
func (p *Partition) segmentFilesByBase(normal []dirFile) map[int64]*segFiles {
	out := map[int64]*segFiles{}
	for _, f := range normal {
		if f.kind() != "log" {
			continue
		}
		out[f.base] = &segFiles{log: p.path(f.name)}
	}
	for _, f := range normal {
		sf := out[f.base]
		if sf == nil {
			if isSegmentKind(f.kind()) && f.kind() != "log" {
				p.logger.Info("engine: deleting orphaned index", "file", f.name)
				p.remove(f.name)
			}
			continue
		}
		switch f.kind() {
		case "index":
			sf.index = p.path(f.name)
		case "timeindex":
			sf.timeIndex = p.path(f.name)
		case "txnindex":
			sf.txnIndex = p.path(f.name)
		}
	}
	return out
}

func (p *Partition) path(name string) string { return filepath.Join(p.dir, name) }

// remove deletes a file of the partition directory (not on a read-only one).
func (p *Partition) remove(name string) {
	if p.opts.ReadOnly {
		return
	}
	if err := p.fs.Remove(p.path(name)); err != nil && !errors.Is(err, os.ErrNotExist) {
		p.logger.Warn("engine: remove", "file", name, "err", err)
	}
}

// scanNextOffset reads the headers of a .log file and returns its last offset + 1.
func (p *Partition) scanNextOffset(name string, base int64) (int64, error) {
	f, err := p.fs.OpenFile(p.path(name), os.O_RDONLY, 0)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	end, err := f.Size()
	if err != nil {
		return 0, err
	}
	next := base
	for pos := int64(0); pos < end; {
		h, _, err := peekAt(f, pos, end)
		if err != nil {
			break
		}
		next = max(next, h.lastOffset+1)
		pos += h.size
	}
	return next, nil
}

// openSegments opens every .log, oldest first.
func (p *Partition) openSegments(files map[int64]*segFiles, cfg *Config) ([]*Segment, error) {
	bases := make([]int64, 0, len(files))
	for b := range files {
		bases = append(bases, b)
	}
	slices.Sort(bases)
	segs := make([]*Segment, 0, len(bases))
	for _, b := range bases {
		f := files[b]
		log, err := openLogFile(p.fs, f.log, p.opts.ReadOnly, false)
		if err != nil {
			return segs, err
		}
		size, err := log.Size()
		if err != nil {
			log.Close()
			return segs, err
		}
		s := p.newSegment(b, log, *f, size, cfg)
		s.syncedSize.Store(size)
		if fi, err := p.fs.Stat(f.log); err == nil {
			s.created = fi.ModTime()
		}
		segs = append(segs, s)
	}
	return segs, nil
}

// recoverLog scans the segments from the one holding the recovery point on.
func (p *Partition) recoverLog() error {
	segs := p.list()
	rp := max(p.opts.RecoveryPoint, 0)
	start := 0
	for i, s := range segs {
		if s.base <= rp {
			start = i
		}
	}
	began, lastLog := time.Now(), time.Now()
	// The producer state below the scan: the latest snapshot at or below
	// it plus the batches after that (Kafka's recoverSegment).
	ls := max(p.opts.LogStartOffset, segs[0].base)
	prod, _, err := p.producerStateBelow(segs, ls, segs[start].base, false)
	if err != nil {
		return err
	}
	var bytes int64
	for i := start; i < len(segs); i++ {
		s := segs[i]
		active := i == len(segs)-1
		lim := ScanLimits{Base: s.base, Limit: math.MaxInt64}
		if !active {
			lim.Limit, lim.HasNext = segs[i+1].base, true
		}
		res, err := p.recoverSegment(s, active, lim, prod)
		if err != nil {
			return fmt.Errorf("engine: recover %s: %w", s.LogPath(), err)
		}
		bytes += res.valid
		s.syncedSize.Store(-1) // may hold bytes that only reached the page cache
		if !active {
			// As Kafka, a snapshot after each recovered segment: a later
			// recovery from the next one starts there.
			p.w.producers = prod
			if err := p.takeSnapshotLocked(segs[i+1].base); err != nil {
				p.logger.Warn("engine: producer snapshot during recovery", "err", err)
			}
		}
		if n := i - start + 1; n%progressSegments == 0 || time.Since(lastLog) > progressInterval {
			lastLog = time.Now()
			p.logger.Info("engine: recovering partition", "segments", n, "of", len(segs)-start,
				"bytes", bytes, "elapsed", time.Since(began).Round(time.Millisecond))
		}
	}
	// Producers and transactions still open at the end carry on into new
	// appends.
	p.w.producers = prod
	if n := len(segs) - start; n > progressSegments || time.Since(began) > progressInterval {
		p.logger.Info("engine: recovered partition", "segments", n, "bytes", bytes,
			"elapsed", time.Since(began).Round(time.Millisecond))
	}
	return nil
}

// activate prepares the last segment for appends: writable, preallocated
// indexes and the writer's running max timestamp.
func (p *Partition) activate(s *Segment) error {
	s.sealed.Store(false)
	if p.opts.ReadOnly {
		return nil
	}
	p.releaseReserved(s) // a crash left them
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.mu.loaded && s.mu.writable {
		return nil
	}
	return s.reopenWritableLocked()
}

// reopenWritableLocked (re)opens the indexes of a segment that becomes
// active, for appends; it rebuilds them if they are missing or insane.
func (s *Segment) reopenWritableLocked() error {
	if s.readOnly {
		return nil
	}
	if s.mu.loaded && s.mu.idxFS != s.fs {
		// In-memory indexes of a writable partition cannot happen; rebuild on disk.
		s.closeIndexesLocked()
	}
	if err := s.closeIndexesLocked(); err != nil {
		s.logger.Warn("engine: closing index", "segment", s.mu.files.log, "err", err)
	}
	if err := s.openIndexesLocked(true); err != nil {
		s.logger.Warn("engine: rebuilding index of the active segment", "segment", s.mu.files.log, "reason", err)
		if _, err := s.rebuildLocked(true, nil); err != nil {
			return err
		}
	} else {
		s.w.ib = newIndexBuilder()
		if s.mu.tidx != nil {
			if ts, off := s.mu.tidx.LastEntry(); ts >= 0 {
				s.w.ib.maxTs, s.w.ib.offsetOfMax = ts, off
			}
		}
	}
	s.mu.writable = true
	return nil
}

// scanResult is the outcome of a segment scan.
type scanResult struct {
	valid int64 // bytes of valid batches from the start
	end   int64 // bytes scanned (the committed size)
	cause error // why the scan stopped before end
}

// rebuildLocked scans the .log from the start, verifying every batch (CRC,
// length, increasing offsets), and rebuilds the offset, time and txn indexes
// up to the first invalid batch. The indexes go to disk next to the .log, or
// to a private MemFS on a read-only partition (or for a renamed segment).
// active keeps them writable and preallocated; otherwise they are trimmed
// and get the final time-index entry. prod carries transaction state across
// segments (nil: this segment only). Callers hold s.mu.
func (s *Segment) rebuildLocked(active bool, prod *producerState) (scanResult, error) {
	s.idxSizes.Store(nil) // the rebuilt indexes may hold other entries
	if err := s.closeIndexesLocked(); err != nil {
		s.logger.Warn("engine: closing index", "segment", s.mu.files.log, "err", err)
	}
	if prod == nil {
		prod = newProducerState()
	}
	end := s.Size()
	t, err := s.openRebuiltIndexesLocked(active, end)
	if err != nil {
		return scanResult{}, err
	}
	sc, err := s.scanRebuildLocked(t, end, prod)
	if err != nil {
		return sc.res, err
	}
	if !active {
		if err := s.sealRebuiltLocked(t, sc.ib); err != nil {
			return sc.res, err
		}
	}
	if active {
		s.w.ib = sc.ib // the writer continues from here
	}
	s.next.Store(sc.next)
	s.maxTs.Store(sc.ib.maxTs)
	if sc.res.valid > 0 {
		s.firstBatchTs.Store(sc.firstTs)
	}
	return sc.res, nil
}

// rebuildTarget is where rebuildLocked writes the indexes it rebuilds.
type rebuildTarget struct {
	fs     vfs.FS   // the segment's file system, or a private MemFS
	files  segFiles // paths of the .log and of the new indexes in fs
	onDisk bool     // the indexes go next to the .log
	oidx   *index.OffsetIndex
	tidx   *index.TimeIndex
}

// openRebuiltIndexesLocked deletes the old index files of the segment (on
// disk) and opens empty offset and time indexes in their place, or in a
// private MemFS; they become the segment's indexes. end is the log size.
func (s *Segment) openRebuiltIndexesLocked(active bool, end int64) (rebuildTarget, error) {
	logPath := s.mu.files.log
	t := rebuildTarget{fs: s.fs, onDisk: !s.readOnly && strings.HasSuffix(logPath, logSuffix)}
	maxBytes := s.indexMax
	if t.onDisk {
		b := strings.TrimSuffix(logPath, logSuffix)
		t.files = segFiles{log: logPath, index: b + indexSuffix, timeIndex: b + timeIndexSuffix}
		for _, f := range []string{t.files.index, t.files.timeIndex, b + txnIndexSuffix} {
			if err := t.fs.Remove(f); err != nil && !errors.Is(err, os.ErrNotExist) {
				return t, err
			}
		}
	} else {
		t.fs = vfs.NewMem()
		name := segmentName(s.base)
		t.files = segFiles{log: logPath, index: "/" + name + indexSuffix, timeIndex: "/" + name + timeIndexSuffix}
		if !active {
			// Entries are at least index.interval.bytes apart: size the
			// in-memory index for this segment instead of segment.index.bytes.
			maxBytes = min(maxBytes, int((end/(max(s.interval, 0)+1)+4)*12))
		}
	}
	oidx, err := index.OpenOffsetIndex(t.fs, t.files.index, s.base, maxBytes, true)
	if err != nil {
		return t, err
	}
	tidx, err := index.OpenTimeIndex(t.fs, t.files.timeIndex, s.base, maxBytes, true)
	if err != nil {
		oidx.Close()
		return t, err
	}
	t.oidx, t.tidx = oidx, tidx
	s.mu.idxFS = t.fs
	s.mu.files.index, s.mu.files.timeIndex, s.mu.files.txnIndex = t.files.index, t.files.timeIndex, ""
	s.mu.oidx, s.mu.tidx, s.mu.txn = oidx, tidx, nil
	s.mu.loaded = true
	s.mu.writable = active
	return t, nil
}

// rebuildScan is what scanRebuildLocked found.
type rebuildScan struct {
	res     scanResult
	ib      indexBuilder // running index state after the last valid batch
	next    int64        // offset after the last valid batch
	firstTs int64        // max timestamp of the first batch, -1 if none
}

// scanRebuildLocked reads the batches of the .log up to end, stopping at the
// first invalid one, and adds the index entries they call for to t's
// indexes (and to a txn index it creates at the first aborted transaction).
// Index entries that do not fit are logged and dropped.
func (s *Segment) scanRebuildLocked(t rebuildTarget, end int64, prod *producerState) (rebuildScan, error) {
	sc := rebuildScan{res: scanResult{end: end}, ib: newIndexBuilder(), next: s.base, firstTs: -1}
	var buf []byte
	var pos int64
	var idxErr error
	for pos < end {
		b, err := record.ReadAt(s.log, pos, end, buf)
		if err == nil {
			err = b.Verify()
		}
		if err == nil {
			switch {
			case b.Magic >= 2 && b.BaseOffset < sc.next:
				err = fmt.Errorf("%w: batch base offset %d below %d", ErrCorrupt, b.BaseOffset, sc.next)
			case b.LastOffset() < sc.next || b.LastOffset() < b.BaseOffset:
				err = fmt.Errorf("%w: batch last offset %d below %d", ErrCorrupt, b.LastOffset(), sc.next)
			case b.LastOffset()-s.base > math.MaxInt32:
				err = fmt.Errorf("%w: offset %d too far from the segment base %d", ErrCorrupt, b.LastOffset(), s.base)
			}
		}
		if err != nil {
			if !errors.Is(err, io.EOF) {
				sc.res.cause = err
			}
			break
		}
		buf = b.Raw[:cap(b.Raw)]
		size := int64(b.Size())
		if pos == 0 {
			sc.firstTs = b.MaxTimestamp
		}
		if sc.ib.add(b.LastOffset(), b.MaxTimestamp, pos, size, s.interval) {
			idxErr = errors.Join(idxErr, sparseEntry(t.oidx, t.tidx, b.LastOffset(), pos, sc.ib.maxTs, sc.ib.offsetOfMax))
		}
		if b.ProducerID >= 0 {
			if a := prod.observe(&b); a != nil {
				if s.mu.txn == nil {
					p := strings.TrimSuffix(t.files.index, indexSuffix) + txnIndexSuffix
					txn, err := index.OpenTxnIndex(t.fs, p)
					if err != nil {
						return sc, err
					}
					s.mu.txn, s.mu.files.txnIndex = txn, p
				}
				idxErr = errors.Join(idxErr, s.mu.txn.Append(*a))
			}
		}
		sc.next = b.NextOffset()
		pos += size
	}
	sc.res.valid = pos
	if idxErr != nil {
		s.logger.Warn("engine: index entries dropped during rebuild", "segment", t.files.log, "err", idxErr)
	}
	return sc, nil
}

// sealRebuiltLocked finishes the rebuilt indexes of a segment that is not
// active: the final time-index entry, trimmed, synced and (on disk) reopened
// read-only.
func (s *Segment) sealRebuiltLocked(t rebuildTarget, ib indexBuilder) error {
	var errs []error
	if ib.maxTs >= 0 {
		errs = append(errs, finalTimeEntry(t.tidx, ib.maxTs, ib.offsetOfMax))
	}
	errs = append(errs, t.oidx.Trim(), t.tidx.Trim())
	if t.onDisk {
		errs = append(errs, t.oidx.Sync(), t.tidx.Sync())
		if s.mu.txn != nil {
			errs = append(errs, s.mu.txn.Sync())
		}
	}
	if err := errors.Join(errs...); err != nil {
		return err
	}
	if t.onDisk {
		// Keep no writable mapping or descriptor for a sealed segment:
		// reopen the rebuilt indexes read-only (entries on the heap).
		if err := s.closeIndexesLocked(); err != nil {
			return err
		}
		if err := s.openIndexesLocked(false); err != nil {
			return err
		}
	}
	return nil
}

// sparseEntry adds an offset-index entry (off, pos) and, when ts >= 0, a
// time-index entry (ts, tsOff) to indexes written in one pass (a rebuild or
// a cleaned segment). An index that is full (segment.index.bytes too small
// for the entries index.interval.bytes asks for) stops taking entries: as in
// Kafka the indexes are sparse, and a sparser one only makes a lookup scan
// further from an earlier entry.
func sparseEntry(oidx *index.OffsetIndex, tidx *index.TimeIndex, off, pos, ts, tsOff int64) error {
	var errs []error
	if !oidx.IsFull() {
		errs = append(errs, oidx.Append(off, pos))
	}
	if ts >= 0 && !tidx.IsFull() {
		errs = append(errs, tidx.MaybeAppend(ts, tsOff, false))
	}
	return errors.Join(errs...)
}

// finalTimeEntry appends the time-index entry a segment gets when it is
// sealed or closed. An index with no slot left for it (segment.index.bytes
// too small for one entry) stays without it: the index is only sparser,
// lookups fall back to an earlier entry or the segment start, and a full
// index never fails a roll, a close or a recovery.
func finalTimeEntry(tidx *index.TimeIndex, ts, offset int64) error {
	if err := tidx.MaybeAppend(ts, offset, true); err != nil && !errors.Is(err, index.ErrFull) {
		return err
	}
	return nil
}

// validateIndexes checks index entries against the .log, beyond Kafka's
// sanity check (which trusts a file after a clean shutdown): offset-index
// positions must increase and lie inside the log, and the batch at the last
// entry must be a batch ending at or before the entry's offset; time-index
// offsets must be below the segment's next offset. It computes and caches
// the next offset on the way (a bounded scan from the last entry).
func (s *Segment) validateIndexes(oidx *index.OffsetIndex, tidx *index.TimeIndex) error {
	size := s.Size()
	prev := int64(-1)
	var lastOff, lastPos int64 = s.base, 0
	for i := 0; i < oidx.Entries(); i++ {
		off, pos := oidx.Entry(i)
		if pos <= prev || pos >= size {
			return fmt.Errorf("%w: segment %d: offset index entry %d: position %d (previous %d, log size %d)",
				index.ErrCorruptIndex, s.base, i, pos, prev, size)
		}
		prev, lastOff, lastPos = pos, off, pos
	}
	next := s.base
	for pos := lastPos; pos < size; {
		h, err := s.peekHeader(pos, size)
		if err != nil {
			if pos == lastPos && lastPos > 0 {
				return fmt.Errorf("%w: segment %d: offset index entry points at position %d: %v",
					index.ErrCorruptIndex, s.base, lastPos, err)
			}
			break // the log itself is damaged there: a reader will report it
		}
		if pos == lastPos && lastPos > 0 && h.lastOffset > lastOff {
			return fmt.Errorf("%w: segment %d: offset index entry (%d, %d) but the batch there ends at %d",
				index.ErrCorruptIndex, s.base, lastOff, lastPos, h.lastOffset)
		}
		next = max(next, h.lastOffset+1)
		pos += h.size
	}
	if n := tidx.Entries(); n > 0 {
		if _, off := tidx.Entry(n - 1); off >= next {
			return fmt.Errorf("%w: segment %d: time index offset %d at or past the segment's end %d",
				index.ErrCorruptIndex, s.base, off, next)
		}
	}
	s.next.CompareAndSwap(-1, next)
	return nil
}
