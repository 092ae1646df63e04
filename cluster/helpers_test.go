package cluster

import (
	"bytes"
	"context"
	"log/slog"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/topicfs/topicfs/engine/record"
)

// newKfake starts an in-process cluster of three brokers (more options
// after), closed at the end of the test.
func newKfake(t testing.TB, opts ...kfake.Opt) *kfake.Cluster {
	t.Helper()
	kc, err := kfake.NewCluster(append([]kfake.Opt{kfake.NumBrokers(3)}, opts...)...)
	require.NoError(t, err)
	t.Cleanup(kc.Close)
	return kc
}

// logBuf collects a test's log lines.
type logBuf struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *logBuf) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *logBuf) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// testOptions are Options for kc: replication factor 3, timeouts short
// enough for a test yet long for a busy machine, logs into logs.
func testOptions(t testing.TB, kc *kfake.Cluster, logs *logBuf) Options {
	return Options{
		Bootstrap:         kc.ListenAddrs(),
		StateDir:          t.TempDir(),
		CacheDir:          t.TempDir(),
		RequestTimeout:    10 * time.Second,
		DeliveryTimeout:   30 * time.Second,
		ReplicationFactor: 3,
		Logger:            slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug})),
	}
}

// openTest opens kc with testOptions changed by mod (if not nil).
func openTest(t testing.TB, kc *kfake.Cluster, mod func(*Options)) (*Cluster, *logBuf) {
	t.Helper()
	logs := &logBuf{}
	o := testOptions(t, kc, logs)
	if mod != nil {
		mod(&o)
	}
	c, err := Open(context.Background(), o)
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, c.Close()) })
	return c, logs
}

// mkTopic creates topic with n partitions through c.
func mkTopic(t testing.TB, c *Cluster, topic string, n int) *Topic {
	t.Helper()
	bt, err := c.CreateTopic(context.Background(), topic, n)
	require.NoError(t, err)
	return bt.(*Topic)
}

// part returns partition id of t.
func part(t testing.TB, tp *Topic, id int) *Partition {
	t.Helper()
	p, err := tp.partition(id)
	require.NoError(t, err)
	return p
}

// values returns records whose values are prefix0 .. prefix(n-1).
func values(prefix string, n int) []record.Record {
	recs := make([]record.Record, n)
	for i := range recs {
		recs[i] = record.Record{Timestamp: -1, Value: []byte(prefix + strconv.Itoa(i))}
	}
	return recs
}

// consume reads want records of topic's partition part from the start with
// an independent client (no topicfs code) and returns them.
func consume(t testing.TB, kc *kfake.Cluster, topic string, part int32, want int) []*kgo.Record {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(kc.ListenAddrs()...),
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: {part: kgo.NewOffset().AtStart()}}))
	require.NoError(t, err)
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute) // a hang guard, not a measurement
	defer cancel()
	var out []*kgo.Record
	for len(out) < want {
		fs := cl.PollFetches(ctx)
		require.NoError(t, ctx.Err(), "consumed %d of %d records", len(out), want)
		fs.EachError(func(_ string, _ int32, err error) { t.Logf("fetch: %v", err) })
		out = append(out, fs.Records()...)
	}
	return out
}
