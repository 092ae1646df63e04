package record_test

import (
	"bytes"
	"fmt"
	"io"

	"github.com/topicfs/topicfs/engine/record"
)

func Example() {
	// Encode two batches as a broker would append them to a segment.
	var file []byte
	for i, codec := range []record.Codec{record.None, record.LZ4} {
		base := int64(i * 2)
		spec := record.NewBatchSpec(base)
		spec.Codec = codec
		recs := []record.Record{
			{Offset: base, Timestamp: 1_700_000_000_000, Key: []byte("k"), Value: []byte("hello")},
			{Offset: base + 1, Timestamp: 1_700_000_000_005, Value: []byte("world")},
		}
		var err error
		if file, err = record.Encode(file, spec, recs); err != nil {
			panic(err)
		}
	}

	// Read them back batch by batch.
	r := bytes.NewReader(file)
	for pos := int64(0); ; {
		b, err := record.ReadAt(r, pos, int64(len(file)), nil)
		if err == io.EOF {
			break
		}
		if err != nil {
			panic(err)
		}
		if err := b.Verify(); err != nil {
			panic(err)
		}
		recs, err := b.Records(nil)
		if err != nil {
			panic(err)
		}
		fmt.Printf("batch %d..%d codec %s:", b.BaseOffset, b.LastOffset(), b.Codec())
		for _, rec := range recs {
			fmt.Printf(" %d=%s", rec.Offset, rec.Value)
		}
		fmt.Println()
		pos += int64(b.Size())
	}
	// Output:
	// batch 0..1 codec none: 0=hello 1=world
	// batch 2..3 codec lz4: 2=hello 3=world
}

func ExampleEncodeControlBatch() {
	spec := record.NewBatchSpec(0)
	spec.ProducerID, spec.ProducerEpoch = 4001, 0
	raw, err := record.EncodeControlBatch(nil, spec, 12, 1_700_000_000_000, record.ControlCommit, 5)
	if err != nil {
		panic(err)
	}
	b, err := record.Parse(raw)
	if err != nil {
		panic(err)
	}
	typ, _ := b.ControlType()
	fmt.Println(b.IsControl(), b.IsTransactional(), b.BaseOffset, typ == record.ControlCommit, len(raw))
	// Output: true true 12 true 78
}
