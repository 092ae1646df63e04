package record

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

// assertNoAllocs asserts that f allocates nothing. Under -race, whose
// sync.Pool drops a share of the buffers put back, it asserts fewer
// allocations than calls over many calls: an allocation of f's own, made
// at every call, still fails it, and the pool's misses (about one call in
// four) do not.
func assertNoAllocs(t *testing.T, f func(), msgAndArgs ...any) {
	t.Helper()
	if !raceEnabled {
		assert.Zero(t, testing.AllocsPerRun(20, f), msgAndArgs...)
		return
	}
	assert.Less(t, testing.AllocsPerRun(200, f), 1.0, msgAndArgs...)
}
