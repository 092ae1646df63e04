package fusefs

import (
	"context"
	"fmt"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// kernelWrite models write(2) of buf on an append file: the kernel sends
// it as WRITEs of at most chunk bytes (the first skew bytes shorter, as
// for a buffer that does not start on a page), one after the other; the
// first refused or short WRITE ends the write(2), which returns the bytes
// taken before it, or the errno if there are none.
func kernelWrite(h *appendHandle, buf []byte, chunk, skew int) (int, syscall.Errno) {
	done := 0
	for done < len(buf) {
		size := chunk
		if done == 0 && skew < chunk {
			size = chunk - skew
		}
		size = min(size, len(buf)-done)
		n, errno := h.write(buf[done : done+size])
		if errno != 0 {
			if done == 0 {
				return 0, errno
			}
			return done, 0
		}
		done += int(n)
		if int(n) < size {
			break
		}
	}
	return done, 0
}

// retryingWrite is how stdio, python and cat write: after a short count
// they write the rest, until all is taken or write(2) fails.
func retryingWrite(h *appendHandle, buf []byte, chunk, skew int) syscall.Errno {
	for len(buf) > 0 {
		n, errno := kernelWrite(h, buf, chunk, skew)
		if errno != 0 {
			return errno
		}
		buf = buf[n:]
	}
	return 0
}

// writeUntilTaken writes line (a whole line) until a write takes it, and
// returns how many writes that took.
func writeUntilTaken(t *testing.T, h *appendHandle, line string) int {
	for try := 1; try <= 3; try++ {
		if errno := retryingWrite(h, []byte(line), 1<<20, 0); errno == 0 {
			return try
		}
	}
	t.Fatalf("%q never taken", line)
	return 0
}

// TestAppendHandleOverlongLineStoresNothing drives lines too long for
// max.message.bytes through every way the kernel may cut them into WRITEs,
// for bare, keyed and JSON lines: nothing of the long line is ever stored,
// the writer sees EMSGSIZE, the lines before it are stored, and a line
// written after it is stored (by at most a second try, after the writer
// was told of the failure). Before, the begun start of the line became a
// record at close (a short count, no error) and a retry's rest could
// become one too.
func TestAppendHandleOverlongLineStoresNothing(t *testing.T) {
	type mode struct {
		name string
		make func(long int) string // a too-long line (without '\n')
		cfg  func(h *appendHandle)
	}
	modes := []mode{
		{"bare", func(n int) string { return strings.Repeat("x", n) }, func(*appendHandle) {}},
		{"keyed", func(n int) string { return "k\t" + strings.Repeat("x", n) }, func(h *appendHandle) {
			h.lc = lineConfig{parseKey: true, separator: "\t"}
		}},
		{"json", func(n int) string { return `{"value":"` + strings.Repeat("x", n) + `"}` }, func(h *appendHandle) { h.jsonl = true }},
	}
	line := func(m mode, s string) string {
		if m.name == "json" {
			return `{"value":"` + s + `"}`
		}
		if m.name == "keyed" {
			return "k\t" + s
		}
		return s
	}
	const maxMessage = 400
	for _, m := range modes {
		for _, long := range []int{331, 345, 1000, 5000} { // 331, 345: over by the record size only
			for _, chunk := range []int{16, 100, 128, 4096} {
				for _, skew := range []int{0, 5, 37} {
					for _, linger := range []time.Duration{0, time.Hour} {
						name := fmt.Sprintf("%s/%d/chunk%d/skew%d/linger%v", m.name, long, chunk, skew, linger > 0)
						t.Run(name, func(t *testing.T) {
							p := &fakeLog{}
							h := newTestHandle(p, maxMessage)
							h.linger = linger
							m.cfg(h)
							big := m.make(long)
							r, err := h.parse([]byte(big))
							require.NoError(t, err)
							require.Greater(t, recordSize(&r), int64(maxMessage), "too long")
							buf := line(m, "before") + "\n" + big + "\n" + line(m, "after") + "\n"
							assert.Equal(t, syscall.EMSGSIZE, retryingWrite(h, []byte(buf), chunk, skew), "the writer is told")
							writeUntilTaken(t, h, line(m, "next")+"\n")
							require.Zero(t, h.release())
							assert.Equal(t, []string{"before", "next"}, p.got)
						})
					}
				}
			}
		}
	}
}

// TestAppendHandleOverlongLineWriters: the long line written in pieces by
// a writer that ignores the errors, and by one that ignores a short count
// (a bare write(2)): nothing of it is stored, and later lines are.
func TestAppendHandleOverlongLineWriters(t *testing.T) {
	p := &fakeLog{}
	h := newTestHandle(p, 400)
	for i := 0; i < 30; i++ { // printf %s "$piece" in a loop: 1500 bytes
		kernelWrite(h, []byte(strings.Repeat("x", 50)), 4096, 0)
	}
	_, errno := kernelWrite(h, []byte("\n"), 4096, 0)
	assert.Equal(t, syscall.EMSGSIZE, errno, "the write that ends the long line is refused too")
	n, errno := kernelWrite(h, []byte("after\n"), 4096, 0)
	require.Zero(t, errno)
	require.Equal(t, 6, n)

	// One write(2) of a line and more, in 128-byte WRITEs: a short count
	// for what came before the WRITE that made it too long, no error.
	buf := "before\n" + strings.Repeat("y", 2000) + "\nlost\n"
	n, errno = kernelWrite(h, []byte(buf), 128, 0)
	require.Zero(t, errno)
	require.Less(t, n, len(buf))
	assert.LessOrEqual(t, writeUntilTaken(t, h, "later\n"), 2, "at most once more after a short count")
	require.Zero(t, h.release())
	assert.Equal(t, []string{"after", "before", "later"}, p.got)

	// A line that fits exactly is a record; one byte more is not.
	p.got = nil
	h = newTestHandle(p, 400)
	limit := h.maxLine()
	require.Equal(t, int64(400), valueRecordSize(limit))
	require.Zero(t, retryingWrite(h, []byte(strings.Repeat("a", limit)+"\n"), 128, 3))
	assert.Equal(t, syscall.EMSGSIZE, retryingWrite(h, []byte(strings.Repeat("b", limit+1)+"\n"), 128, 3))
	require.Zero(t, h.release())
	assert.Equal(t, []string{strings.Repeat("a", limit)}, p.got)
}

// TestAppendHandleFinalLineAtRelease: a line without '\n' is not cut at a
// FLUSH (every close(2) of a shared descriptor sends one), so
// `(cat part; echo rest) > append` stores one record and `(cat part;
// echo) > append` no empty one; it becomes a record at RELEASE, and
// readers of the topic wait for that while the FLUSH that left it is
// recent.
func TestAppendHandleFinalLineAtRelease(t *testing.T) {
	p := &fakeLog{}
	h := newTestHandle(p, 1000)
	write := func(s string) {
		t.Helper()
		n, errno := h.write([]byte(s))
		require.Zero(t, errno)
		require.Equal(t, uint32(len(s)), n)
	}
	write("abc")
	require.Zero(t, h.flush()) // cat closes its copy
	write("def\n")             // echo def
	require.Zero(t, h.flush())
	assert.Equal(t, []string{"abcdef"}, p.got)

	write("ghi")
	require.Zero(t, h.flush())
	write("\n") // echo
	require.Zero(t, h.flush())
	require.Zero(t, h.release())
	assert.Equal(t, []string{"abcdef", "ghi"}, p.got, "no empty record")

	write("last")
	require.Zero(t, h.flush())
	assert.Len(t, p.got, 2)
	require.Zero(t, h.release())
	assert.Equal(t, "last", p.got[2])
}

// TestAppendHandleFinalLineErrorAtFlush: a final line that cannot be a
// record as it stands is reported by close(2) (FLUSH); a later write may
// still complete it.
func TestAppendHandleFinalLineErrorAtFlush(t *testing.T) {
	p := &fakeLog{}
	h := newTestHandle(p, 1000)
	h.jsonl = true
	_, errno := h.write([]byte(`{"value":`))
	require.Zero(t, errno)
	assert.Equal(t, syscall.EINVAL, h.flush())
	_, errno = h.write([]byte(`"v"}`))
	require.Zero(t, errno)
	require.Zero(t, h.flush())
	require.Zero(t, h.release())
	assert.Equal(t, []string{"v"}, p.got)
}

func TestAwaitTails(t *testing.T) {
	f := newFsys(nil, Options{})
	h := &appendHandle{fsys: f}
	f.awaitTails(context.Background(), "t") // nothing held: returns

	f.holdTail(h, "t")
	done := make(chan struct{})
	go func() {
		f.awaitTails(context.Background(), "t")
		close(done)
	}()
	f.awaitTails(context.Background(), "other") // another topic's reader does not wait
	select {
	case <-done:
		t.Fatal("a reader did not wait for the held final line")
	case <-time.After(50 * time.Millisecond):
	}
	h.tailHeld = true
	h.keepTail() // RELEASE (or a write) ends the hold
	<-done
	assert.Zero(t, f.tailsHeld.Load())

	// An old hold (a descriptor kept open past its FLUSH) is not waited for.
	f.holdTail(h, "t")
	f.mu.Lock()
	f.mu.tails[h] = tailHold{topic: "t", until: time.Now().Add(-time.Second)}
	f.mu.Unlock()
	f.awaitTails(context.Background(), "t")

	// A cancelled reader stops waiting.
	f.mu.Lock()
	f.mu.tails[h] = tailHold{topic: "t", until: time.Now().Add(time.Hour)}
	f.mu.Unlock()
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	f.awaitTails(ctx, "t")
}
