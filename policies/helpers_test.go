package policies

import (
	"io"
	"log/slog"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/topicfs/topicfs/engine"
	"github.com/topicfs/topicfs/engine/record"
	"github.com/topicfs/topicfs/engine/vfs"
)

// testBuffer is the dedupe buffer of most tests: small, so that each
// cleaning does not clear Kafka's default 128 MiB.
const testBuffer = 4 << 20

// fakeClock is an injectable clock for Options.Now and the engine.
type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func newClock() *fakeClock {
	return &fakeClock{t: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
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

func testLogger(t testing.TB) *slog.Logger {
	if testing.Verbose() {
		return slog.New(slog.NewTextHandler(tWriter{t}, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	return slog.New(slog.NewTextHandler(io.Discard, nil))
}

type tWriter struct{ t testing.TB }

func (w tWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

// testConfig returns the defaults with kv applied.
func testConfig(t testing.TB, kv map[string]string) engine.Config {
	t.Helper()
	c, err := engine.DefaultConfig().Apply(kv)
	require.NoError(t, err)
	return c
}

// openLogDir opens a log directory on fs at dir with the given defaults and
// closes it at the end of the test (unless the test closed it).
func openLogDir(t testing.TB, fs vfs.FS, dir string, clk *fakeClock, kv map[string]string) *engine.LogDir {
	t.Helper()
	d, err := engine.OpenLogDir(fs, dir, engine.LogDirOptions{
		Defaults: testConfig(t, kv), Logger: testLogger(t), Now: clk.Now,
	})
	require.NoError(t, err)
	t.Cleanup(func() { _ = d.Close() })
	return d
}

// createPartition creates topic with one partition and returns partition 0.
func createPartition(t testing.TB, d *engine.LogDir, topic string, kv map[string]string) *engine.Partition {
	t.Helper()
	tp, err := d.CreateTopic(topic, 1)
	require.NoError(t, err)
	if len(kv) > 0 {
		require.NoError(t, tp.AlterConfig(kv))
	}
	p, err := tp.Partition(0)
	require.NoError(t, err)
	return p
}

// readAll reads every retained data record of p through the engine: a
// snapshot, each segment's batches, their records from the log start on.
// Control batches are skipped.
func readAll(t testing.TB, p *engine.Partition) []record.Record {
	t.Helper()
	snap := p.Snapshot()
	defer snap.Release()
	var out []record.Record
	var buf []byte
	for _, s := range snap.Segments {
		end := s.Size()
		for pos := int64(0); pos < end; {
			b, err := s.ReadBatch(pos, buf)
			require.NoError(t, err, "segment %d pos %d", s.BaseOffset(), pos)
			if cap(b.Raw) > cap(buf) {
				buf = b.Raw[:cap(b.Raw)]
			}
			pos += int64(b.Size())
			if b.IsControl() {
				continue
			}
			recs, err := b.Records(nil)
			require.NoError(t, err)
			for _, r := range recs {
				if r.Offset >= snap.LogStartOffset {
					out = append(out, r)
				}
			}
		}
	}
	return out
}

// appendKV appends one record per key/value pair (value "" with tomb set
// is a tombstone) in one call and returns the first offset.
func appendRecs(t testing.TB, p *engine.Partition, recs ...record.Record) int64 {
	t.Helper()
	for i := range recs {
		if recs[i].Timestamp == 0 {
			recs[i].Timestamp = -1
		}
	}
	first, _, err := p.Append(recs)
	require.NoError(t, err)
	return first
}

func kv(key string, value string) record.Record {
	return record.Record{Key: []byte(key), Value: []byte(value), Timestamp: -1}
}

func tomb(key string) record.Record {
	return record.Record{Key: []byte(key), Timestamp: -1}
}

// listDir returns the file names in p's directory.
func listDir(t testing.TB, fs vfs.FS, dir string) []string {
	t.Helper()
	ents, err := fs.ReadDir(dir)
	require.NoError(t, err)
	var names []string
	for _, e := range ents {
		names = append(names, e.Name())
	}
	sort.Strings(names)
	return names
}

func countSuffix(names []string, suffix string) int {
	n := 0
	for _, s := range names {
		if strings.HasSuffix(s, suffix) {
			n++
		}
	}
	return n
}
