package fusefs

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/topicfs/topicfs/engine"
)

// TestIndexCacheKeepsMeasures: an evicted index leaves its measure, which
// answers only for the size it measured (or with its corruption); measures
// are bounded too.
func TestIndexCacheKeepsMeasures(t *testing.T) {
	c := newIndexCache(2, 3)
	segs := make([]*engine.Segment, 6) // distinct keys; never dereferenced
	key := func(i int) segKey {
		segs[i] = new(engine.Segment)
		return segKey{seg: segs[i]}
	}
	keys := []segKey{key(0), key(1), key(2), key(3), key(4), key(5)}
	bad := errors.New("corrupt")
	for i, k := range keys {
		x := c.get(k)
		x.mu.Lock()
		x.mu.scanned, x.mu.rlen = int64(100*(i+1)), int64(10*(i+1))
		if i == 2 {
			x.mu.bad = bad
		}
		x.mu.Unlock()
	}
	// Indexes of 4 and 5 are cached; measures of 1, 2, 3 kept (0 evicted).
	assert.Len(t, c.elems, 2)
	assert.Len(t, c.measured, 3)
	_, seen, ok := c.measure(keys[0], 100)
	assert.False(t, ok, "the oldest measure is gone")
	assert.False(t, seen)
	m, _, ok := c.measure(keys[1], 200)
	require.True(t, ok)
	assert.Equal(t, []int64{200, 20}, []int64{m.scanned, m.rlen})
	assert.NoError(t, m.bad)
	_, seen, ok = c.measure(keys[1], 250)
	assert.False(t, ok, "a segment grown since its measure must be scanned")
	assert.True(t, seen, "but it was measured")
	m, _, ok = c.measure(keys[2], 999)
	require.True(t, ok, "a corrupt segment's measure stands at any size")
	assert.Equal(t, int64(300), m.scanned)
	assert.ErrorIs(t, m.bad, bad)
	m, _, ok = c.measure(keys[5], 600)
	require.True(t, ok, "a cached index answers too")
	assert.Equal(t, []int64{600, 60}, []int64{m.scanned, m.rlen})
	// An index evicted again replaces its measure rather than adding one.
	c.get(keys[1]) // a fresh index of 1: evicts 4
	c.get(keys[0]) // evicts 5
	c.get(keys[2]) // evicts the fresh 1 (nothing measured: not kept)
	assert.Len(t, c.measured, 3)
	_, _, ok = c.measure(keys[4], 500)
	assert.True(t, ok)
}
