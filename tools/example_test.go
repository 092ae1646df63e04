package tools_test

import (
	"fmt"
	"os"

	"github.com/topicfs/topicfs/engine/record"
	"github.com/topicfs/topicfs/engine/vfs"
	"github.com/topicfs/topicfs/tools"
)

func ExampleDump() {
	// A one-batch segment on an in-memory file system.
	spec := record.NewBatchSpec(0)
	spec.PartitionLeaderEpoch = 0
	raw, _ := record.Encode(nil, spec, []record.Record{
		{Offset: 0, Timestamp: 1632815303637, Value: []byte("drfverv")},
		{Offset: 1, Timestamp: 1632815304456, Key: []byte("k"), Value: []byte("v"), Headers: []record.Header{{Key: "h"}}},
	})
	fsys := vfs.NewMem()
	_ = fsys.MkdirAll("/t-0", 0o755)
	f, _ := fsys.OpenFile("/t-0/00000000000000000000.log", os.O_CREATE|os.O_RDWR, 0o644)
	_, _ = f.WriteAt(raw, 0)
	_ = f.Close()

	err := tools.Dump(os.Stdout, os.Stdout, []string{"/t-0/00000000000000000000.log"}, tools.DumpOptions{PrintData: true, FS: fsys})
	fmt.Println("error:", err)
	// Output:
	// Dumping /t-0/00000000000000000000.log
	// Log starting offset: 0
	// baseOffset: 0 lastOffset: 1 count: 2 baseSequence: -1 lastSequence: -1 producerId: -1 producerEpoch: -1 partitionLeaderEpoch: 0 isTransactional: false isControl: false deleteHorizonMs: OptionalLong.empty position: 0 CreateTime: 1632815304456 size: 88 magic: 2 compresscodec: none crc: 2667820996 isvalid: true
	// | offset: 0 CreateTime: 1632815303637 keySize: -1 valueSize: 7 sequence: -1 headerKeys: [] payload: drfverv
	// | offset: 1 CreateTime: 1632815304456 keySize: 1 valueSize: 1 sequence: -1 headerKeys: [h] key: k payload: v
	// error: <nil>
}

func ExampleCheck() {
	rep, err := tools.Check(os.Stdout, "../testdata/kafka-real/kafka0110-zk-sharaweil/data", tools.CheckOptions{})
	fmt.Println(len(rep.Problems()), "problems,", rep.Records, "records, error:", err)
	// Output:
	// checking ../testdata/kafka-real/kafka0110-zk-sharaweil/data
	// mac_test-0: 1 segments, 0 batches, 0 records, 0 bytes, no records, next offset 78: ok
	// test0-0: 1 segments, 11 batches, 11 records, 757 bytes, offsets 0..10, next offset 11: ok
	// test0-1: 1 segments, 11 batches, 11 records, 758 bytes, offsets 0..10, next offset 11: ok
	// test0-2: 1 segments, 10 batches, 11 records, 698 bytes, offsets 0..10, next offset 11: ok
	// total: 4 partitions, 4 segments, 32 batches, 33 records, 2213 bytes; 0 problems, 0 warnings
	// OK
	// 0 problems, 33 records, error: <nil>
}
