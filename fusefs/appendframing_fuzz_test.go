package fusefs

import (
	"bytes"
	"syscall"
	"testing"
)

// FuzzAppendFraming writes data to an append handle (plain lines, no key,
// linger.ms 0) in pieces cut at the bytes of cuts, with max.message.bytes
// maxMessage, then closes and releases it, and compares what was appended with the lines
// of data (the final unterminated one included). Writes fail with
// EMSGSIZE or not at all. Every stored record is a whole line of data, in
// order, and fits max.message.bytes: no prefix or joined piece of a refused
// line is ever stored. When every line fits, every write succeeds and
// every line is stored.
func FuzzAppendFraming(f *testing.F) {
	f.Add([]byte("a\nbb\nccc\n"), []byte{2, 3}, uint16(100))
	f.Add([]byte("short\n"+string(bytes.Repeat([]byte("x"), 200))+"\nafter\n"), []byte{6, 100, 150}, uint16(100))
	f.Add([]byte("unterminated"), []byte{3}, uint16(100))
	f.Fuzz(func(t *testing.T, data, cuts []byte, maxMessage uint16) {
		max := int64(maxMessage) + 70 // room for the batch header
		p := &fakeLog{}
		h := newTestHandle(p, max)
		fits := true
		lines := bytes.Split(data, []byte("\n"))
		if len(lines[len(lines)-1]) == 0 {
			lines = lines[:len(lines)-1]
		}
		for _, l := range lines {
			fits = fits && valueRecordSize(len(l)) <= max
		}
		// The writer is cat: after a short count it writes the rest, and at
		// the first error it stops and closes. (A writer that drops a
		// refused piece and goes on may drop a newline with it; then no
		// rule can tell its next bytes from the refused line's.)
		rest := data
	writes:
		for i := 0; len(rest) > 0; i++ {
			n := len(rest)
			if i < len(cuts) && cuts[i] > 0 {
				n = min(n, int(cuts[i]))
			}
			for piece := rest[:n]; len(piece) > 0; {
				k, errno := h.write(piece)
				if errno != 0 && errno != syscall.EMSGSIZE {
					t.Fatalf("write %d: %v", i, errno)
				}
				if errno != 0 && fits {
					t.Fatalf("write %d failed (%v) though every line fits", i, errno)
				}
				if errno != 0 {
					break writes
				}
				if k == 0 {
					t.Fatalf("write %d took nothing of %d bytes without an error", i, len(piece))
				}
				piece = piece[k:]
			}
			rest = rest[n:]
		}
		_ = h.flush()   // close(2)
		_ = h.release() // the last descriptor gone: the final line becomes a record
		j := 0
		for i, got := range p.got {
			for j < len(lines) && string(lines[j]) != got {
				j++
			}
			if j == len(lines) {
				t.Fatalf("record %d (%d bytes, %.40q) is not a whole line of the input, in order", i, len(got), got)
			}
			if valueRecordSize(len(got)) > max {
				t.Fatalf("record %d of %d bytes is above max.message.bytes", i, len(got))
			}
			j++
		}
		if fits && len(p.got) != len(lines) {
			t.Fatalf("%d records of %d lines that all fit", len(p.got), len(lines))
		}
	})
}
