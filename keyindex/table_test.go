package keyindex

import (
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestTableMatchesMap puts and removes random hashes, many of them
// landing in the same few slots so probe runs wrap around the table's
// end, and compares with a map after every operation.
func TestTableMatchesMap(t *testing.T) {
	b := NewBudget(1<<20, "")
	tb, err := newTable(b, 64)
	require.NoError(t, err)
	rng := rand.New(rand.NewPCG(3, 4))
	model := map[uint64]uint64{}
	for i := range 20000 {
		// Hashes whose home is one of the last 4 slots, or anywhere.
		h := uint64(rng.IntN(40))<<6 | uint64(60+rng.IntN(4))
		if rng.IntN(3) == 0 {
			h = rng.Uint64() | 1
		}
		if _, ok := model[h]; ok && rng.IntN(2) == 0 {
			tb.remove(h)
			delete(model, h)
		} else {
			if tb.full() {
				tb, err = tb.grown()
				require.NoError(t, err)
			}
			w := uint64(i)
			if rng.IntN(4) == 0 {
				w |= tombBit
			}
			tb.put(h, w)
			model[h] = w
		}
		require.Equal(t, len(model), tb.n)
	}
	live := 0
	for h, w := range model {
		got, ok := tb.get(h)
		require.True(t, ok)
		assert.Equal(t, w, got)
		if w&tombBit == 0 {
			live++
		}
	}
	assert.Equal(t, live, tb.live)
	tb.free()
	heap, _ := b.Usage()
	assert.Zero(t, heap)
}
