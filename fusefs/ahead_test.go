package fusefs

import (
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// item is a test item: made at pos, ten positions long.
type item struct{ pos int64 }

// aheadHarness produces items of ten positions each up to end, counting
// what it makes and drops; gate, if set, holds each produce until a value
// arrives.
type aheadHarness struct {
	w       workAhead[item]
	end     int64
	gate    chan struct{}
	made    atomic.Int64
	mu      sync.Mutex
	dropped []int64
}

func (h *aheadHarness) produce(pos int64) (item, int64, bool) {
	if h.gate != nil {
		<-h.gate
	}
	h.made.Add(1)
	return item{pos}, pos + 10, pos+10 < h.end
}

func (h *aheadHarness) drop(it item) {
	h.mu.Lock()
	h.dropped = append(h.dropped, it.pos)
	h.mu.Unlock()
}

func (h *aheadHarness) take(pos int64) (item, bool) {
	return h.w.take(pos, func(it *item) bool { return it.pos == pos }, h.drop)
}

func TestWorkAheadSequential(t *testing.T) {
	h := &aheadHarness{end: 100}
	h.w.start(0, h.produce, h.drop)
	for pos := int64(0); pos < 100; pos += 10 {
		it, ok := h.take(pos)
		require.True(t, ok, "item at %d", pos)
		require.Equal(t, pos, it.pos)
		if pos+10 < h.end { // as a reader does after each take, while there is more
			h.w.start(pos+10, h.produce, h.drop)
		}
	}
	h.w.stop(h.drop)
	assert.Equal(t, int64(10), h.made.Load(), "each item made once, nothing past the end")
	assert.Empty(t, h.dropped)
	_, ok := h.take(100)
	assert.False(t, ok, "nothing past the end")
}

func TestWorkAheadStaysWithinDepth(t *testing.T) {
	h := &aheadHarness{end: 1000}
	h.w.start(0, h.produce, h.drop)
	h.w.wg.Wait() // the ring filled up: the goroutine stopped
	assert.Equal(t, int64(aheadDepth), h.made.Load())
	h.w.start(0, h.produce, h.drop) // full: nothing starts
	h.w.wg.Wait()
	assert.Equal(t, int64(aheadDepth), h.made.Load())
	h.w.stop(h.drop)
	assert.Equal(t, []int64{0, 10}, h.dropped, "stop drops what waits")
}

// A take for the item being made waits for it; a take elsewhere (a seek)
// drops what waits and stops the goroutine after the item it is making.
func TestWorkAheadWaitAndSeek(t *testing.T) {
	h := &aheadHarness{end: 1000, gate: make(chan struct{})}
	h.w.start(0, h.produce, h.drop)
	got := make(chan item)
	go func() {
		it, ok := h.take(0)
		assert.True(t, ok)
		got <- it
	}()
	h.gate <- struct{}{} // item 0 made while take waits
	assert.Equal(t, int64(0), (<-got).pos)
	h.gate <- struct{}{} // item 10 made; the goroutine then goes on to 20
	require.Eventually(t, func() bool { return h.made.Load() == 2 }, time.Minute, time.Millisecond)
	_, ok := h.take(500) // a seek while 20 is being made
	assert.False(t, ok)
	h.gate <- struct{}{} // item 20 finishes and is dropped: its position was abandoned
	h.w.wg.Wait()
	h.mu.Lock()
	assert.Equal(t, []int64{10, 20}, h.dropped)
	h.mu.Unlock()
	close(h.gate)
	h.w.start(500, h.produce, h.drop) // reading resumes at the new position
	it, ok := h.take(500)
	require.True(t, ok)
	assert.Equal(t, int64(500), it.pos)
	h.w.close(h.drop)
	h.w.start(510, h.produce, h.drop)
	_, ok = h.take(510)
	assert.False(t, ok, "nothing starts after close")
}
