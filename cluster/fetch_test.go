package cluster

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/topicfs/topicfs/backend"
	"github.com/topicfs/topicfs/engine/record"
)

// testCluster is a 3-broker kfake cluster with topic "t" (one partition)
// and a client for it.
type testCluster struct {
	c  *kfake.Cluster
	cl *kgo.Client
}

func newTestCluster(t *testing.T, topics ...string) *testCluster {
	t.Helper()
	if len(topics) == 0 {
		topics = []string{"t"}
	}
	c, err := kfake.NewCluster(kfake.NumBrokers(3), kfake.SeedTopics(1, topics...))
	require.NoError(t, err)
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.ListenAddrs()...))
	require.NoError(t, err)
	t.Cleanup(func() {
		cl.Close()
		c.Close()
	})
	return &testCluster{c: c, cl: cl}
}

// sent is a record a test produced, with the offset the broker gave it.
type sent struct {
	offset     int64
	key, value string
	aborted    bool
	txn        bool
}

// producer returns a client producing to topic with codec, transactional
// when txnID is not empty.
func (tc *testCluster) producer(t *testing.T, topic, codec, txnID string) *kgo.Client {
	t.Helper()
	cc := map[string]kgo.CompressionCodec{"none": kgo.NoCompression(), "gzip": kgo.GzipCompression(),
		"snappy": kgo.SnappyCompression(), "lz4": kgo.Lz4Compression(), "zstd": kgo.ZstdCompression()}[codec]
	opts := []kgo.Opt{kgo.SeedBrokers(tc.c.ListenAddrs()...), kgo.DefaultProduceTopic(topic),
		kgo.ProducerBatchCompression(cc), kgo.ProducerLinger(0)}
	if txnID != "" {
		opts = append(opts, kgo.TransactionalID(txnID))
	}
	cl, err := kgo.NewClient(opts...)
	require.NoError(t, err)
	t.Cleanup(cl.Close)
	return cl
}

// produce sends n records (one batch, or two when kgo sends the first
// record before the others join it) and returns them with their offsets.
func produce(t *testing.T, cl *kgo.Client, prefix string, n int) []sent {
	t.Helper()
	ctx := context.Background()
	recs := make([]*kgo.Record, n)
	for i := range recs {
		recs[i] = &kgo.Record{Key: fmt.Appendf(nil, "%s-k%d", prefix, i),
			Value: fmt.Appendf(nil, "%s value %d with some filler to compress %s", prefix, i, prefix)}
	}
	require.NoError(t, cl.ProduceSync(ctx, recs...).FirstErr())
	out := make([]sent, n)
	for i, r := range recs {
		out[i] = sent{offset: r.Offset, key: string(r.Key), value: string(r.Value)}
	}
	return out
}

// produceBatches sends batches batches of n records each.
func produceBatches(t *testing.T, cl *kgo.Client, prefix string, batches, n int) []sent {
	t.Helper()
	var out []sent
	for i := range batches {
		out = append(out, produce(t, cl, fmt.Sprint(prefix, i), n)...)
	}
	return out
}

// produceTxn sends n records in a transaction and commits or aborts it.
func produceTxn(t *testing.T, cl *kgo.Client, prefix string, n int, commit bool) []sent {
	t.Helper()
	require.NoError(t, cl.BeginTransaction())
	out := produce(t, cl, prefix, n)
	require.NoError(t, cl.EndTransaction(context.Background(), kgo.TransactionEndTry(commit)))
	for i := range out {
		out[i].txn, out[i].aborted = true, !commit
	}
	return out
}

// decoded is a record read back, with what its batch says of it.
type decoded struct {
	offset     int64
	key, value string
	producer   int64
	txn        bool
}

// decodeBatches decodes every data record of raw (whole batches, each
// verified), skipping control batches.
func decodeBatches(t *testing.T, raw []byte) []decoded {
	t.Helper()
	var out []decoded
	for len(raw) > 0 {
		size := record.LogOverhead + int(binary.BigEndian.Uint32(raw[8:]))
		b, err := record.Parse(raw[:size])
		require.NoError(t, err)
		require.NoError(t, b.Verify())
		raw = raw[size:]
		if b.IsControl() {
			continue
		}
		recs, err := b.Records(nil)
		require.NoError(t, err)
		for _, r := range recs {
			out = append(out, decoded{offset: r.Offset, key: string(r.Key), value: string(r.Value),
				producer: b.ProducerID, txn: b.IsTransactional()})
		}
	}
	return out
}

// checkRecords compares records read back from offset from on with what
// was sent.
func checkRecords(t *testing.T, want []sent, got []decoded, from int64) {
	t.Helper()
	var w []sent
	for _, s := range want {
		if s.offset >= from {
			w = append(w, s)
		}
	}
	var g []decoded
	for _, d := range got {
		if d.offset >= from {
			g = append(g, d)
		}
	}
	require.Len(t, g, len(w))
	for i := range w {
		assert.Equal(t, w[i].offset, g[i].offset)
		assert.Equal(t, w[i].key, g[i].key)
		assert.Equal(t, w[i].value, g[i].value)
	}
}

// fetchAll fetches from offset to the high watermark.
func fetchAll(t *testing.T, f *Fetcher, topic string, from int64, iso Isolation) ([]byte, *FetchResult) {
	t.Helper()
	var raw []byte
	for off := from; ; {
		res, err := f.Fetch(context.Background(), topic, 0, off, iso)
		require.NoError(t, err)
		if len(res.Batches) == 0 {
			return raw, res
		}
		raw = append(raw, res.Batches...)
		off = res.NextOffset
	}
}

// TestFetchEveryCodec: batches of every codec come back whole and as
// produced, from the start, from inside a batch and from the high
// watermark; past it the offset is out of range.
func TestFetchEveryCodec(t *testing.T) {
	tc := newTestCluster(t)
	var all []sent
	for i, codec := range []string{"none", "gzip", "snappy", "lz4", "zstd"} {
		all = append(all, produce(t, tc.producer(t, "t", codec, ""), codec, 5+i)...)
	}
	var version atomic.Int32
	tc.c.Fault(kfake.Fault{Keys: []kmsg.Key{kmsg.Fetch}, Observe: true, Count: -1, When: func(r kmsg.Request) bool {
		version.Store(int32(r.GetVersion()))
		return true
	}})
	f := NewFetcher(tc.cl, FetchOptions{MaxBytes: 300}) // a few batches per response
	hw := all[len(all)-1].offset + 1
	for _, from := range []int64{0, 7, 12, hw - 1, hw} {
		raw, last := fetchAll(t, f, "t", from, ReadUncommitted)
		assert.Equal(t, hw, last.HighWatermark)
		assert.Equal(t, int64(0), last.LogStartOffset)
		checkRecords(t, all, decodeBatches(t, raw), from)
		if from < hw {
			assert.LessOrEqual(t, int64(binary.BigEndian.Uint64(raw)), from, "the first batch holds from")
		}
	}
	_, err := f.Fetch(context.Background(), "t", 0, hw+5, ReadUncommitted)
	assert.ErrorIs(t, err, backend.ErrOffsetOutOfRange)
	_, err = f.Fetch(context.Background(), "t", 0, -1, ReadUncommitted)
	assert.ErrorIs(t, err, backend.ErrOffsetOutOfRange)
	start, err := f.LogStartOffset(context.Background(), "t", 0)
	require.NoError(t, err)
	assert.Zero(t, start)
	assert.Equal(t, int32(kmsg.NewPtrFetchRequest().MaxVersion()), version.Load(), "the newest version both sides speak (topic ids)")
}

// TestFetchTransactions: read_uncommitted returns every batch, aborted
// ones and markers included; read_committed stops at the last stable
// offset (an open transaction) and names the aborted transaction.
func TestFetchTransactions(t *testing.T) {
	tc := newTestCluster(t)
	plain := produce(t, tc.producer(t, "t", "none", ""), "plain", 3)
	tx := tc.producer(t, "t", "lz4", "tx")
	committed := produceTxn(t, tx, "committed", 4, true)
	aborted := produceTxn(t, tx, "aborted", 4, false)
	open := tc.producer(t, "t", "none", "open")
	require.NoError(t, open.BeginTransaction())
	pending := produce(t, open, "pending", 2)
	f := NewFetcher(tc.cl, FetchOptions{})

	raw, res := fetchAll(t, f, "t", 0, ReadUncommitted)
	all := append(append(append(append([]sent{}, plain...), committed...), aborted...), pending...)
	checkRecords(t, all, decodeBatches(t, raw), 0)
	assert.Equal(t, pending[len(pending)-1].offset+1, res.HighWatermark)
	assert.Equal(t, pending[0].offset, res.LastStableOffset)

	one, err := f.Fetch(context.Background(), "t", 0, 0, ReadCommitted)
	require.NoError(t, err)
	got := decodeBatches(t, one.Batches)
	require.NotEmpty(t, got)
	assert.Less(t, got[len(got)-1].offset, pending[0].offset, "nothing at or past the last stable offset")
	require.Len(t, one.Aborted, 1)
	assert.Equal(t, aborted[0].offset, one.Aborted[0].FirstOffset)
	for _, d := range got {
		if d.offset == aborted[0].offset {
			assert.Equal(t, d.producer, one.Aborted[0].ProducerID)
		}
	}
	require.NoError(t, open.EndTransaction(context.Background(), kgo.TryCommit))
}

// TestFetchFollowsLeader: after leader elections (the epoch moves on,
// the leader may move to another broker) and injected NOT_LEADER answers,
// fetches from several offsets still return the records, through fresh
// metadata.
func TestFetchFollowsLeader(t *testing.T) {
	tc := newTestCluster(t)
	p := tc.producer(t, "t", "snappy", "")
	all := produceBatches(t, p, "b", 6, 4)
	f := NewFetcher(tc.cl, FetchOptions{})
	raw, _ := fetchAll(t, f, "t", 0, ReadUncommitted)
	checkRecords(t, all, decodeBatches(t, raw), 0)
	leaders := map[int32]bool{}
	for round := range 6 {
		tc.c.ShufflePartitionLeaders()
		leaders[tc.c.LeaderFor("t", 0)] = true
		if round%2 == 1 {
			tc.c.Fault(kfake.Fault{Keys: []kmsg.Key{kmsg.Fetch}, Err: kerr.NotLeaderForPartition, Count: 2})
		}
		before := f.Requests()
		from := int64(round * 4)
		raw, res := fetchAll(t, f, "t", from, ReadUncommitted)
		checkRecords(t, all, decodeBatches(t, raw), from)
		assert.Equal(t, tc.c.LeaderFor("t", 0), res.Leader)
		assert.Greater(t, f.Requests()-before, int64(2), "round %d: a refused fetch, metadata, fetches", round)
	}
	t.Logf("leaders seen: %v", leaders)
}

// TestFetchFailures: an unknown topic or partition fails at once; a
// partition that never answers fails with ErrTimedOut after the timeout;
// a canceled context with its own error; a refusal with ErrNotAuthorized.
func TestFetchFailures(t *testing.T) {
	tc := newTestCluster(t)
	produce(t, tc.producer(t, "t", "none", ""), "x", 2)
	// Long enough that a busy machine still fits two attempts (and a metadata
	// refresh between them) before the fetch gives up.
	f := NewFetcher(tc.cl, FetchOptions{Timeout: 5 * time.Second, Backoff: 10 * time.Millisecond})
	ctx := context.Background()
	_, err := f.Fetch(ctx, "nope", 0, 0, ReadUncommitted)
	assert.ErrorIs(t, err, backend.ErrUnknownTopic)
	_, err = f.Fetch(ctx, "t", 3, 0, ReadUncommitted)
	assert.ErrorIs(t, err, backend.ErrUnknownPartition)

	h := tc.c.Fault(kfake.Fault{Keys: []kmsg.Key{kmsg.Fetch}, Err: kerr.NotLeaderForPartition, Count: -1})
	_, err = f.Fetch(ctx, "t", 0, 0, ReadUncommitted)
	assert.ErrorIs(t, err, backend.ErrTimedOut)
	assert.GreaterOrEqual(t, h.Hits(), 2, "retried")
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	_, err = f.Fetch(cctx, "t", 0, 0, ReadUncommitted)
	assert.ErrorIs(t, err, context.Canceled)
	h.Remove()

	tc.c.Fault(kfake.Fault{Keys: []kmsg.Key{kmsg.Fetch}, Err: kerr.TopicAuthorizationFailed})
	_, err = f.Fetch(ctx, "t", 0, 0, ReadUncommitted)
	assert.ErrorIs(t, err, backend.ErrNotAuthorized)
	res, err := f.Fetch(ctx, "t", 0, 0, ReadUncommitted)
	require.NoError(t, err)
	assert.Len(t, decodeBatches(t, res.Batches), 2)
}

// TestFetchPartialBatch: a response that ends inside a batch keeps the
// whole ones; one that holds only the start of a batch larger than asked
// for is fetched again for that batch alone.
func TestFetchPartialBatch(t *testing.T) {
	tc := newTestCluster(t)
	p := tc.producer(t, "t", "none", "")
	all := append(produce(t, p, "small", 2), produce(t, p, "big", 60)...)
	f := NewFetcher(tc.cl, FetchOptions{})
	whole, _ := fetchAll(t, f, "t", 0, ReadUncommitted)
	first := record.LogOverhead + int(binary.BigEndian.Uint32(whole[8:]))
	for _, cut := range []int{first + 30, 30} {
		tc.c.ControlKey(int16(kmsg.Fetch), func(kreq kmsg.Request) (kmsg.Response, error, bool) {
			req := kreq.(*kmsg.FetchRequest)
			resp := req.ResponseKind().(*kmsg.FetchResponse)
			rt := kmsg.NewFetchResponseTopic()
			rt.Topic, rt.TopicID = req.Topics[0].Topic, req.Topics[0].TopicID
			rp := kmsg.NewFetchResponseTopicPartition()
			rp.HighWatermark, rp.LastStableOffset, rp.LogStartOffset = all[len(all)-1].offset+1, all[len(all)-1].offset+1, 0
			rp.RecordBatches = whole[:cut]
			rt.Partitions = append(rt.Partitions, rp)
			resp.Topics = append(resp.Topics, rt)
			return resp, nil, true
		})
		small := NewFetcher(tc.cl, FetchOptions{MaxBytes: int32(min(cut, first))})
		res, err := small.Fetch(context.Background(), "t", 0, 0, ReadUncommitted)
		require.NoError(t, err)
		if cut > first {
			assert.Equal(t, whole[:first], res.Batches, "the partial batch is dropped")
			assert.Equal(t, all[2].offset, res.NextOffset)
		} else {
			assert.Equal(t, whole[:first], res.Batches, "fetched again whole")
		}
	}
}

// TestWholeBatches: every length in a response is checked.
func TestWholeBatches(t *testing.T) {
	batch := func(base int64, n int) []byte {
		recs := make([]record.Record, n)
		for i := range recs {
			recs[i] = record.Record{Offset: base + int64(i), Value: []byte("v")}
		}
		out, err := record.Encode(nil, record.NewBatchSpec(base), recs)
		require.NoError(t, err)
		return out
	}
	a, b, c := batch(0, 3), batch(3, 2), batch(10, 1)
	raw := append(append(append([]byte{}, a...), b...), c...)
	whole, next, partial, err := wholeBatches(raw, 0)
	require.NoError(t, err)
	assert.Equal(t, raw, whole)
	assert.Equal(t, []int64{11, 0}, []int64{next, partial})

	whole, next, partial, err = wholeBatches(raw[:len(raw)-5], 4)
	require.NoError(t, err)
	assert.Equal(t, b, whole, "a batch ending before the offset is skipped, a partial one dropped")
	assert.Equal(t, []int64{5, int64(len(c))}, []int64{next, partial})

	_, _, partial, err = wholeBatches(raw[:7], 0)
	require.NoError(t, err)
	assert.Equal(t, int64(record.LogOverhead), partial)

	bad := append([]byte{}, a...)
	binary.BigEndian.PutUint32(bad[8:], 0xfffffff0)
	_, _, _, err = wholeBatches(bad, 0)
	assert.ErrorIs(t, err, backend.ErrCorrupt)
	binary.BigEndian.PutUint32(bad[8:], 13)
	_, _, _, err = wholeBatches(bad, 0)
	assert.ErrorIs(t, err, backend.ErrCorrupt)
	_, _, _, err = wholeBatches(append(append([]byte{}, b...), a...), 0)
	assert.ErrorIs(t, err, backend.ErrCorrupt, "offsets go back")
	magic := append([]byte{}, a...)
	magic[16] = 7
	_, _, _, err = wholeBatches(magic, 0)
	assert.True(t, errors.Is(err, record.ErrCorrupt) || errors.Is(err, record.ErrUnsupported), "%v", err)
}
