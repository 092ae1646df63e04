package cluster

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
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

func TestAppendEachAndLines(t *testing.T) {
	kc := newKfake(t)
	c, _ := openTest(t, kc, nil)
	ctx := context.Background()
	tp := mkTopic(t, c, "orders", 2)
	p := part(t, tp, 1)

	key := []byte("k")
	groups := [][]record.Record{
		{{Timestamp: 1700000000000, Key: key, Value: []byte("v0"),
			Headers: []record.Header{{Key: "h", Value: []byte("hv")}, {Key: "nil"}}}},
		{{Timestamp: -1, Key: []byte{}, Value: nil}, {Timestamp: -1, Value: []byte("v2")}},
	}
	first, last, err := p.AppendEach(ctx, groups)
	require.NoError(t, err)
	assert.Equal(t, int64(0), first)
	assert.Equal(t, int64(2), last)
	key[0] = 'X' // the caller's buffers are its own again

	first, last, err = p.AppendLines(ctx, []byte("l0\nl1\n\nl3\n"), 0)
	require.NoError(t, err)
	assert.Equal(t, int64(3), first)
	assert.Equal(t, int64(6), last)
	_, _, err = p.AppendLines(ctx, []byte("no newline"), 0)
	assert.Error(t, err)
	first, last, err = p.AppendEach(ctx, nil)
	require.NoError(t, err)
	assert.Greater(t, first, last, "nothing appended")

	got := consume(t, kc, "orders", 1, 7)
	require.Len(t, got, 7)
	assert.Equal(t, "k", string(got[0].Key))
	assert.Equal(t, int64(1700000000000), got[0].Timestamp.UnixMilli())
	assert.Equal(t, []kgo.RecordHeader{{Key: "h", Value: []byte("hv")}, {Key: "nil"}}, got[0].Headers)
	assert.NotNil(t, got[1].Key, "an empty key stays empty, not null")
	assert.Empty(t, got[1].Key)
	assert.Nil(t, got[1].Value, "a null value stays null")
	assert.Nil(t, got[2].Key, "a null key stays null")
	var lines []string
	for _, r := range got[3:] {
		lines = append(lines, string(r.Value))
	}
	assert.Equal(t, []string{"l0", "l1", "", "l3"}, lines)
	for i, r := range got {
		assert.Equal(t, int64(i), r.Offset)
	}

	offs, err := p.Offsets(ctx)
	require.NoError(t, err)
	assert.Equal(t, backend.Offsets{LogStart: 0, End: 7}, offs)
	require.NoError(t, p.Sync(ctx))
	offs, err = part(t, tp, 0).Offsets(ctx)
	require.NoError(t, err)
	assert.Equal(t, backend.Offsets{}, offs)
}

func TestOffsetForTime(t *testing.T) {
	kc := newKfake(t)
	c, _ := openTest(t, kc, nil)
	ctx := context.Background()
	p := part(t, mkTopic(t, c, "times", 1), 0)
	var recs []record.Record
	for i, ts := range []int64{1000, 2000, 2000, 3000} {
		recs = append(recs, record.Record{Timestamp: ts, Value: []byte{byte('a' + i)}})
	}
	_, _, err := p.AppendEach(ctx, [][]record.Record{recs[:2], recs[2:]})
	require.NoError(t, err)
	for _, tc := range []struct{ ts, want int64 }{
		{-5, 0}, {0, 0}, {1000, 0}, {1001, 1}, {2000, 1}, {2500, 3}, {3000, 3}, {3001, 4}, {1 << 50, 4},
	} {
		got, err := p.OffsetForTime(ctx, tc.ts)
		require.NoError(t, err)
		assert.Equal(t, tc.want, got, "ts %d", tc.ts)
	}
}

// TestLastStable: an open transaction of another producer holds the last
// stable offset at its first record while the high watermark moves on.
func TestLastStable(t *testing.T) {
	kc := newKfake(t)
	c, _ := openTest(t, kc, nil)
	ctx := context.Background()
	p := part(t, mkTopic(t, c, "txn", 1), 0)
	_, _, err := p.AppendLines(ctx, []byte("a\nb\n"), 0)
	require.NoError(t, err)

	txn, err := kgo.NewClient(kgo.SeedBrokers(kc.ListenAddrs()...), kgo.TransactionalID("t1"),
		kgo.DefaultProduceTopic("txn"), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	require.NoError(t, err)
	defer txn.Close()
	require.NoError(t, txn.BeginTransaction())
	require.NoError(t, txn.ProduceSync(ctx, &kgo.Record{Value: []byte("open")}).FirstErr())

	offs, err := p.Offsets(ctx)
	require.NoError(t, err)
	assert.Equal(t, int64(3), offs.End)
	lso, err := p.LastStable(ctx)
	require.NoError(t, err)
	assert.Equal(t, int64(2), lso, "read_committed stops at the open transaction")

	require.NoError(t, txn.EndTransaction(ctx, kgo.TryCommit))
	lso, err = p.LastStable(ctx)
	require.NoError(t, err)
	assert.Equal(t, int64(4), lso, "committed: the record and its marker")
}

func TestSubscribe(t *testing.T) {
	kc := newKfake(t)
	c, _ := openTest(t, kc, nil)
	ctx := context.Background()
	p := part(t, mkTopic(t, c, "watched", 1), 0)
	ch, cancel := p.Subscribe()
	ch2, cancel2 := p.Subscribe()
	<-ch // the first poll
	<-ch2

	// A record from another client: the poll sees the high watermark move.
	other, err := kgo.NewClient(kgo.SeedBrokers(kc.ListenAddrs()...), kgo.DefaultProduceTopic("watched"))
	require.NoError(t, err)
	defer other.Close()
	require.NoError(t, other.ProduceSync(ctx, &kgo.Record{Value: []byte("x")}).FirstErr())
	<-ch
	<-ch2

	// An append of this backend signals at once.
	cancel2()
	cancel2() // harmless twice
	_, _, err = p.AppendLines(ctx, []byte("y\n"), 0)
	require.NoError(t, err)
	<-ch
	c.mu.Lock()
	assert.Len(t, c.watchers, 1)
	c.mu.Unlock()
	cancel()
	c.mu.Lock()
	assert.Empty(t, c.watchers, "the last subscriber stops the polls")
	c.mu.Unlock()
}

// TestRecordTooLarge: a record above max.message.bytes fails with
// ErrRecordTooLarge, whether the client refuses it (it knows the limit)
// or the broker does (the limit was lowered after the client learned it).
func TestRecordTooLarge(t *testing.T) {
	kc := newKfake(t)
	c, _ := openTest(t, kc, nil)
	ctx := context.Background()
	tp := mkTopic(t, c, "small", 2)
	many := make([]record.Record, 100) // 100-byte records: batches of them are above 2000 bytes
	for i := range many {
		many[i] = record.Record{Timestamp: -1, Value: make([]byte, 100)}
	}
	_, _, err := part(t, tp, 0).AppendEach(ctx, [][]record.Record{many})
	require.NoError(t, err)
	require.NoError(t, tp.AlterConfig(ctx, map[string]string{"max.message.bytes": "2000"}))
	assert.Equal(t, int64(2000), tp.Settings().MaxRecordBytes)
	big := record.Record{Timestamp: -1, Value: make([]byte, 5000)}
	_, _, err = part(t, tp, 0).AppendEach(ctx, [][]record.Record{{big}})
	assert.ErrorIs(t, err, backend.ErrRecordTooLarge, "the client's check")
	_, _, err = part(t, tp, 0).AppendEach(ctx, [][]record.Record{many})
	require.NoError(t, err, "small records still go, in batches within the new limit")

	// Partition 1 is produced to while the limit is high, then another
	// client lowers it: the broker refuses (MESSAGE_TOO_LARGE).
	tp2 := mkTopic(t, c, "lowered", 1)
	p := part(t, tp2, 0)
	_, _, err = p.AppendEach(ctx, [][]record.Record{values("ok", 1)})
	require.NoError(t, err)
	alterByOtherClient(t, kc, "lowered", "max.message.bytes", "2000")
	_, _, err = p.AppendEach(ctx, [][]record.Record{{big}})
	assert.ErrorIs(t, err, backend.ErrRecordTooLarge, "the broker's MESSAGE_TOO_LARGE")
	_, _, err = p.AppendEach(ctx, [][]record.Record{many})
	require.NoError(t, err, "the refusal had the limit read again: small records go")
	offs, err := p.Offsets(ctx)
	require.NoError(t, err)
	assert.Equal(t, int64(101), offs.End)
}

// alterByOtherClient sets a topic config with a client of its own.
func alterByOtherClient(t *testing.T, kc *kfake.Cluster, topic, name, value string) {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(kc.ListenAddrs()...))
	require.NoError(t, err)
	defer cl.Close()
	req := kmsg.NewPtrIncrementalAlterConfigsRequest()
	rr := kmsg.NewIncrementalAlterConfigsRequestResource()
	rr.ResourceType, rr.ResourceName = kmsg.ConfigResourceTypeTopic, topic
	rc := kmsg.NewIncrementalAlterConfigsRequestResourceConfig()
	rc.Name, rc.Value = name, kmsg.StringPtr(value)
	rr.Configs = append(rr.Configs, rc)
	req.Resources = append(req.Resources, rr)
	resp, err := req.RequestWith(context.Background(), cl)
	require.NoError(t, err)
	require.NoError(t, kerr.ErrorForCode(resp.Resources[0].ErrorCode))
}

// TestProduceErrorsMapped: the broker's refusals mean the backend's
// errors. kfake does not itself refuse a keyless record to a compacted
// topic, nor count in-sync replicas against min.insync.replicas (every
// replica is always in sync), so those answers are injected.
func TestProduceErrorsMapped(t *testing.T) {
	kc := newKfake(t)
	c, logs := openTest(t, kc, func(o *Options) { o.DeliveryTimeout = 3 * time.Second })
	ctx := context.Background()
	tp := mkTopic(t, c, "errs", 1)
	p := part(t, tp, 0)

	h := kc.Fault(kfake.Fault{Keys: []kmsg.Key{kmsg.Produce}, Topic: "errs", Err: kerr.InvalidRecord})
	_, _, err := p.AppendEach(ctx, [][]record.Record{values("keyless", 1)})
	assert.ErrorIs(t, err, backend.ErrInvalidRecord)
	h.Remove()

	h = kc.Fault(kfake.Fault{Keys: []kmsg.Key{kmsg.Produce}, Topic: "errs", Err: kerr.RecordListTooLarge})
	_, _, err = p.AppendEach(ctx, [][]record.Record{values("list", 1)})
	assert.ErrorIs(t, err, backend.ErrRecordTooLarge)
	h.Remove()

	// min.insync.replicas above the replica count: a real broker refuses
	// every acks=all produce with NOT_ENOUGH_REPLICAS, which the client
	// retries until the delivery timeout.
	require.NoError(t, tp.AlterConfig(ctx, map[string]string{"min.insync.replicas": "4"}))
	h = kc.Fault(kfake.Fault{Keys: []kmsg.Key{kmsg.Produce}, Topic: "errs", Err: kerr.NotEnoughReplicas, Count: -1})
	_, _, err = p.AppendEach(ctx, [][]record.Record{values("few", 1)})
	assert.ErrorIs(t, err, backend.ErrNotEnoughReplicas)
	assert.Contains(t, logs.String(), "min.insync.replicas=4")
	assert.Contains(t, logs.String(), "isr=")
	h.Remove()
	require.NoError(t, tp.AlterConfig(ctx, map[string]string{"min.insync.replicas": "2"}))

	// The same answer with enough replicas in sync (a broker that has not
	// yet caught up): the timeout it comes to is ErrTimedOut.
	h = kc.Fault(kfake.Fault{Keys: []kmsg.Key{kmsg.Produce}, Topic: "errs", Err: kerr.NotEnoughReplicas, Count: -1})
	_, _, err = p.AppendEach(ctx, [][]record.Record{values("slow", 1)})
	assert.ErrorIs(t, err, backend.ErrTimedOut)
	h.Remove()

	_, _, err = p.AppendEach(ctx, [][]record.Record{values("fine", 2)})
	require.NoError(t, err)

	require.NoError(t, c.DeleteTopic(ctx, "errs"))
	_, _, err = p.AppendEach(ctx, [][]record.Record{values("gone", 1)})
	assert.ErrorIs(t, err, backend.ErrUnknownTopic)
	_, err = p.Offsets(ctx)
	assert.ErrorIs(t, err, backend.ErrUnknownTopic)
}

func TestAppendCanceled(t *testing.T) {
	kc := newKfake(t)
	c, _ := openTest(t, kc, nil)
	bg := context.Background()
	p := part(t, mkTopic(t, c, "cancel", 1), 0)
	ctx, cancel := context.WithCancel(bg)
	cancel()
	_, _, err := p.AppendEach(ctx, [][]record.Record{values("v", 3)})
	assert.ErrorIs(t, err, context.Canceled)
	assert.False(t, errors.Is(err, backend.ErrTimedOut))
	assert.False(t, strings.Contains(err.Error(), "\n"))
	require.NoError(t, p.Sync(bg), "nothing was produced")
	offs, err := p.Offsets(bg)
	require.NoError(t, err)
	assert.Equal(t, int64(0), offs.End)

	// A writer that gives up while its records are retried returns at
	// once; its records, and another writer's behind them, go on.
	h := kc.Fault(kfake.Fault{Keys: []kmsg.Key{kmsg.Produce}, Topic: "cancel", Err: kerr.NotEnoughReplicas, Count: -1})
	ctx, cancel = context.WithCancel(bg)
	gaveUp := make(chan error)
	go func() {
		_, _, err := p.AppendEach(ctx, [][]record.Record{values("a", 2)})
		gaveUp <- err
	}()
	require.NoError(t, h.Wait(bg, 1))
	other := make(chan error)
	go func() {
		_, _, err := p.AppendEach(bg, [][]record.Record{values("b", 2)})
		other <- err
	}()
	cancel()
	assert.ErrorIs(t, <-gaveUp, context.Canceled)
	h.Remove()
	require.NoError(t, <-other, "the other writer's records are not failed with the first's")
	require.NoError(t, p.Sync(bg))
	offs, err = p.Offsets(bg)
	require.NoError(t, err)
	assert.Equal(t, int64(4), offs.End, "the abandoned records were appended too")
}

// TestSnapshotReadsWhatWasProduced: a partition's Snapshot is the mirror's
// copy up to the high watermark at the call: the records appended through
// the backend read back from its segments, a second Snapshot sees the
// growth, one from an offset starts there, and a deleted topic's copy goes.
func TestSnapshotReadsWhatWasProduced(t *testing.T) {
	kc := newKfake(t)
	c, _ := openTest(t, kc, nil)
	ctx := context.Background()
	bt, err := c.CreateTopic(ctx, "snap", 1)
	require.NoError(t, err)
	p, err := bt.Partition(0)
	require.NoError(t, err)
	_, _, err = p.AppendLines(ctx, []byte("a\nb\nc\n"), 0)
	require.NoError(t, err)
	assert.Equal(t, []string{"a", "b", "c"}, snapshotValues(t, p, backend.FromStart))
	_, _, err = p.AppendLines(ctx, []byte("d\n"), 0)
	require.NoError(t, err)
	assert.Equal(t, []string{"a", "b", "c", "d"}, snapshotValues(t, p, backend.FromStart))
	assert.Equal(t, []string{"c", "d"}, snapshotValues(t, p, 2))
	require.NoError(t, c.DeleteTopic(ctx, "snap"))
	_, err = os.Stat(filepath.Join(c.opts.CacheDir, c.ClusterID(), "snap-0"))
	assert.ErrorIs(t, err, os.ErrNotExist, "the deleted topic's local copy is removed")
}

// snapshotValues reads the values of the records at or after from in p's
// Snapshot from from.
func snapshotValues(t *testing.T, p backend.Partition, from int64) []string {
	t.Helper()
	snap, err := p.Snapshot(context.Background(), from)
	require.NoError(t, err)
	defer snap.Release()
	var got []string
	for _, seg := range snap.Segments {
		for pos := int64(0); pos < seg.Size(); {
			b, err := seg.ReadBatch(pos, nil)
			require.NoError(t, err)
			pos += int64(b.Size())
			if b.IsControl() {
				continue
			}
			recs, err := b.Records(nil)
			require.NoError(t, err)
			for _, r := range recs {
				if r.Offset >= max(from, snap.Offsets.LogStart) && r.Offset < snap.Offsets.End {
					got = append(got, string(r.Value))
				}
			}
		}
	}
	return got
}
