package engine

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/topicfs/topicfs/engine/record"
	"github.com/topicfs/topicfs/engine/vfs"
)

// testConfig is a small-segment configuration for tests.
func testConfig() Config {
	c := DefaultConfig()
	c.SegmentBytes = 64 << 10
	c.SegmentIndexBytes = 4 << 10
	c.IndexIntervalBytes = 256
	return c
}

// fakeClock is a settable clock for PartitionOptions.Now.
// fakeClock is an injectable clock; safe for the LogDir's background loops.
type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *fakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

func quietLogger() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

func openTest(t testing.TB, fs vfs.FS, dir string, cfg Config, mut ...func(*PartitionOptions)) *Partition {
	t.Helper()
	opts := PartitionOptions{Config: cfg, RecoveryPoint: -1, LogStartOffset: -1, FirstDirty: -1, Logger: quietLogger()}
	for _, m := range mut {
		m(&opts)
	}
	p, err := OpenPartition(fs, dir, "t", 0, opts)
	require.NoError(t, err)
	return p
}

// recs makes n records with values "v<i>" and timestamps ts0+i.
func makeRecs(from, n int, ts0 int64) []record.Record {
	out := make([]record.Record, n)
	for i := range out {
		out[i] = record.Record{Timestamp: ts0 + int64(i), Key: []byte(fmt.Sprintf("k%d", from+i)), Value: []byte(fmt.Sprintf("value-%06d", from+i))}
	}
	return out
}

// readAll reads every record of the partition through a snapshot.
func readAll(t testing.TB, p *Partition) []record.Record {
	t.Helper()
	snap := p.Snapshot()
	defer snap.Release()
	var out, tmp []record.Record
	var buf []byte
	for _, s := range snap.Segments {
		for pos := int64(0); ; {
			b, err := s.ReadBatch(pos, buf)
			if errors.Is(err, io.EOF) {
				break
			}
			require.NoError(t, err)
			buf = b.Raw
			tmp, err = b.Records(tmp[:0])
			require.NoError(t, err)
			out = append(out, tmp...)
			pos += int64(b.Size())
		}
	}
	return out
}

// offsetsOf lists the offsets of recs.
func offsetsOf(recs []record.Record) []int64 {
	out := make([]int64, len(recs))
	for i, r := range recs { //nolint

		out[i] = r.Offset
	}
	return out
}

func seq(from, to int64) []int64 {
	out := []int64{}
	for i := from; i < to; i++ {
		out = append(out, i)
	}
	return out
}

var (
	errNotExist = os.ErrNotExist
	enospc      = syscall.ENOSPC
)

// warnCounter is a slog handler that counts records at Warn and above.
type warnCounter struct {
	mu   sync.Mutex
	msgs []string
}

func (w *warnCounter) Enabled(_ context.Context, l slog.Level) bool { return l >= slog.LevelWarn }
func (w *warnCounter) Handle(_ context.Context, r slog.Record) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.msgs = append(w.msgs, r.Message)
	return nil
}
func (w *warnCounter) WithAttrs([]slog.Attr) slog.Handler { return w }
func (w *warnCounter) WithGroup(string) slog.Handler      { return w }
func (w *warnCounter) Messages() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]string(nil), w.msgs...)
}
