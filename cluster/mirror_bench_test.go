package cluster

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/topicfs/topicfs/engine/vfs"
)

// benchCluster is a 3-broker cluster whose topic "t" holds about mib MiB
// of 200-byte records in 64 KiB batches.
func benchCluster(b *testing.B, mib int) (*kfake.Cluster, *kgo.Client, int64) {
	b.Helper()
	c, err := kfake.NewCluster(kfake.NumBrokers(3), kfake.SeedTopics(1, "t"))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(c.Close)
	p, err := kgo.NewClient(kgo.SeedBrokers(c.ListenAddrs()...), kgo.DefaultProduceTopic("t"),
		kgo.ProducerBatchCompression(kgo.NoCompression()), kgo.ProducerBatchMaxBytes(64<<10))
	if err != nil {
		b.Fatal(err)
	}
	defer p.Close()
	value := []byte(strings.Repeat("v", 200))
	n := mib << 20 / 220
	ctx := context.Background()
	for i := 0; i < n; i += 1000 {
		recs := make([]*kgo.Record, 0, 1000)
		for j := i; j < min(i+1000, n); j++ {
			recs = append(recs, &kgo.Record{Key: fmt.Appendf(nil, "%d", j), Value: value})
		}
		if err := p.ProduceSync(ctx, recs...).FirstErr(); err != nil {
			b.Fatal(err)
		}
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.ListenAddrs()...))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(cl.Close)
	return c, cl, int64(n)
}

// BenchmarkMirrorFill: a fresh copy of the whole partition (the first
// open of records), on disk.
func BenchmarkMirrorFill(b *testing.B) {
	_, cl, n := benchCluster(b, 32)
	f := NewFetcher(cl, FetchOptions{})
	var bytes int64
	for b.Loop() {
		m, err := OpenMirror(vfs.OS, b.TempDir(), MirrorOptions{Logger: quietLogger()})
		if err != nil {
			b.Fatal(err)
		}
		mp, err := m.Partition("c", "t", 0)
		if err != nil {
			b.Fatal(err)
		}
		snap, err := mp.Snapshot(context.Background(), f.Partition("t", 0), 0, n)
		if err != nil {
			b.Fatal(err)
		}
		bytes = mp.Stats().FetchedBytes
		snap.Release()
		m.Close()
	}
	b.SetBytes(bytes)
}

// BenchmarkKgoConsume is the baseline of BenchmarkMirrorFill: a franz-go
// consumer reading the same partition from the start to the end.
func BenchmarkKgoConsume(b *testing.B) {
	c, _, n := benchCluster(b, 32)
	var bytes int64
	for b.Loop() {
		cl, err := kgo.NewClient(kgo.SeedBrokers(c.ListenAddrs()...), kgo.ConsumeTopics("t"),
			kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
		if err != nil {
			b.Fatal(err)
		}
		var got int64
		bytes = 0
		for got < n {
			fs := cl.PollFetches(context.Background())
			if err := fs.Err(); err != nil {
				b.Fatal(err)
			}
			fs.EachRecord(func(r *kgo.Record) {
				got++
				bytes += int64(len(r.Key) + len(r.Value))
			})
		}
		cl.Close()
	}
	b.SetBytes(bytes)
}

// BenchmarkMirrorTail: a fresh copy for the last ten records (by-offset/-10).
func BenchmarkMirrorTail(b *testing.B) {
	_, cl, n := benchCluster(b, 32)
	f := NewFetcher(cl, FetchOptions{})
	for b.Loop() {
		m, err := OpenMirror(vfs.OS, b.TempDir(), MirrorOptions{Logger: quietLogger()})
		if err != nil {
			b.Fatal(err)
		}
		mp, err := m.Partition("c", "t", 0)
		if err != nil {
			b.Fatal(err)
		}
		snap, err := mp.Snapshot(context.Background(), f.Partition("t", 0), n-10, n)
		if err != nil {
			b.Fatal(err)
		}
		b.ReportMetric(float64(mp.Stats().FetchedBytes), "fetched-bytes/op")
		snap.Release()
		m.Close()
	}
}

// BenchmarkMirrorReopen: a Snapshot of a copy that already holds the
// partition (a later open with no growth): no fetch.
func BenchmarkMirrorReopen(b *testing.B) {
	_, cl, n := benchCluster(b, 32)
	f := NewFetcher(cl, FetchOptions{})
	m, err := OpenMirror(vfs.OS, b.TempDir(), MirrorOptions{Logger: quietLogger()})
	if err != nil {
		b.Fatal(err)
	}
	defer m.Close()
	mp, err := m.Partition("c", "t", 0)
	if err != nil {
		b.Fatal(err)
	}
	snap, err := mp.Snapshot(context.Background(), f.Partition("t", 0), 0, n)
	if err != nil {
		b.Fatal(err)
	}
	snap.Release()
	fetched := mp.Stats().Fetches
	for b.Loop() {
		snap, err := mp.Snapshot(context.Background(), f.Partition("t", 0), 0, n)
		if err != nil {
			b.Fatal(err)
		}
		snap.Release()
	}
	b.ReportMetric(float64(mp.Stats().Fetches-fetched)/float64(b.N), "fetches/op")
}
