package fusefs

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/topicfs/topicfs/backend"
	"github.com/topicfs/topicfs/engine"
)

// stepStream is a backend.Stream over a local partition that hands out
// its segments a few at a time, each step when the test sends on steps
// (an error fails the stream at that step).
type stepStream struct {
	p      backend.Partition
	per    int // segments added per step
	steps  chan error
	closed atomic.Int32
	shown  int // segments handed out so far
}

// snap returns a Snapshot of the first k segments of s's partition, cut
// at the base of the next one (all of them when k reaches the end).
func (s *stepStream) snap(t *testing.T, k int) (*backend.Snapshot, bool) {
	full, err := s.p.Snapshot(context.Background(), backend.FromStart)
	require.NoError(t, err)
	defer full.Release()
	k = min(k, len(full.Segments))
	segs := append([]backend.Segment(nil), full.Segments[:k]...)
	end := full.Offsets.End
	if k < len(full.Segments) {
		end = full.Segments[k].BaseOffset()
	}
	for _, seg := range segs {
		seg.Retain()
	}
	return backend.NewSnapshot(segs, backend.Offsets{LogStart: full.Offsets.LogStart, End: end}, func() {
		for _, seg := range segs {
			seg.Release()
		}
	}), k == len(full.Segments)
}

func (s *stepStream) next(t *testing.T) func(ctx context.Context, past int64) (*backend.Snapshot, bool, error) {
	return func(ctx context.Context, past int64) (*backend.Snapshot, bool, error) {
		select {
		case err := <-s.steps:
			if err != nil {
				return nil, false, err
			}
		case <-ctx.Done():
			return nil, false, ctx.Err()
		}
		s.shown += s.per
		snap, last := s.snap(t, s.shown)
		return snap, last, nil
	}
}

// funcStream adapts functions to backend.Stream.
type funcStream struct {
	nextFn  func(ctx context.Context, past int64) (*backend.Snapshot, bool, error)
	closeFn func()
}

func (f *funcStream) Next(ctx context.Context, past int64) (*backend.Snapshot, bool, error) {
	return f.nextFn(ctx, past)
}
func (f *funcStream) Close() { f.closeFn() }

// streamedState opens a view state over p whose first snapshot holds
// its first segment, the rest following through a stepStream.
func streamedState(t *testing.T, p *engine.Partition) (*viewState, *stepStream) {
	ps := newPartState(newFsys(nil, Options{}), asPart(p))
	ss := &stepStream{p: ps.p, per: 2, steps: make(chan error, 100), shown: 1}
	take := func(ctx context.Context) (*backend.Snapshot, backend.Stream, error) {
		snap, _ := ss.snap(t, 1)
		return snap, &funcStream{nextFn: ss.next(t), closeFn: func() { ss.closed.Add(1) }}, nil
	}
	st, err := newViewState(context.Background(), ps, viewFormat{}, take, func(s *backend.Snapshot) (int64, error) { return s.Offsets.LogStart, nil })
	require.NoError(t, err)
	t.Cleanup(st.release)
	return st, ss
}

// TestViewStreamTakesInStepByStep: a streamed view shows what arrived;
// each refresh waits for the next step and shows the records up to it,
// and once the last step arrives the view is the whole partition, read
// back byte for byte, and the stream is closed.
func TestViewStreamTakesInStepByStep(t *testing.T) {
	cfg := engine.DefaultConfig()
	cfg.SegmentBytes = 8 << 10
	p := openTestPartition(t, cfg)
	recs := viewRecordsFixture(t, p, 3000)
	require.Greater(t, len(p.Segments()), 6)
	want := renderAll(viewFormat{}, recs, 0)
	st, ss := streamedState(t, p)
	first := st.size()
	require.Positive(t, first)
	require.Less(t, first, int64(len(want)))
	assert.Equal(t, string(want[:first]), readAll(t, st)[:first])

	sizes := []int64{first}
	for st.streaming() != nil {
		ss.steps <- nil
		_, n, err := st.refresh(context.Background())
		require.NoError(t, err)
		require.Greater(t, n, sizes[len(sizes)-1], "each step shows more")
		sizes = append(sizes, n)
	}
	assert.Equal(t, int64(len(want)), st.size())
	assert.Equal(t, string(want), readAll(t, st))
	assert.Eventually(t, func() bool { return ss.closed.Load() == 1 }, 5e9, 1e6, "the stream is closed once it ended")
}

// TestViewStreamStatSizeUnknown: stat of a view whose records are still
// arriving reports 0 (unknown, kept by the kernel for the shortest time)
// without waiting; once they all arrived it reports the whole range's
// size.
func TestViewStreamStatSizeUnknown(t *testing.T) {
	cfg := engine.DefaultConfig()
	cfg.SegmentBytes = 8 << 10
	p := openTestPartition(t, cfg)
	recs := viewRecordsFixture(t, p, 3000)
	st, ss := streamedState(t, p)
	v := &viewNode{fsys: newFsys(nil, Options{})}
	v.mu.st = st
	size, exact, err := v.statSize(context.Background())
	require.NoError(t, err)
	assert.Zero(t, size)
	assert.False(t, exact)
	for st.streaming() != nil {
		ss.steps <- nil
		_, _, err := st.refresh(context.Background())
		require.NoError(t, err)
	}
	size, exact, err = v.statSize(context.Background())
	require.NoError(t, err)
	assert.True(t, exact)
	assert.Equal(t, int64(len(renderAll(viewFormat{}, recs, 0))), size)
}

// TestViewStreamFailureIsNotAnEnd: a stream that fails makes the read
// fail (a streamError, which an open view never papers over as "showing
// what it holds"), not end early; a view released while streaming closes
// the stream.
func TestViewStreamFailureIsNotAnEnd(t *testing.T) {
	cfg := engine.DefaultConfig()
	cfg.SegmentBytes = 8 << 10
	p := openTestPartition(t, cfg)
	viewRecordsFixture(t, p, 3000)
	st, ss := streamedState(t, p)
	ss.steps <- nil
	_, _, err := st.refresh(context.Background())
	require.NoError(t, err)
	ss.steps <- backend.ErrUnavailable
	_, _, err = st.refresh(context.Background())
	require.Error(t, err)
	var se *streamError
	require.True(t, errors.As(err, &se), "%v", err)
	assert.ErrorIs(t, err, backend.ErrUnavailable)
	v := &viewNode{fsys: newFsys(nil, Options{})}
	assert.False(t, v.keepsHeld("read", err), "a failed stream is never shown as the view's end")
	_, _, err = st.refresh(context.Background())
	require.ErrorAs(t, err, &se, "a later read (another process's stat took the error first) fails too")
	assert.Eventually(t, func() bool { return ss.closed.Load() == 1 }, 5e9, 1e6)

	st2, ss2 := streamedState(t, p)
	st2.release()
	assert.Eventually(t, func() bool { return ss2.closed.Load() == 1 }, 5e9, 1e6, "release closes the stream")
}

// readAll reads st from 0 to its size.
func readAll(t *testing.T, st *viewState) string {
	t.Helper()
	dest := make([]byte, st.size())
	var c cursor
	n, err := st.read(context.Background(), &c, dest, 0)
	require.NoError(t, err)
	return string(dest[:n])
}
