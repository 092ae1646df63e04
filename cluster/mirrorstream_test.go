package cluster

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/topicfs/topicfs/backend"
	"github.com/topicfs/topicfs/engine/vfs"
)

// gated is a fakeSource whose fetches after the first free ones wait for a
// ticket each (or their ctx), and whose topic id can change.
type gated struct {
	fakeSource
	free    int64
	tickets chan struct{}
	mu      sync.Mutex
	newID   [16]byte
}

func (g *gated) Fetch(ctx context.Context, offset int64, maxBytes int32) (*FetchResult, error) {
	if g.fetches.Load() >= g.free {
		select {
		case <-g.tickets:
		case <-ctx.Done():
			return nil, context.Cause(ctx)
		}
	}
	res, err := g.fakeSource.Fetch(ctx, offset, maxBytes)
	g.mu.Lock()
	defer g.mu.Unlock()
	if err == nil && g.newID != ([16]byte{}) {
		res.TopicID = g.newID
	}
	return res, err
}

// feed hands g tickets until the test ends.
func (g *gated) feed(t *testing.T) {
	done := make(chan struct{})
	t.Cleanup(func() { close(done) })
	go func() {
		for {
			select {
			case g.tickets <- struct{}{}:
			case <-done:
				return
			}
		}
	}()
}

func below(want []sent, end int64) []sent {
	var out []sent
	for _, s := range want {
		if s.offset < end {
			out = append(out, s)
		}
	}
	return out
}

func newGated(t *testing.T, groups int) (*gated, []sent) {
	batches, want := fakeLog(t, groups)
	return &gated{fakeSource: fakeSource{batches: batches, maxBytes: 150}, free: 2, tickets: make(chan struct{})}, want
}

// TestMirrorStreamHandsOutRecordsAsTheyArrive: Stream returns with the
// first fetches' records while the rest are held back, and each Next
// hands out more, up to the end; no snapshot ever shows a record of a
// transaction whose marker has not arrived (an aborted one would show
// before its abort), and the last holds every committed record.
func TestMirrorStreamHandsOutRecordsAsTheyArrive(t *testing.T) {
	src, want := newGated(t, 24)
	end := src.hw()
	m := newMirror(t, vfs.NewMem(), "/cache", MirrorOptions{SegmentBytes: 700, Logger: quietLogger()})
	mp, err := m.Partition("c", "t", 0)
	require.NoError(t, err)
	ctx := context.Background()
	snap, stream, err := mp.Stream(ctx, src, backend.FromStart, end)
	require.NoError(t, err)
	require.NotNil(t, stream, "the fill is held back: the rest must follow")
	defer stream.Close()
	first := snap.Offsets.End
	assert.Greater(t, first, int64(0))
	assert.Less(t, first, end)
	src.feed(t)
	steps := 0
	for last := false; ; steps++ {
		got := snap.Offsets.End
		assert.LessOrEqual(t, got, end)
		checkRecords(t, below(want, got), visible(t, snap), 0)
		snap.Release()
		if last {
			assert.Equal(t, end, got)
			break
		}
		snap, last, err = stream.Next(ctx, got)
		require.NoError(t, err)
		if !last {
			require.Greater(t, snap.Offsets.End, got, "Next waits for records past the end it was given, or the end")
		}
	}
	assert.Positive(t, steps)
}

// TestMirrorStreamCloseStopsTheFill: closing a stream stops its fill
// (a fetch held back returns with its context); what arrived stays in the
// copy, and a later Snapshot fetches only the rest.
func TestMirrorStreamCloseStopsTheFill(t *testing.T) {
	src, want := newGated(t, 24)
	end := src.hw()
	m := newMirror(t, vfs.NewMem(), "/cache", MirrorOptions{Logger: quietLogger()})
	mp, err := m.Partition("c", "t", 0)
	require.NoError(t, err)
	snap, stream, err := mp.Stream(context.Background(), src, backend.FromStart, end)
	require.NoError(t, err)
	require.NotNil(t, stream)
	snap.Release()
	stream.Close()
	stream.Close() // twice is harmless
	_, copyEnd := mp.Range()
	assert.Less(t, copyEnd, end, "the fill stopped")
	before := src.fetches.Load()
	assert.LessOrEqual(t, before, src.free+1)

	snap = snapshot(t, mp, &src.fakeSource, 0, end)
	checkRecords(t, want, visible(t, snap), 0)
	snap.Release()
	rest := src.fetches.Load() - before

	// A copy filled from nothing fetches more than the rest did.
	whole := &fakeSource{batches: src.batches, maxBytes: src.maxBytes}
	m2 := newMirror(t, vfs.NewMem(), "/cache", MirrorOptions{Logger: quietLogger()})
	mp2, err := m2.Partition("c", "t", 0)
	require.NoError(t, err)
	snapshot(t, mp2, whole, 0, end).Release()
	assert.Less(t, rest, whole.fetches.Load(), "the next fill starts where the copy ended")
}

// TestMirrorStreamNoRestartAfterHandingOut: a fill that has handed records
// out cannot start the copy over (the reader would see two logs spliced):
// a topic id that changes under a stream fails it instead.
func TestMirrorStreamNoRestartAfterHandingOut(t *testing.T) {
	src, _ := newGated(t, 24)
	end := src.hw()
	m := newMirror(t, vfs.NewMem(), "/cache", MirrorOptions{Logger: quietLogger()})
	mp, err := m.Partition("c", "t", 0)
	require.NoError(t, err)
	src.id = [16]byte{1}
	snap, stream, err := mp.Stream(context.Background(), src, backend.FromStart, end)
	require.NoError(t, err)
	require.NotNil(t, stream)
	defer stream.Close()
	past := snap.Offsets.End
	snap.Release()
	src.mu.Lock()
	src.newID = [16]byte{2}
	src.mu.Unlock()
	src.feed(t)
	var last bool
	for err == nil && !last {
		snap, last, err = stream.Next(context.Background(), past)
		if err == nil {
			past = snap.Offsets.End
			snap.Release()
		}
	}
	require.Error(t, err)
	assert.True(t, errors.Is(err, backend.ErrUnavailable), "%v", err)
}

// TestMirrorStreamWholeCopy: a copy that already holds the range needs no
// stream.
func TestMirrorStreamWholeCopy(t *testing.T) {
	src, want := newGated(t, 6)
	src.free = 1 << 30
	end := src.hw()
	m := newMirror(t, vfs.NewMem(), "/cache", MirrorOptions{Logger: quietLogger()})
	mp, err := m.Partition("c", "t", 0)
	require.NoError(t, err)
	snapshot(t, mp, src, 0, end).Release()
	n := src.fetches.Load()
	snap, stream, err := mp.Stream(context.Background(), src, backend.FromStart, end)
	require.NoError(t, err)
	assert.Nil(t, stream)
	assert.Equal(t, n, src.fetches.Load(), "nothing fetched")
	checkRecords(t, want, visible(t, snap), 0)
	snap.Release()
}

// TestMirrorStreamJoinsTheRunningFill: while a fill is held back, another
// Stream of the partition returns with what the copy holds instead of
// waiting for the fill to end, and a Snapshot of a longer range joins the
// fill too, which then goes on to that range's end. The first reader
// closing does not stop the fill the others still read.
func TestMirrorStreamJoinsTheRunningFill(t *testing.T) {
	src, want := newGated(t, 24)
	end := src.hw()
	mid := end / 2
	m := newMirror(t, vfs.NewMem(), "/cache", MirrorOptions{SegmentBytes: 700, Logger: quietLogger()})
	mp, err := m.Partition("c", "t", 0)
	require.NoError(t, err)
	ctx := context.Background()
	snap1, stream1, err := mp.Stream(ctx, src, backend.FromStart, mid)
	require.NoError(t, err)
	require.NotNil(t, stream1, "the fill is held back")
	held := snap1.Offsets.End
	snap1.Release()

	type result struct {
		snap   *backend.Snapshot
		stream backend.Stream
		err    error
	}
	joined := make(chan result, 1)
	go func() {
		snap, stream, err := mp.Stream(ctx, src, backend.FromStart, end)
		joined <- result{snap, stream, err}
	}()
	var r result
	select {
	case r = <-joined:
	case <-time.After(30 * time.Second):
		t.Fatal("a second reader waited for the held-back fill to end")
	}
	require.NoError(t, r.err)
	require.NotNil(t, r.stream)
	defer r.stream.Close()
	assert.GreaterOrEqual(t, r.snap.Offsets.End, held, "what the copy holds, at once")
	assert.Less(t, r.snap.Offsets.End, mid, "the fill is still held back")
	r.snap.Release()

	whole := make(chan result, 1)
	go func() {
		snap, err := mp.Snapshot(ctx, src, 0, end)
		whole <- result{snap: snap, err: err}
	}()
	stream1.Close() // the others still read the fill
	src.feed(t)
	w := <-whole
	require.NoError(t, w.err)
	assert.Equal(t, end, w.snap.Offsets.End)
	checkRecords(t, want, visible(t, w.snap), 0)
	w.snap.Release()

	past := held
	for last := false; !last; {
		snap, l, err := r.stream.Next(ctx, past)
		require.NoError(t, err)
		past, last = snap.Offsets.End, l
		if last {
			checkRecords(t, want, visible(t, snap), 0)
		}
		snap.Release()
	}
	assert.Equal(t, end, past, "the fill went on to the joined reader's end")
}
