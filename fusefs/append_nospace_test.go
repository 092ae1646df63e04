package fusefs

import (
	"bytes"
	"log/slog"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"
)

// TestAppendNoSpaceIsLogged: an append refused for a full disk answers
// ENOSPC and leaves a warning naming the partition (and, in a mount, the topic:
// TestNoSpaceThroughMount); other
// failures are the writer's business and are not logged here.
func TestAppendNoSpaceIsLogged(t *testing.T) {
	var logs bytes.Buffer
	p := &fakeLog{}
	h := &appendHandle{
		fsys:  newFsys(nil, Options{Logger: slog.New(slog.NewTextHandler(&logs, nil))}),
		fixed: 2, fixedLog: p, maxMessage: 100, checkSize: true, batchSize: 1 << 20,
	}
	p.fail = syscall.ENOSPC
	_, errno := h.write([]byte("full\n"))
	assert.Equal(t, syscall.ENOSPC, errno)
	assert.Contains(t, logs.String(), "level=WARN")
	assert.Contains(t, logs.String(), "no space left on device")
	assert.Contains(t, logs.String(), "partition=2")

	logs.Reset()
	p.fail = syscall.EIO
	_, errno = h.write([]byte("broken\n"))
	assert.Equal(t, syscall.EIO, errno)
	assert.NotContains(t, logs.String(), "no space")
}
