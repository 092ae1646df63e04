package engine_test

import (
	"errors"
	"fmt"
	"io"

	"github.com/topicfs/topicfs/engine"
	"github.com/topicfs/topicfs/engine/record"
	"github.com/topicfs/topicfs/engine/vfs"
)

// Example appends records to a partition and reads them back from a
// snapshot, starting at an offset looked up in the segment's index.
func Example() {
	fs := vfs.NewMem() // vfs.OS for real files
	p, err := engine.OpenPartition(fs, "/data/orders-0", "orders", 0, engine.PartitionOptions{
		Config:         engine.DefaultConfig(),
		RecoveryPoint:  -1, // unknown: scan everything on open
		LogStartOffset: -1,
		FirstDirty:     -1,
	})
	if err != nil {
		panic(err)
	}
	defer p.Close()

	first, last, err := p.Append([]record.Record{
		{Timestamp: 1700000000000, Key: []byte("k1"), Value: []byte("hello")},
		{Timestamp: 1700000000001, Key: []byte("k2"), Value: []byte("world")},
		{Timestamp: -1, Value: nil}, // timestamp now; a tombstone
	})
	if err != nil {
		panic(err)
	}
	fmt.Println("appended", first, "to", last)
	if err := p.Flush(); err != nil { // fsync: now durable
		panic(err)
	}

	// Readers never block the writer: they hold a snapshot of the segments.
	snap := p.Snapshot()
	defer snap.Release()
	seg := snap.Segments[snap.SegmentFor(1)]
	pos, err := seg.FindOffset(1) // the batch holding offset 1
	if err != nil {
		panic(err)
	}
	for {
		b, err := seg.ReadBatch(pos, nil) // CRC-checked
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			panic(err)
		}
		recs, _ := b.Records(nil)
		for _, r := range recs {
			if r.Offset >= 1 {
				fmt.Printf("%d %q %q\n", r.Offset, r.Key, r.Value)
			}
		}
		pos += int64(b.Size())
	}
	off, _ := p.OffsetForTime(1700000000001)
	fmt.Println("first offset at or after the timestamp:", off)
	fmt.Println("log end offset:", p.LogEndOffset(), "recovery point:", p.RecoveryPoint())
	// Output:
	// appended 0 to 2
	// 1 "k2" "world"
	// 2 "" ""
	// first offset at or after the timestamp: 1
	// log end offset: 3 recovery point: 3
}
