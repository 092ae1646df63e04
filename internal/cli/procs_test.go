package cli

import (
	"runtime"
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestRaiseProcs(t *testing.T) {
	prev := runtime.GOMAXPROCS(0)
	t.Cleanup(func() { runtime.GOMAXPROCS(prev) })

	t.Setenv("GOMAXPROCS", "")
	n, raised := raiseProcs()
	assert.True(t, raised)
	assert.Equal(t, prev+extraProcs, n)
	assert.Equal(t, prev+extraProcs, runtime.GOMAXPROCS(0))

	runtime.GOMAXPROCS(prev)
	t.Setenv("GOMAXPROCS", "1")
	n, raised = raiseProcs()
	assert.False(t, raised, "GOMAXPROCS set by the user is left alone")
	assert.Equal(t, prev, n)
	assert.Equal(t, prev, runtime.GOMAXPROCS(0))
}
