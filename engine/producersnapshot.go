// Producer state snapshots: <offset>.snapshot files in a partition
// directory, in Kafka's format (docs/FORMATS.md §7), holding the producer
// state of every batch below <offset>. A Partition writes one when a
// segment rolls (named by the new segment's base offset) and on Close (at
// the log end), deletes one with the segment of its name, and keeps only
// the ones Kafka keeps; opening a partition starts from the latest one
// instead of scanning the whole log (producerload.go).

package engine

import (
	"cmp"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/topicfs/topicfs/engine/vfs"
)

// ErrCorruptSnapshot reports a producer snapshot with an unknown version,
// a bad CRC or a size that does not match its entry count. Its messages
// use the words of Kafka's CorruptSnapshotException.
var ErrCorruptSnapshot = errors.New("corrupt producer snapshot")

// Producer snapshot layout (big-endian):
//
//	+---------------+-----------+-------------+----------------------------+
//	| version int16 | crc u32   | count int32 | count × entry (46 bytes)   |
//	+---------------+-----------+-------------+----------------------------+
//	entry: producerId int64 | epoch int16 | lastSequence int32 | lastOffset int64 |
//	       offsetDelta int32 | timestamp int64 | coordinatorEpoch int32 |
//	       currentTxnFirstOffset int64 (-1 = none)
//
// The CRC is CRC-32C of everything from count (byte 6) to the end of the
// file. The only version is 1. An empty snapshot is 10 bytes.
const (
	snapshotSuffix     = ".snapshot"
	snapshotVersion    = 1
	snapshotHeaderSize = 10
	snapshotEntrySize  = 46
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// ProducerEntry is one producer of a snapshot: its epoch, the sequence
// and offsets of its last data batch (LastOffset -1: none in this epoch),
// the timestamp of its last batch or marker, the coordinator epoch of its
// last marker and the first offset of its open transaction (-1: none).
type ProducerEntry struct {
	ProducerID            int64 `json:"producerId"`
	Epoch                 int16 `json:"producerEpoch"`
	LastSequence          int32 `json:"lastSequence"`
	LastOffset            int64 `json:"lastOffset"`
	OffsetDelta           int32 `json:"offsetDelta"`
	Timestamp             int64 `json:"timestamp"`
	CoordinatorEpoch      int32 `json:"coordinatorEpoch"`
	CurrentTxnFirstOffset int64 `json:"currentTxnFirstOffset"`
}

// FirstSequence is LastSequence - OffsetDelta, wrapping below 0 to
// MaxInt32 as Kafka's DefaultRecordBatch.decrementSequence does.
func (e ProducerEntry) FirstSequence() int32 { return decrementSequence(e.LastSequence, e.OffsetDelta) }

// AppendProducerSnapshot appends the snapshot file holding entries, in
// their order, to dst.
func AppendProducerSnapshot(dst []byte, entries []ProducerEntry) []byte {
	be := binary.BigEndian
	start := len(dst)
	dst = be.AppendUint16(dst, snapshotVersion)
	dst = be.AppendUint32(dst, 0) // the CRC, once the entries are there
	dst = be.AppendUint32(dst, uint32(len(entries)))
	for _, e := range entries {
		dst = be.AppendUint64(dst, uint64(e.ProducerID))
		dst = be.AppendUint16(dst, uint16(e.Epoch))
		dst = be.AppendUint32(dst, uint32(e.LastSequence))
		dst = be.AppendUint64(dst, uint64(e.LastOffset))
		dst = be.AppendUint32(dst, uint32(e.OffsetDelta))
		dst = be.AppendUint64(dst, uint64(e.Timestamp))
		dst = be.AppendUint32(dst, uint32(e.CoordinatorEpoch))
		dst = be.AppendUint64(dst, uint64(e.CurrentTxnFirstOffset))
	}
	be.PutUint32(dst[start+2:], crc32.Checksum(dst[start+6:], castagnoli))
	return dst
}

// ParseProducerSnapshot decodes a producer snapshot file. Errors wrap
// ErrCorruptSnapshot.
func ParseProducerSnapshot(data []byte) ([]ProducerEntry, error) {
	if len(data) < snapshotHeaderSize {
		return nil, fmt.Errorf("%w: Snapshot of %d bytes is shorter than its %d-byte header", ErrCorruptSnapshot, len(data), snapshotHeaderSize)
	}
	be := binary.BigEndian
	if v := int16(be.Uint16(data)); v != snapshotVersion {
		return nil, fmt.Errorf("%w: Snapshot contained an unknown file version %d", ErrCorruptSnapshot, v)
	}
	stored := be.Uint32(data[2:])
	if computed := crc32.Checksum(data[6:], castagnoli); computed != stored {
		return nil, fmt.Errorf("%w: Snapshot is corrupt (CRC is no longer valid). Stored crc: %d. Computed crc: %d", ErrCorruptSnapshot, stored, computed)
	}
	count := int32(be.Uint32(data[6:]))
	body := data[snapshotHeaderSize:]
	if count < 0 || int64(count)*snapshotEntrySize != int64(len(body)) {
		return nil, fmt.Errorf("%w: %d entries in %d bytes", ErrCorruptSnapshot, count, len(body))
	}
	out := make([]ProducerEntry, count)
	for i := range out {
		e := body[i*snapshotEntrySize:]
		out[i] = ProducerEntry{
			ProducerID:            int64(be.Uint64(e)),
			Epoch:                 int16(be.Uint16(e[8:])),
			LastSequence:          int32(be.Uint32(e[10:])),
			LastOffset:            int64(be.Uint64(e[14:])),
			OffsetDelta:           int32(be.Uint32(e[22:])),
			Timestamp:             int64(be.Uint64(e[26:])),
			CoordinatorEpoch:      int32(be.Uint32(e[34:])),
			CurrentTxnFirstOffset: int64(be.Uint64(e[38:])),
		}
	}
	return out, nil
}

// entries returns the state as snapshot entries, sorted by producer id.
func (ps *producerState) entries() []ProducerEntry {
	out := make([]ProducerEntry, 0, len(ps.producers))
	for pid, e := range ps.producers {
		pe := ProducerEntry{ProducerID: pid, Epoch: e.epoch, LastSequence: e.lastSeq(), LastOffset: e.lastDataOffset(),
			Timestamp: e.lastTimestamp, CoordinatorEpoch: e.coordinatorEpoch, CurrentTxnFirstOffset: e.txnFirst}
		if n := len(e.batches); n > 0 {
			pe.OffsetDelta = e.batches[n-1].offsetDelta
		}
		out = append(out, pe)
	}
	slices.SortFunc(out, func(a, b ProducerEntry) int { return cmp.Compare(a.ProducerID, b.ProducerID) })
	return out
}

// load adds the entries of a snapshot, as Kafka's readSnapshot and
// loadProducerEntry do: the last batch is the only one known, producers
// idle for producerExpirationMs before nowMs are left out.
func (ps *producerState) load(entries []ProducerEntry, nowMs int64) {
	for _, pe := range entries {
		if pe.CurrentTxnFirstOffset < 0 && nowMs-pe.Timestamp >= producerExpirationMs {
			continue
		}
		e := &producerEntry{epoch: pe.Epoch, coordinatorEpoch: pe.CoordinatorEpoch, lastTimestamp: pe.Timestamp, txnFirst: -1}
		if pe.LastOffset >= 0 {
			e.batches = []batchMeta{{lastSeq: pe.LastSequence, lastOffset: pe.LastOffset, offsetDelta: pe.OffsetDelta, timestamp: pe.Timestamp}}
		}
		ps.producers[pe.ProducerID] = e
		if pe.CurrentTxnFirstOffset >= 0 {
			ps.setTxn(pe.ProducerID, e, pe.CurrentTxnFirstOffset)
		}
	}
}

// snapshotFiles are the producer snapshots of a partition directory.
type snapshotFiles struct {
	offsets  []int64        // sorted
	unsynced map[int64]bool // written since the last Flush
}

// listSnapshots sets the partition's snapshot list from entries (a
// listing of its directory).
func (p *Partition) listSnapshots(entries []os.DirEntry) {
	var offs []int64
	for _, e := range entries {
		if base, ext, ok := ParseSegmentName(e.Name()); ok && !e.IsDir() && ext == strings.TrimPrefix(snapshotSuffix, ".") {
			offs = append(offs, base)
		}
	}
	slices.Sort(offs)
	p.w.snaps = snapshotFiles{offsets: offs, unsynced: map[int64]bool{}}
}

func (p *Partition) snapshotPath(off int64) string {
	return filepath.Join(p.dir, segmentName(off)+snapshotSuffix)
}

// takeSnapshotLocked writes the producer state to <off>.snapshot, unless
// one is there already (Kafka takes a snapshot only at a new offset) or
// the partition is read-only. The file is fsynced by the next Flush; a
// snapshot torn by a crash fails its CRC and is passed over at the next
// open. Callers hold mu.
func (p *Partition) takeSnapshotLocked(off int64) error {
	_, err := p.writeSnapshotLocked(off, false)
	return err
}

// writeSnapshotLocked is takeSnapshotLocked; with sync the new file is
// fsynced before it is closed (not left to the next Flush). written says
// whether a file was written.
func (p *Partition) writeSnapshotLocked(off int64, sync bool) (written bool, err error) {
	if p.opts.ReadOnly || slices.Contains(p.w.snaps.offsets, off) {
		return false, nil
	}
	p.w.producers.expire(p.now().UnixMilli())
	data := AppendProducerSnapshot(nil, p.w.producers.entries())
	path := p.snapshotPath(off)
	f, err := p.fs.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o644)
	if err != nil {
		return false, fmt.Errorf("engine: write producer snapshot: %w", err)
	}
	_, err = f.Write(data)
	if err == nil && sync {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		p.remove(filepath.Base(path))
		return false, fmt.Errorf("engine: write producer snapshot %s: %w", path, err)
	}
	i, _ := slices.BinarySearch(p.w.snaps.offsets, off)
	p.w.snaps.offsets = slices.Insert(p.w.snaps.offsets, i, off)
	if !sync {
		p.w.snaps.unsynced[off] = true
	}
	p.w.dirDirty = true
	return true, nil
}

// rollSnapshotLocked takes the snapshot a roll takes (Kafka's), named by
// the new active segment's base. A failure is logged, not returned: the
// roll happened, and a recovery only scans further back without it.
func (p *Partition) rollSnapshotLocked(base int64) {
	if err := p.takeSnapshotLocked(base); err != nil {
		p.logger.Warn("engine: producer snapshot at roll", "base", base, "err", err)
	}
}

// syncSnapshots fsyncs the snapshot files written since the last call
// (Flush calls it; the caller then syncs the directory).
func (p *Partition) syncSnapshots() error {
	p.mu.Lock()
	var offs []int64
	for off := range p.w.snaps.unsynced {
		offs = append(offs, off)
	}
	clear(p.w.snaps.unsynced)
	p.mu.Unlock()
	var errs []error
	for _, off := range offs {
		err := syncFile(p.fs, p.snapshotPath(off))
		if errors.Is(err, os.ErrNotExist) {
			continue // deleted since
		}
		if err != nil {
			errs = append(errs, err)
			p.mu.Lock()
			p.w.snaps.unsynced[off] = true
			p.mu.Unlock()
		}
	}
	return errors.Join(errs...)
}

// syncFile fsyncs the file at path.
func syncFile(fsys vfs.FS, path string) error {
	f, err := fsys.OpenFile(path, os.O_RDONLY, 0)
	if err != nil {
		return err
	}
	err = f.Sync()
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

// deleteSnapshotLocked renames <off>.snapshot to .deleted, queued for
// PurgeDeleted like the files of the segment it goes with (Kafka's
// removeAndMarkSnapshotForDeletion). Callers hold mu.
func (p *Partition) deleteSnapshotLocked(off int64, due time.Time) {
	i, ok := slices.BinarySearch(p.w.snaps.offsets, off)
	if !ok || p.opts.ReadOnly {
		return
	}
	p.w.snaps.offsets = slices.Delete(p.w.snaps.offsets, i, i+1)
	delete(p.w.snaps.unsynced, off)
	path := p.snapshotPath(off)
	if err := p.fs.Rename(path, path+deletedSuffix); err != nil {
		if !errors.Is(err, os.ErrNotExist) {
			p.logger.Warn("engine: rename producer snapshot to .deleted", "file", path, "err", err)
		}
		return
	}
	p.w.deleted = append(p.w.deleted, deletedFile{path: path + deletedSuffix, due: due})
	p.w.dirDirty = true
}

// removeSnapshotsLocked unlinks the snapshots for which drop is true.
// Callers hold mu.
func (p *Partition) removeSnapshotsLocked(drop func(off int64) bool) {
	if p.opts.ReadOnly {
		return
	}
	kept := p.w.snaps.offsets[:0]
	for _, off := range p.w.snaps.offsets {
		if !drop(off) {
			kept = append(kept, off)
			continue
		}
		delete(p.w.snaps.unsynced, off)
		p.remove(filepath.Base(p.snapshotPath(off)))
		p.w.dirDirty = true
	}
	p.w.snaps.offsets = kept
}

// pruneSnapshotsLocked deletes the snapshots Kafka no longer keeps once
// the recovery point is durable (deleteSnapshotsAfterRecoveryPointCheckpoint):
// those below both the base of the segment before the one holding the
// recovery point and the base of the segment before the active one. A
// recovery then finds a snapshot at or below where its scan starts.
// Callers hold mu.
func (p *Partition) pruneSnapshotsLocked() {
	if len(p.w.snaps.offsets) == 0 {
		return
	}
	l := p.list()
	if len(l) == 0 {
		return
	}
	keep := l[max(len(l)-2, 0)].base
	rp := p.recoveryPoint.Load()
	below := rp
	for _, s := range l {
		if s.base < rp {
			below = s.base
		}
	}
	bound := min(keep, below)
	p.removeSnapshotsLocked(func(off int64) bool { return off < bound })
}
