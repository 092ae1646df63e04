package tools

import (
	"encoding/binary"
	"errors"
	"io"
	"os"
	"sort"

	"github.com/topicfs/topicfs/engine/index"
	"github.com/topicfs/topicfs/engine/record"
	"github.com/topicfs/topicfs/engine/vfs"
)

// Index entries as Kafka stores them (docs/FORMATS.md §4), big-endian:
//
//	.index      +----------------------+---------------------+
//	 8 bytes    | relativeOffset int32 | position int32      |
//	            +----------------------+---------------------+
//	.timeindex  +----------------------+----------------------+
//	 12 bytes   | timestamp int64      | relativeOffset int32 |
//	            +----------------------+----------------------+
//
// Dump reads these raw, every slot up to the zero tail, as DumpLogSegments
// does (it prints entries a stricter reader would refuse), except that an
// all-zero first slot is the preallocated tail of an active segment's index
// with no entry yet, not an entry: DumpLogSegments would print it and then
// report it as a mismatch against the log. Check uses engine/index, which is
// what the engine itself trusts.
const (
	offsetEntrySize = 8
	timeEntrySize   = 12
)

type offsetEntry struct{ offset, pos int64 }

type timeEntry struct{ ts, offset int64 }

// readEntries reads the fixed-size entries of an index file, stopping at the
// first entry after entry 0 whose relative offset is 0 (the zero tail of a
// preallocated file). relAt gives an entry's relative offset. With
// zeroFirstIsEmpty an all-zero entry 0 also ends the entries (a preallocated
// index with no entry yet: Kafka never indexes position 0, and no time index
// entry holds timestamp 0 at the base offset of a live segment).
func readEntries(f vfs.File, size int64, es int, relAt int, zeroFirstIsEmpty bool, fn func(e []byte)) error {
	total := size / int64(es)
	chunk := make([]byte, (64<<10)/es*es)
	for i := int64(0); i < total; {
		n := min(int64(len(chunk)/es), total-i)
		if _, err := f.ReadAt(chunk[:n*int64(es)], i*int64(es)); err != nil && !errors.Is(err, io.EOF) {
			return err
		}
		for j := int64(0); j < n; j++ {
			e := chunk[j*int64(es) : (j+1)*int64(es)]
			if i+j > 0 && binary.BigEndian.Uint32(e[relAt:]) == 0 {
				return nil
			}
			if i+j == 0 && zeroFirstIsEmpty && allZero(e) {
				return nil
			}
			fn(e)
		}
		i += n
	}
	return nil
}

func allZero(b []byte) bool {
	for _, c := range b {
		if c != 0 {
			return false
		}
	}
	return true
}

func readOffsetIndex(fsys vfs.FS, path string, base int64, zeroFirstIsEmpty bool) (entries []offsetEntry, size int64, err error) {
	f, err := fsys.OpenFile(path, os.O_RDONLY, 0)
	if err != nil {
		return nil, 0, err
	}
	defer f.Close()
	if size, err = f.Size(); err != nil {
		return nil, 0, err
	}
	err = readEntries(f, size, offsetEntrySize, 0, zeroFirstIsEmpty, func(e []byte) {
		entries = append(entries, offsetEntry{
			offset: base + int64(int32(binary.BigEndian.Uint32(e))),
			pos:    int64(int32(binary.BigEndian.Uint32(e[4:]))),
		})
	})
	return entries, size, err
}

func readTimeIndex(fsys vfs.FS, path string, base int64, zeroFirstIsEmpty bool) (entries []timeEntry, size int64, err error) {
	f, err := fsys.OpenFile(path, os.O_RDONLY, 0)
	if err != nil {
		return nil, 0, err
	}
	defer f.Close()
	if size, err = f.Size(); err != nil {
		return nil, 0, err
	}
	err = readEntries(f, size, timeEntrySize, 8, zeroFirstIsEmpty, func(e []byte) {
		entries = append(entries, timeEntry{
			ts:     int64(binary.BigEndian.Uint64(e)),
			offset: base + int64(int32(binary.BigEndian.Uint32(e[8:]))),
		})
	})
	return entries, size, err
}

// lookupPos is OffsetIndex.lookup: the position of the largest entry with
// offset <= target, or 0.
func lookupPos(entries []offsetEntry, target int64) int64 {
	i := sort.Search(len(entries), func(i int) bool { return entries[i].offset > target })
	if i == 0 {
		return 0
	}
	return entries[i-1].pos
}

func (d *dumper) dumpIndex(path string) {
	base, err := fileBase(path)
	if err != nil {
		d.fail("dump: %s: index name is not an offset: %w", path, err)
		return
	}
	entries, size, err := readOffsetIndex(d.fs, path, base, true)
	if err != nil {
		d.fail("dump: %w", err)
		return
	}
	if size/offsetEntrySize == 0 {
		if !d.opts.JSON {
			d.printf("%s is empty.\n", path)
		}
		return
	}
	if d.opts.IndexSanityCheck {
		d.sanity(path, func() error {
			x, err := index.OpenOffsetIndex(d.fs, path, base, int(size), false)
			if err != nil {
				return err
			}
			defer x.Close()
			return x.SanityCheck()
		})
		return
	}
	logPath := sibling(path, ".log")
	lf, logSize, ok := d.open(logPath)
	if !ok {
		return
	}
	defer lf.Close()
	abs := absPath(path)
	var buf []byte
	// Raw reads, as in dumpLog (not engine.SegmentReader): dump reports
	// what the files hold, a batch whose CRC fails too, as Kafka's tool does.
	for _, e := range entries {
		b, err := record.ReadAt(lf, e.pos, logSize, buf)
		logOffset := int64(-1)
		if err == nil {
			logOffset = b.LastOffset()
			buf = b.Raw[:cap(b.Raw)]
		}
		if logOffset != e.offset {
			d.indexMismatches.add(abs, e.offset, logOffset)
		}
		if d.opts.VerifyIndexOnly {
			continue
		}
		if d.opts.JSON {
			d.json(struct {
				Type     string `json:"type"`
				Offset   int64  `json:"offset"`
				Position int64  `json:"position"`
			}{"index", e.offset, e.pos})
		} else {
			d.printf("offset: %d position: %d\n", e.offset, e.pos)
		}
	}
}

func (d *dumper) sanity(path string, check func() error) {
	if err := check(); err != nil {
		d.fail("dump: %s failed sanity check: %w", path, err)
		return
	}
	if d.opts.JSON {
		d.json(struct {
			Type   string `json:"type"`
			Path   string `json:"path"`
			Passed bool   `json:"passed"`
		}{"sanityCheck", path, true})
		return
	}
	d.printf("%s passed sanity check.\n", path)
}

// dumpTimeIndex prints a .timeindex file's entries and checks each against
// the batch of the .log beside it that ends at its offset, as
// DumpLogSegments does (the summaries list what does not match); with
// IndexSanityCheck it only checks the index's sanity.
func (d *dumper) dumpTimeIndex(path string) {
	base, err := fileBase(path)
	if err != nil {
		d.fail("dump: %s: index name is not an offset: %w", path, err)
		return
	}
	entries, size, err := readTimeIndex(d.fs, path, base, true)
	if err != nil {
		d.fail("dump: %w", err)
		return
	}
	if d.opts.IndexSanityCheck {
		d.sanity(path, func() error {
			x, err := index.OpenTimeIndex(d.fs, path, base, int(size), false)
			if err != nil {
				return err
			}
			defer x.Close()
			return x.SanityCheck()
		})
		return
	}
	if len(entries) == 0 {
		return
	}
	// A missing .index only makes lookups start at position 0.
	offIdx, _, _ := readOffsetIndex(d.fs, sibling(path, ".index"), base, true)
	lf, logSize, ok := d.open(sibling(path, ".log"))
	if !ok {
		return
	}
	defer lf.Close()
	abs := absPath(path)
	prevTs := int64(-1)
	var (
		found *record.Batch
		buf   []byte
		recs  []record.Record
	)
	for _, e := range entries {
		found, buf = batchReaching(lf, logSize, lookupPos(offIdx, e.offset), e.offset, buf)
		switch {
		case found == nil:
			d.timeNotFound.add(abs, e.offset, -1)
		case found.LastOffset() != e.offset:
			d.timeNotFound.add(abs, e.offset, found.LastOffset())
		default:
			maxTs := int64(-1)
			recs, err = found.Records(recs[:0])
			if err != nil {
				d.fail("dump: %s: batch at offset %d: %w", sibling(path, ".log"), found.LastOffset(), err)
			}
			for _, r := range recs {
				maxTs = max(maxTs, r.Timestamp)
			}
			if maxTs != e.ts {
				d.timeMismatch.add(abs, e.ts, maxTs)
			}
			if prevTs >= e.ts {
				d.timeOutOfOrder.add(abs, e.ts, prevTs)
			}
		}
		if !d.opts.VerifyIndexOnly {
			d.printTimeEntry(e)
		}
		prevTs = e.ts
	}
}

// batchReaching returns the first batch of the log f (size bytes) from
// position pos on whose last offset is at least off, or nil, reading into
// buf; it returns the buffer to read into next.
func batchReaching(f io.ReaderAt, size, pos, off int64, buf []byte) (*record.Batch, []byte) {
	for {
		b, err := record.ReadAt(f, pos, size, buf)
		if err != nil {
			return nil, buf
		}
		buf = b.Raw[:cap(b.Raw)]
		if b.LastOffset() >= off {
			return &b, buf
		}
		pos += int64(b.Size())
	}
}

// printTimeEntry prints one entry of a time index.
func (d *dumper) printTimeEntry(e timeEntry) {
	if d.opts.JSON {
		d.json(struct {
			Type      string `json:"type"`
			Timestamp int64  `json:"timestamp"`
			Offset    int64  `json:"offset"`
		}{"timeindex", e.ts, e.offset})
	} else {
		d.printf("timestamp: %d offset: %d\n", e.ts, e.offset)
	}
}

func (d *dumper) dumpTxnIndex(path string) {
	x, err := index.OpenTxnIndex(d.fs, path)
	if err != nil {
		d.fail("dump: %w", err)
		return
	}
	defer x.Close()
	for _, t := range x.All() {
		if d.opts.JSON {
			d.json(struct {
				Type             string `json:"type"`
				Version          int    `json:"version"`
				ProducerID       int64  `json:"producerId"`
				FirstOffset      int64  `json:"firstOffset"`
				LastOffset       int64  `json:"lastOffset"`
				LastStableOffset int64  `json:"lastStableOffset"`
			}{"abortedTxn", 0, t.ProducerID, t.FirstOffset, t.LastOffset, t.LastStableOffset})
			continue
		}
		d.printf("version: 0 producerId: %d firstOffset: %d lastOffset: %d lastStableOffset: %d\n",
			t.ProducerID, t.FirstOffset, t.LastOffset, t.LastStableOffset)
	}
}

func (d *dumper) dumpSnapshot(path string) {
	f, size, ok := d.open(path)
	if !ok {
		return
	}
	data := make([]byte, size)
	_, err := f.ReadAt(data, 0)
	_ = f.Close()
	if err != nil && !errors.Is(err, io.EOF) {
		d.fail("dump: %s: %w", path, err)
		return
	}
	entries, err := ParseProducerSnapshot(data)
	if err != nil {
		// Kafka prints the CorruptSnapshotException message on stderr.
		d.fail("dump: %s: %w", path, err)
		return
	}
	for _, e := range entries {
		if d.opts.JSON {
			d.json(struct {
				Type string `json:"type"`
				ProducerEntry
			}{"producer", e})
			continue
		}
		d.printf("producerId: %d producerEpoch: %d coordinatorEpoch: %d currentTxnFirstOffset: %s lastTimestamp: %d ",
			e.ProducerID, e.Epoch, e.CoordinatorEpoch,
			optionalLong(e.CurrentTxnFirstOffset, e.CurrentTxnFirstOffset >= 0), e.Timestamp)
		if e.LastOffset >= 0 {
			d.printf("firstSequence: %d lastSequence: %d lastOffset: %d offsetDelta: %d timestamp: %d",
				e.FirstSequence(), e.LastSequence, e.LastOffset, e.OffsetDelta, e.Timestamp)
		}
		d.out.WriteByte('\n')
	}
}
