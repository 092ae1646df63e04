package fusefs

import (
	"context"
	"fmt"
	"math/rand"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/topicfs/topicfs/engine"
	"github.com/topicfs/topicfs/engine/record"
	"github.com/topicfs/topicfs/engine/vfs"
)

// openTestPartition opens a partition in a temporary directory.
func openTestPartition(t testing.TB, cfg engine.Config) *engine.Partition {
	t.Helper()
	p, err := engine.OpenPartition(vfs.OS, filepath.Join(t.TempDir(), "v-0"), "v", 0,
		engine.PartitionOptions{Config: cfg, RecoveryPoint: -1, LogStartOffset: -1, FirstDirty: -1})
	require.NoError(t, err)
	t.Cleanup(func() { p.Close() })
	return p
}

// viewRecordsFixture appends n records of varied shapes and returns them.
func viewRecordsFixture(t testing.TB, p *engine.Partition, n int) []record.Record {
	t.Helper()
	rng := rand.New(rand.NewSource(1))
	var all []record.Record
	for len(all) < n {
		batch := make([]record.Record, 1+rng.Intn(40))
		for i := range batch {
			v := fmt.Appendf(nil, "value-%d-", len(all)+i)
			for range rng.Intn(300) {
				v = append(v, 'a'+byte(rng.Intn(26)))
			}
			r := record.Record{Timestamp: 1_700_000_000_000 + int64(len(all)+i), Value: v}
			if rng.Intn(3) == 0 {
				r.Key = []byte(fmt.Sprintf("k%d", rng.Intn(10)))
			}
			if rng.Intn(20) == 0 {
				r.Value = nil
			}
			batch[i] = r
		}
		first, _, err := p.Append(batch)
		require.NoError(t, err)
		for i := range batch {
			batch[i].Offset = first + int64(i)
		}
		all = append(all, batch...)
	}
	return all
}

func renderAll(f viewFormat, recs []record.Record, from int64) []byte {
	var out []byte
	for i := range recs {
		if recs[i].Offset >= from {
			out = f.appendRecord(out, &recs[i])
		}
	}
	return out
}

func TestViewStateReadsAndSeeks(t *testing.T) {
	cfg := engine.DefaultConfig()
	cfg.SegmentBytes = 100 << 10 // several segments, each with a few checkpoints
	p := openTestPartition(t, cfg)
	recs := viewRecordsFixture(t, p, 2500)
	require.Greater(t, len(p.Segments()), 3)
	f := newFsys(nil, Options{})
	ps := newPartState(f, p)
	formats := []viewFormat{{}, {printKey: true, separator: "=", nullMarker: "NULL"}, {json: true}}
	for _, format := range formats {
		for _, from := range []int64{0, 17, 1234, int64(len(recs)) - 1, int64(len(recs))} {
			t.Run(fmt.Sprintf("%+v/from-%d", format, from), func(t *testing.T) {
				st, err := newViewState(context.Background(), ps, format, func(*engine.Snapshot) (int64, error) { return from, nil })
				require.NoError(t, err)
				defer st.release()
				want := renderAll(format, recs, from)
				require.Equal(t, int64(len(want)), st.size())
				// Sequential reads in odd chunk sizes.
				var c cursor
				var got []byte
				buf := make([]byte, 7777)
				for off := int64(0); ; {
					n, err := st.read(context.Background(), &c, buf, off)
					require.NoError(t, err)
					if n == 0 {
						break
					}
					got = append(got, buf[:n]...)
					off += int64(n)
				}
				require.Equal(t, string(want), string(got))
				// Random seeks, each on a fresh cursor and on a shared one.
				rng := rand.New(rand.NewSource(from))
				var shared cursor
				for i := 0; i < 20 && len(want) > 0; i++ {
					off := rng.Int63n(int64(len(want)))
					n := 1 + rng.Intn(20000)
					dest := make([]byte, n)
					cur := &shared
					if i%2 == 0 {
						cur = &cursor{}
					}
					k, err := st.read(context.Background(), cur, dest, off)
					require.NoError(t, err)
					assert.Equal(t, string(want[off:min(int(off)+n, len(want))]), string(dest[:k]), "read %d at %d", n, off)
				}
			})
		}
	}
}

func TestViewStateGrowsAndKeepsDeletedSegments(t *testing.T) {
	cfg := engine.DefaultConfig()
	cfg.SegmentBytes = 16 << 10
	cfg.FileDeleteDelayMs = 0
	p := openTestPartition(t, cfg)
	recs := viewRecordsFixture(t, p, 1000)
	f := newFsys(nil, Options{})
	ps := newPartState(f, p)
	st, err := newViewState(context.Background(), ps, viewFormat{}, func(s *engine.Snapshot) (int64, error) { return s.LogStartOffset, nil })
	require.NoError(t, err)
	defer st.release()
	want := renderAll(viewFormat{}, recs, 0)
	require.Equal(t, int64(len(want)), st.size())

	// Retention deletes most segments; the state still reads them.
	n := len(p.Segments()) - 1
	_, err = p.DeleteOldestSegments(n, "test")
	require.NoError(t, err)
	require.NoError(t, p.PurgeDeleted(time.Now().Add(time.Hour)))
	more := viewRecordsFixture(t, p, 500)
	oldSize, newSize, err := st.refresh(context.Background())
	require.NoError(t, err)
	assert.Equal(t, int64(len(want)), oldSize)
	want = append(want, renderAll(viewFormat{}, more, 0)...)
	assert.Equal(t, int64(len(want)), newSize)
	var c cursor
	got := make([]byte, len(want)+100)
	k, err := st.read(context.Background(), &c, got, 0)
	require.NoError(t, err)
	assert.Equal(t, string(want), string(got[:k]))

	// A new state starts at the new log start.
	st2, err := newViewState(context.Background(), ps, viewFormat{}, func(s *engine.Snapshot) (int64, error) { return s.LogStartOffset, nil })
	require.NoError(t, err)
	defer st2.release()
	assert.Less(t, st2.size(), st.size())
}

func TestSeekReadsOneInterval(t *testing.T) {
	cfg := engine.DefaultConfig()
	cfg.SegmentBytes = 512 << 10
	p := openTestPartition(t, cfg)
	viewRecordsFixture(t, p, 8000)
	f := newFsys(nil, Options{})
	ps := newPartState(f, p)
	st, err := newViewState(context.Background(), ps, viewFormat{}, func(s *engine.Snapshot) (int64, error) { return 0, nil })
	require.NoError(t, err)
	defer st.release()
	size := st.size()
	before := p.Stats().BytesRead
	dest := make([]byte, 8192)
	var c cursor
	_, err = st.read(context.Background(), &c, dest, size-8192)
	require.NoError(t, err)
	read := p.Stats().BytesRead - before
	t.Logf("view of %d records is %d bytes; a seek to the end read %d bytes of the log", p.LogEndOffset(), size, read)
	assert.Less(t, read, int64(3*checkpointInterval), "a seek renders at most about one checkpoint interval")
}
