package fusefs

import (
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestBufListIsBounded(t *testing.T) {
	l := newBufList(4096, 3)
	var held [][]byte
	for range 10 {
		b := l.get()
		require.Len(t, b, 4096)
		held = append(held, b)
	}
	out, idle := l.stats()
	assert.Equal(t, 10, out)
	assert.Equal(t, 0, idle)
	for _, b := range held {
		l.put(b[:17]) // any length of the right capacity
	}
	out, idle = l.stats()
	assert.Equal(t, 0, out)
	assert.Equal(t, 3, idle, "only capacity idle buffers are kept")

	// Reuse: gets take the idle buffers first.
	b := l.get()
	assert.Len(t, b, 4096)
	_, idle = l.stats()
	assert.Equal(t, 2, idle)
	l.put(b)

	// A buffer of another size is not taken (and not counted).
	l.put(make([]byte, 4096, 8192))
	l.put(make([]byte, 10))
	out, idle = l.stats()
	assert.Equal(t, 0, out)
	assert.Equal(t, 3, idle)
}

func TestGetBufPicksList(t *testing.T) {
	for _, tc := range []struct {
		n       int
		wantCap int
	}{
		{1, chunkMin},
		{chunkMin, chunkMin},
		{chunkMin + 1, chunkMax},
		{chunkMax, chunkMax},
		{chunkMax + 1, chunkMax + 1},
	} {
		t.Run(fmt.Sprint(tc.n), func(t *testing.T) {
			bo, _ := bigBufs.stats()
			so, _ := smallBufs.stats()
			b := getBuf(tc.n)
			assert.Len(t, b, tc.n)
			assert.Equal(t, tc.wantCap, cap(b))
			putBuf(b)
			bo2, bi := bigBufs.stats()
			so2, si := smallBufs.stats()
			assert.Equal(t, bo, bo2)
			assert.Equal(t, so, so2)
			assert.LessOrEqual(t, bi, bigBufsMax)
			assert.LessOrEqual(t, si, smallBufsMax)
		})
	}
}

// waitBufsBack waits until no more buffers are out than before (go-fuse
// gives a READ's buffer back after the reply, and RELEASE comes after
// close returns, so the last ones come back a moment after the readers
// are done). It fails after a generous deadline: a leak never returns.
func waitBufsBack(t *testing.T, bigOut, smallOut int) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		bo, _ := bigBufs.stats()
		so, _ := smallBufs.stats()
		if bo <= bigOut && so <= smallOut {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("buffers still out after the readers closed: big %d (before %d), small %d (before %d)", bo, bigOut, so, smallOut)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestViewBuffersComeBack reads views through the mount many times (whole
// cats, partial reads closed half way, seeks, by-offset opens, concurrent
// readers) and checks that every chunk and read-ahead buffer comes back to
// its free list and that the lists stay within their capacities: the
// mount's memory does not grow with the number of reads.
func TestViewBuffersComeBack(t *testing.T) {
	m := newTestMount(t, mountOpts{})
	m.sh(t, `mkdir $MNT/mem`)
	p := m.partition(t, "mem", 0)
	want := appendBigBatches(t, p, 40, 1000, 99) // ~4 MB
	bigOut, _ := bigBufs.stats()
	smallOut, _ := smallBufs.stats()
	for i := range 8 {
		got, err := os.ReadFile(m.path("mem", "0", "records"))
		require.NoError(t, err)
		require.Equal(t, len(want), len(got), "round %d", i)
		m.sh(t, `head -c 1500000 $MNT/mem/0/records >/dev/null`)
		m.sh(t, `dd if=$MNT/mem/0/records bs=64k skip=20 count=3 status=none >/dev/null`)
		m.sh(t, fmt.Sprintf(`head -n 1 $MNT/mem/0/by-offset/%d >/dev/null`, 1000*i+7))
		m.sh(t, `for i in 1 2 3; do cat $MNT/mem/0/records >/dev/null & done; wait`)
	}
	waitBufsBack(t, bigOut, smallOut)
	_, bi := bigBufs.stats()
	_, si := smallBufs.stats()
	assert.LessOrEqual(t, bi, bigBufsMax)
	assert.LessOrEqual(t, si, smallBufsMax)
	assert.Positive(t, bi, "big buffers are kept for the next reader")
}
