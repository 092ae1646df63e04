package fusefs

import (
	"context"
	"os"
	"testing"

	"github.com/hanwen/go-fuse/v2/fuse"
	"github.com/stretchr/testify/assert"
)

// TestProcOf: the process and parent of a task come from /proc; a task
// that does not exist has none.
func TestProcOf(t *testing.T) {
	tgid, ppid, ok := procOf(os.Getpid())
	assert.True(t, ok)
	assert.Equal(t, os.Getpid(), tgid)
	assert.Equal(t, os.Getppid(), ppid)
	_, _, ok = procOf(1 << 30)
	assert.False(t, ok)
}

// TestCallerHolds: a view counts as held by the process that opened it
// and by that process's descendants, not by others; a caller that cannot
// be told (no FUSE context) counts as holding it (it gets the exact,
// waiting answer).
func TestCallerHolds(t *testing.T) {
	v := &viewNode{}
	as := func(pid int) context.Context {
		return fuse.NewContext(context.Background(), &fuse.Caller{Pid: uint32(pid)})
	}
	assert.True(t, v.callerHolds(context.Background()))
	assert.False(t, v.callerHolds(as(os.Getpid())))
	v.mu.openers = map[int]int{os.Getppid(): 1}
	assert.True(t, v.callerHolds(as(os.Getpid())), "a child of the opener")
	v.mu.openers = map[int]int{os.Getpid(): 1}
	assert.True(t, v.callerHolds(as(os.Getpid())))
	assert.False(t, v.callerHolds(as(os.Getppid())), "the opener's parent does not hold it")
	assert.Equal(t, os.Getpid(), openerOf(as(os.Getpid())))
}
