package fusefs

import (
	"bytes"
	"testing"
)

// FuzzLineSplitter frames data written in arbitrary pieces (cut at the
// bytes of cuts) with lineSplitter, as config files are. It must never
// panic, and whatever the pieces, the lines it returns, in order, and the
// rest it keeps are those of bytes.Split of the whole data.
func FuzzLineSplitter(f *testing.F) {
	f.Add([]byte("a=1\nb=2\n"), []byte{1, 3})
	f.Add([]byte("no newline"), []byte{0, 0, 4})
	f.Add([]byte("\n\n\nx"), []byte{})
	f.Fuzz(func(t *testing.T, data, cuts []byte) {
		var s lineSplitter
		var got [][]byte
		rest := data
		for i := 0; len(rest) > 0; i++ {
			n := len(rest)
			if i < len(cuts) {
				n = min(n, int(cuts[i]))
			}
			lines, tail := s.split(rest[:n])
			got = append(got, lines...)
			s.set(tail)
			rest = rest[n:]
		}
		want := bytes.Split(data, []byte("\n"))
		wantRest := want[len(want)-1]
		want = want[:len(want)-1]
		if len(got) != len(want) {
			t.Fatalf("%d lines, want %d", len(got), len(want))
		}
		for i := range want {
			if !bytes.Equal(got[i], want[i]) {
				t.Fatalf("line %d: %q, want %q", i, got[i], want[i])
			}
		}
		if r := s.take(); !bytes.Equal(r, wantRest) {
			t.Fatalf("rest %q, want %q", r, wantRest)
		}
	})
}
