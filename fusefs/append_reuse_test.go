package fusefs

import (
	"context"
	"fmt"
	"github.com/topicfs/topicfs/backend"
	"math/rand"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/topicfs/topicfs/engine"
	"github.com/topicfs/topicfs/engine/record"
)

// TestAppendHandleReusesBuffers writes many lines in random chunks while
// records stay pending across writes (a long linger, small batches): the
// reused arena, record scratch and pending batches must never change a
// record before it is appended.
func TestAppendHandleReusesBuffers(t *testing.T) {
	for _, tc := range []struct {
		name      string
		batchSize int64
		linger    time.Duration
	}{
		{"small batches, long linger", 300, time.Hour},
		{"one batch per write", 1 << 20, 0},
		{"big batches, long linger", 1 << 20, time.Hour},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := &fakeLog{}
			h := newTestHandle(p, 1000)
			h.batchSize, h.linger = tc.batchSize, tc.linger
			rng := rand.New(rand.NewSource(7))
			var want []string
			var input strings.Builder
			for i := range 3000 {
				l := fmt.Sprintf("line-%d-%s", i, strings.Repeat("x", rng.Intn(200)))
				want = append(want, l)
				input.WriteString(l + "\n")
			}
			in := input.String()
			for len(in) > 0 {
				n := min(len(in), 1+rng.Intn(5000))
				got, errno := h.write([]byte(in[:n]))
				require.Zero(t, errno)
				require.Equal(t, uint32(n), got)
				in = in[n:]
			}
			require.Zero(t, h.release())
			require.Equal(t, want, p.got)
		})
	}
}

// BenchmarkAppendWrite feeds WRITEs of 100-byte lines (cat > append: 128
// KiB, or 1 MiB with the append file's st_blksize) to a handle whose
// partition discards them.
func BenchmarkAppendWrite(b *testing.B) {
	for _, size := range []int{128 << 10, 1 << 20} {
		b.Run(fmt.Sprintf("%dKiB", size>>10), func(b *testing.B) {
			line := strings.Repeat("v", 99) + "\n"
			data := []byte(strings.Repeat(line, size/len(line)+1)[:size])
			h := newTestHandle(discardLog{}, 1<<20)
			h.batchSize, h.linger = 16<<10, time.Hour
			b.SetBytes(int64(len(data)))
			b.ReportAllocs()
			for b.Loop() {
				if _, errno := h.write(data); errno != 0 {
					b.Fatal(errno)
				}
			}
			h.flush()
		})
	}
}

// discardLog accepts appends and keeps nothing.
type discardLog struct {
	backend.Partition // only AppendEach and the names are used
}

func (discardLog) Topic() string { return "discard" }
func (discardLog) ID() int       { return 0 }

func (discardLog) AppendEach(_ context.Context, groups [][]record.Record) (int64, int64, error) {
	n := 0
	for _, recs := range groups {
		n += len(recs)
	}
	return 0, int64(n) - 1, nil
}

func (d discardLog) AppendLines(_ context.Context, lines []byte, batchBytes int) (int64, int64, error) {
	return d.AppendEach(context.Background(), linesGroups(lines, batchBytes))
}

func (discardLog) EncodeLines(*engine.EncodedLines, []byte, int) error { return engine.ErrNotEncodable }
