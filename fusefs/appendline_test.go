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

// retryingWrite is how Go's os.File and cat write: after a short count
// they write the rest, until all is taken or write(2) fails.
func retryingWrite(h *appendHandle, buf []byte, chunk, skew int) (int, syscall.Errno) {
	done := 0
	for done < len(buf) {
		n, errno := kernelWrite(h, buf[done:], chunk, skew)
		if errno != 0 {
			return done, errno
		}
		done += n
	}
	return done, 0
}

// pythonWrite is how python's buffered files write: as retryingWrite, and
// what failed stays buffered and is written again at close.
func pythonWrite(h *appendHandle, buf []byte, chunk, skew int) syscall.Errno {
	done, errno := retryingWrite(h, buf, chunk, skew)
	if errno != 0 {
		retryingWrite(h, buf[done:], chunk, skew) // at close; close reports the first error
	}
	return errno
}

// piecesWrite writes buf in pieces of piece bytes, each with
// retryingWrite, going on to the next piece after an error (a shell loop
// of printf, or glibc's stdio dropping what failed).
func piecesWrite(h *appendHandle, buf []byte, piece, chunk int) syscall.Errno {
	var first syscall.Errno
	for off := 0; off < len(buf); off += piece {
		if _, errno := retryingWrite(h, buf[off:min(off+piece, len(buf))], chunk, 0); errno != 0 && first == 0 {
			first = errno
		}
	}
	return first
}

// TestAppendHandleOverlongLineStoresNothing drives lines too long for
// max.message.bytes through every way the kernel may cut them into WRITEs,
// for bare, keyed and JSON lines, and writers that retry as python does,
// stop at the first error as cat and Go do, or go on after errors: the
// writer always sees EMSGSIZE, nothing of the long line is ever stored,
// the lines before it are, and the line after it too when the writer sends
// it. Before, the begun start of the line became a record at close (after
// a short count and no error), and python's retry stored the line's end.
func TestAppendHandleOverlongLineStoresNothing(t *testing.T) {
	type mode struct {
		name string
		line func(s string) string
		cfg  func(h *appendHandle)
	}
	modes := []mode{
		{"bare", func(s string) string { return s }, func(*appendHandle) {}},
		{"keyed", func(s string) string { return "k\t" + s }, func(h *appendHandle) {
			h.lc = lineConfig{parseKey: true, separator: "\t"}
		}},
		{"json", func(s string) string { return `{"value":"` + s + `"}` }, func(h *appendHandle) { h.jsonl = true }},
	}
	writers := map[string]func(h *appendHandle, buf []byte, chunk, skew int) syscall.Errno{
		"python": pythonWrite,
		"cat": func(h *appendHandle, buf []byte, chunk, skew int) syscall.Errno {
			_, errno := retryingWrite(h, buf, chunk, skew)
			return errno
		},
		"pieces": func(h *appendHandle, buf []byte, chunk, skew int) syscall.Errno {
			return piecesWrite(h, buf, 50+skew, chunk)
		},
	}
	const maxMessage = 400
	for _, m := range modes {
		for _, long := range []int{331, 345, 1000, 5000} { // 331, 345: over by the record size only
			for _, chunk := range []int{16, 100, 128, 4096} {
				for _, skew := range []int{0, 5, 37} {
					for wname, writer := range writers {
						name := fmt.Sprintf("%s/%d/chunk%d/skew%d/%s", m.name, long, chunk, skew, wname)
						t.Run(name, func(t *testing.T) {
							p := &fakeLog{}
							h := newTestHandle(p, maxMessage)
							h.linger = time.Duration(skew%2) * time.Hour
							m.cfg(h)
							big := m.line(strings.Repeat("x", long))
							r, err := h.parse([]byte(big))
							require.NoError(t, err)
							require.Greater(t, recordSize(&r), int64(maxMessage), "too long")
							buf := m.line("before") + "\n" + big + "\n" + m.line("after") + "\n"
							assert.Equal(t, syscall.EMSGSIZE, writer(h, []byte(buf), chunk, skew), "the writer is told")
							require.Zero(t, h.release())
							require.NotEmpty(t, p.got)
							assert.Equal(t, "before", p.got[0])
							for _, v := range p.got {
								assert.NotContains(t, v, "x", "nothing of the long line")
							}
							switch wname {
							case "python":
								// after is stored when python's retry at
								// close comes after two refusals (one was
								// hidden in a short count), else refused.
								if len(p.got) > 1 {
									assert.Equal(t, []string{"before", "after"}, p.got)
								}
								if chunk < len(buf)/2 {
									assert.Equal(t, []string{"before", "after"}, p.got)
								}
							case "cat":
								assert.Equal(t, []string{"before"}, p.got)
							}
						})
					}
				}
			}
		}
	}
}

// TestAppendHandleOverlongLineWriters: the long line written in pieces by
// a writer that ignores the errors (each piece its own write), and by
// glibc's stdio, which drops the refused write and sends the newline that
// was left in its buffer: nothing of it is stored, the line after it is.
func TestAppendHandleOverlongLineWriters(t *testing.T) {
	p := &fakeLog{}
	h := newTestHandle(p, 400)
	var errs []syscall.Errno
	for i := 0; i < 30; i++ { // printf %s "$piece" in a loop: 1500 bytes
		_, errno := kernelWrite(h, []byte(strings.Repeat("x", 50)), 4096, 0)
		errs = append(errs, errno)
	}
	assert.Contains(t, errs, syscall.EMSGSIZE)
	n, errno := kernelWrite(h, []byte("\nafter\n"), 4096, 0)
	require.Zero(t, errno, "the end of the line is taken and dropped")
	require.Equal(t, 7, n)

	// echo "$big"; echo a2 through glibc (strace): 8 KiB, then the rest of
	// the line but its last bytes (refused), then "\n" (refused), then a2.
	line := strings.Repeat("y", 2000)
	_, errno = kernelWrite(h, []byte(line[:300]), 4096, 0)
	require.Zero(t, errno)
	_, errno = kernelWrite(h, []byte(line[300:1900]), 4096, 0)
	assert.Equal(t, syscall.EMSGSIZE, errno)
	_, errno = kernelWrite(h, []byte("\n"), 4096, 0)
	assert.Equal(t, syscall.EMSGSIZE, errno)
	_, errno = kernelWrite(h, []byte("a2\n"), 4096, 0)
	require.Zero(t, errno, "a write that is no retry, after the refused newline, is a new line")

	// A writer whose first WRITE of a line is refused (it was too long
	// alone) and that goes on with the next line: that write ends the long
	// line and is refused; written again, it is stored.
	_, errno = kernelWrite(h, []byte(line), 4096, 0)
	assert.Equal(t, syscall.EMSGSIZE, errno)
	_, errno = kernelWrite(h, []byte("next\n"), 4096, 0)
	assert.Equal(t, syscall.EMSGSIZE, errno)
	_, errno = kernelWrite(h, []byte("next\n"), 4096, 0)
	require.Zero(t, errno)
	require.Zero(t, h.release())
	assert.Equal(t, []string{"after", "a2", "next"}, p.got)

	// A line that fits exactly is a record; one byte more is not.
	p.got = nil
	h = newTestHandle(p, 400)
	limit := h.maxLine()
	require.Equal(t, int64(400), valueRecordSize(limit))
	_, errno = retryingWrite(h, []byte(strings.Repeat("a", limit)+"\n"), 128, 3)
	require.Zero(t, errno)
	_, errno = retryingWrite(h, []byte(strings.Repeat("b", limit+1)+"\n"), 128, 3)
	assert.Equal(t, syscall.EMSGSIZE, errno)
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

// TestAppendHandleFinalLineErrorAtFlush: a final line that no further
// bytes can make a record is reported by close(2) (FLUSH); one that more
// bytes could still complete (a JSON object cut short, a keyed line
// without its separator yet) is not, since the FLUSH may come from one of
// several descriptors sharing the file: RELEASE judges it.
func TestAppendHandleFinalLineErrorAtFlush(t *testing.T) {
	p := &fakeLog{}
	h := newTestHandle(p, 1000)
	h.jsonl = true
	_, errno := h.write([]byte(`{"value":`))
	require.Zero(t, errno)
	assert.Zero(t, h.flush(), "a JSON object cut short may still be completed")
	_, errno = h.write([]byte(`"v"}`))
	require.Zero(t, errno)
	require.Zero(t, h.flush())
	require.Zero(t, h.release())
	assert.Equal(t, []string{"v"}, p.got)

	bad := newTestHandle(p, 1000)
	bad.jsonl = true
	_, errno = bad.write([]byte(`{bad`))
	require.Zero(t, errno)
	assert.Equal(t, syscall.EINVAL, bad.flush(), "no bytes can make {bad a JSON object")

	cut := newTestHandle(p, 1000)
	cut.jsonl = true
	_, errno = cut.write([]byte(`{"value":"w"`))
	require.Zero(t, errno)
	assert.Zero(t, cut.flush())
	assert.Equal(t, syscall.EINVAL, cut.release(), "released cut short: not a record")

	keyed := newTestHandle(p, 1000)
	keyed.lc = lineConfig{parseKey: true, separator: "\t", nullMarker: ""}
	_, errno = keyed.write([]byte("k"))
	require.Zero(t, errno)
	assert.Zero(t, keyed.flush(), "the separator may still come")
	_, errno = keyed.write([]byte("\tval"))
	require.Zero(t, errno)
	require.Zero(t, keyed.flush())
	require.Zero(t, keyed.release())
	assert.Equal(t, []string{"v", "val"}, p.got)
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
	assert.Zero(t, f.tailsHeld.Load(), "an expired hold is forgotten, so readers skip the lock again")

	// A cancelled reader stops waiting.
	f.holdTail(h, "t")
	f.mu.Lock()
	f.mu.tails[h] = tailHold{topic: "t", until: time.Now().Add(time.Hour)}
	f.mu.Unlock()
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	f.awaitTails(ctx, "t")
}
