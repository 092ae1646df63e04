package cluster

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kfake"

	"github.com/topicfs/topicfs/backend"
	"github.com/topicfs/topicfs/engine/record"
)

// TestLeaderMovesAndBrokerLoss appends 200,000 records through AppendEach
// from four writers while the partition's leader keeps moving and one of
// the three brokers is removed; an independent consumer then reads
// exactly those records, each once.
func TestLeaderMovesAndBrokerLoss(t *testing.T) {
	kc := newKfake(t)
	c, _ := openTest(t, kc, func(o *Options) { o.DeliveryTimeout = 2 * time.Minute })
	ctx := context.Background()
	p := part(t, mkTopic(t, c, "moving", 1), 0)

	const writers, calls, perCall = 4, 50, 1000 // 200,000 records
	var acked atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, writers)
	for w := range writers {
		wg.Go(func() {
			for call := range calls {
				recs := values(fmt.Sprintf("w%d-c%d-", w, call), perCall)
				first, last, err := p.AppendEach(ctx, [][]record.Record{recs[:perCall/2], recs[perCall/2:]})
				if err == nil && last-first < perCall-1 { // other writers' records may come between
					err = fmt.Errorf("offsets %d..%d for %d records", first, last, perCall)
				}
				if err != nil {
					errs <- err
					return
				}
				acked.Add(perCall)
			}
		})
	}
	done := make(chan struct{})
	var moves atomic.Int64
	go func() {
		defer close(done)
		removed := false
		for acked.Load() < writers*calls*perCall {
			kc.ShufflePartitionLeaders()
			moves.Add(1)
			if !removed && acked.Load() >= writers*calls*perCall/3 {
				assert.NoError(t, kc.RemoveNode(kc.LeaderFor("moving", 0)))
				removed = true
			}
			if len(errs) > 0 {
				return
			}
			time.Sleep(5 * time.Millisecond)
		}
		assert.True(t, removed, "the broker was removed while appends ran")
	}()
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
	<-done
	t.Logf("%d leader moves during the appends", moves.Load())
	assert.Greater(t, moves.Load(), int64(1))

	offs, err := p.Offsets(ctx)
	require.NoError(t, err)
	assert.Equal(t, int64(writers*calls*perCall), offs.End, "no duplicate was appended")
	got := consume(t, kc, "moving", 0, writers*calls*perCall)
	require.Len(t, got, writers*calls*perCall)
	seen := make(map[string]bool, len(got))
	for _, r := range got {
		require.False(t, seen[string(r.Value)], "duplicate %s", r.Value)
		seen[string(r.Value)] = true
	}
	for w := range writers {
		for call := range calls {
			for i := range perCall {
				v := fmt.Sprintf("w%d-c%d-%d", w, call, i)
				require.True(t, seen[v], "lost %s", v)
			}
		}
	}
}

// freePorts returns n ports nothing listens on now.
func freePorts(t *testing.T, n int) []int {
	t.Helper()
	var ports []int
	for range n {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		require.NoError(t, err)
		ports = append(ports, ln.Addr().(*net.TCPAddr).Port)
		require.NoError(t, ln.Close())
	}
	return ports
}

// TestClusterRestart stops the whole cluster under an open backend: reads
// and writes fail with a backend error (an errno) within their timeouts,
// and work again, without reopening, once the cluster is back (kfake
// keeps its data in DataDir).
func TestClusterRestart(t *testing.T) {
	dir, ports := t.TempDir(), freePorts(t, 3)
	start := func() *kfake.Cluster {
		kc, err := kfake.NewCluster(kfake.NumBrokers(3), kfake.DataDir(dir), kfake.Ports(ports...))
		require.NoError(t, err)
		return kc
	}
	kc := start()
	c, _ := openTest(t, kc, func(o *Options) {
		o.RequestTimeout, o.DeliveryTimeout = time.Second, 3*time.Second
	})
	ctx := context.Background()
	tp := mkTopic(t, c, "durable", 1)
	p := part(t, tp, 0)
	_, _, err := p.AppendEach(ctx, [][]record.Record{values("before-", 10)})
	require.NoError(t, err)
	ch, unsubscribe := p.Subscribe()
	defer unsubscribe()

	kc.Close()
	for _, op := range []struct {
		name string
		fn   func() error
	}{
		{"offsets", func() error { _, err := p.Offsets(ctx); return err }},
		{"topics", func() error { _, err := c.Topics(ctx); return err }},
		{"stats", func() error { _, err := p.StatsJSON(ctx); return err }},
		{"append", func() error {
			_, _, err := p.AppendEach(ctx, [][]record.Record{values("unknown-", 3)})
			return err
		}},
		// The timed-out append's records may still be in flight in the
		// client (sent, unanswered): Sync waits for them, at most
		// delivery.timeout.ms.
		{"sync", func() error { return p.Sync(ctx) }},
	} {
		began := time.Now()
		err := op.fn()
		if op.name != "sync" || err != nil {
			require.Error(t, err, op.name)
			assert.True(t, errors.Is(err, backend.ErrUnavailable) || errors.Is(err, backend.ErrTimedOut),
				"%s: %v", op.name, err)
			assert.NotErrorIs(t, err, context.DeadlineExceeded, "%s: the backend's timeout, not the caller's", op.name)
		}
		assert.Less(t, time.Since(began), 30*time.Second, "%s: bounded by its timeout", op.name)
	}

	kc = start()
	defer kc.Close()
	first, last, err := p.AppendEach(ctx, [][]record.Record{values("after-", 5)})
	require.NoError(t, err, "the same backend appends again")
	require.NoError(t, p.Sync(ctx))
	offs, err := p.Offsets(ctx)
	require.NoError(t, err)
	assert.Equal(t, offs.End-1, last)
	assert.Equal(t, last-4, first)
	for range 2 { // the subscription still works: drain, then see growth
		<-ch
	}
	// The timed-out append's outcome was unknown, as with any Kafka
	// producer: its records are in the log once (the idempotent producer
	// sent them when the cluster came back) or not at all.
	got := consume(t, kc, "durable", 0, int(offs.End))
	require.Len(t, got, int(offs.End))
	unknown := int(first) - 10
	assert.Contains(t, []int{0, 3}, unknown, "the timed-out records, all or none")
	t.Logf("%d of the timed-out append's 3 records are in the log", unknown)
	for i, r := range got {
		want := "before-" + strconv.Itoa(i)
		switch {
		case i >= 10+unknown:
			want = "after-" + strconv.Itoa(i-10-unknown)
		case i >= 10:
			want = "unknown-" + strconv.Itoa(i-10)
		}
		assert.Equal(t, want, string(r.Value))
	}
}

// TestCloseUnreachable: Close returns, bounded by the request timeout,
// with records in flight to a cluster that is gone; afterwards every
// method says ErrClosed.
func TestCloseUnreachable(t *testing.T) {
	kc, err := kfake.NewCluster(kfake.NumBrokers(3))
	require.NoError(t, err)
	logs := &logBuf{}
	o := testOptions(t, kc, logs)
	o.RequestTimeout, o.DeliveryTimeout = time.Second, 2*time.Second
	c, err := Open(context.Background(), o)
	require.NoError(t, err)
	ctx := context.Background()
	tp := mkTopic(t, c, "closing", 1)
	p := part(t, tp, 0)
	ch, _ := p.Subscribe()
	<-ch
	kc.Close()
	_, _, err = p.AppendEach(ctx, [][]record.Record{values("stuck-", 3)})
	require.ErrorIs(t, err, backend.ErrTimedOut)

	began := time.Now()
	err = c.Close()
	assert.True(t, err == nil || errors.Is(err, backend.ErrTimedOut), "%v", err)
	assert.Less(t, time.Since(began), 20*time.Second, "bounded by the request timeout")
	require.NoError(t, c.Close(), "a second Close does nothing")

	_, err = c.Topics(ctx)
	assert.ErrorIs(t, err, backend.ErrClosed)
	_, err = c.Topic(ctx, "closing")
	assert.ErrorIs(t, err, backend.ErrClosed)
	_, _, err = p.AppendEach(ctx, [][]record.Record{values("late-", 1)})
	assert.ErrorIs(t, err, backend.ErrClosed)
	_, err = p.Offsets(ctx)
	assert.ErrorIs(t, err, backend.ErrClosed)
	ch, unsubscribe := p.Subscribe()
	unsubscribe()
	select {
	case <-ch:
		t.Fatal("a closed backend signals nothing")
	default:
	}
}
