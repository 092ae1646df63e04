package cluster

import (
	"bytes"
	"context"
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kgo"
)

// benchLines is 100-byte lines (99 bytes and '\n'), n of them.
func benchLines(n int) []byte {
	line := append(bytes.Repeat([]byte("x"), 99), '\n')
	return bytes.Repeat(line, n)
}

// BenchmarkAppendLines produces 64 MiB-ish of 100-byte lines through
// AppendLines in calls of callBytes, each waiting for its
// acknowledgement, beside BenchmarkKgoProduce (the same lines from a
// plain franz-go producer, acks=all, one Flush at the end) in the same
// run against the same kind of in-process cluster.
func BenchmarkAppendLines(b *testing.B) {
	for _, callBytes := range []int{16 << 10, 256 << 10, 1 << 20} {
		b.Run(fmt.Sprintf("call=%dKiB", callBytes>>10), func(b *testing.B) {
			kc := newKfake(b)
			c, _ := openTest(b, kc, nil)
			p := part(b, mkTopic(b, c, "bench", 1), 0)
			lines := benchLines(callBytes / 100)
			ctx := context.Background()
			b.SetBytes(int64(len(lines)))
			b.ResetTimer()
			for b.Loop() {
				_, _, err := p.AppendLines(ctx, lines, 0)
				require.NoError(b, err)
			}
		})
	}
}

func BenchmarkKgoProduce(b *testing.B) {
	kc := newKfake(b)
	c, _ := openTest(b, kc, nil)
	mkTopic(b, c, "bench", 1)
	cl, err := kgo.NewClient(kgo.SeedBrokers(kc.ListenAddrs()...), kgo.DefaultProduceTopic("bench"),
		kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.ProducerBatchCompression(kgo.NoCompression()),
		kgo.ProducerLinger(0))
	require.NoError(b, err)
	defer cl.Close()
	const n = (1 << 20) / 100
	value := bytes.Repeat([]byte("x"), 99)
	ctx := context.Background()
	b.SetBytes(n * 100)
	b.ResetTimer()
	for b.Loop() {
		for range n {
			cl.Produce(ctx, &kgo.Record{Value: value}, func(_ *kgo.Record, err error) {
				if err != nil {
					b.Error(err)
				}
			})
		}
		require.NoError(b, cl.Flush(ctx))
	}
}
