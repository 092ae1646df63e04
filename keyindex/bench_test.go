package keyindex

import (
	"context"
	"fmt"
	"testing"

	"github.com/topicfs/topicfs/engine/record"
	"github.com/topicfs/topicfs/engine/vfs"
)

// BenchmarkBuild indexes a partition of 100,000 distinct keys (bytes/s is
// log bytes indexed per second).
func BenchmarkBuild(b *testing.B) {
	_, p := testPartition(b, vfs.OS, b.TempDir(), nil)
	value := make([]byte, 100)
	var size int64
	for i := 0; i < 100_000; i += 130 {
		recs := make([]record.Record, 0, 130)
		for j := i; j < i+130; j++ {
			recs = append(recs, record.Record{Key: fmt.Appendf(nil, "user-%08d", j), Value: value})
			size += 120
		}
		appendRecs(b, p, recs...)
	}
	b.SetBytes(size)
	for b.Loop() {
		x := Open(p, NewBudget(1<<30, ""), nil)
		if err := x.Ready(context.Background()); err != nil {
			b.Fatal(err)
		}
		x.Close()
	}
}
