package engine

import (
	"bytes"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/topicfs/topicfs/engine/record"
	"github.com/topicfs/topicfs/engine/vfs"
)

// testLines returns n lines "line-%06d" padded to about size bytes, and
// one of big bytes at index bigAt (if big > 0).
func testLines(from, n, size, bigAt, big int) []byte {
	var b []byte
	for i := from; i < from+n; i++ {
		l := fmt.Sprintf("line-%06d", i)
		sz := size
		if big > 0 && i-from == bigAt {
			sz = big
		}
		for len(l) < sz {
			l += "."
		}
		b = append(append(b, l...), '\n')
	}
	return b
}

// batchesOf returns every batch of p (a copy of its header fields).
func batchesOf(t *testing.T, p *Partition) []record.Batch {
	t.Helper()
	r := p.NewReader(0, ReaderOptions{})
	defer r.Close()
	var out []record.Batch
	for {
		b, err := r.Next()
		if err != nil {
			return out
		}
		out = append(out, *b)
	}
}

// TestAppendLines: each line becomes a value-only record stamped now, in
// batches of at most batchBytes (a longer line alone), on uncompressed and
// compressed topics and with LogAppendTime; the log recovers after a crash.
func TestAppendLines(t *testing.T) {
	now := time.UnixMilli(1_800_000_000_000)
	for _, tc := range []struct {
		codec string
		lat   bool
	}{{"none", false}, {"producer", false}, {"lz4", false}, {"none", true}} {
		t.Run(fmt.Sprintf("%s/lat=%v", tc.codec, tc.lat), func(t *testing.T) {
			mem := vfs.NewMem()
			cfg := DefaultConfig()
			cfg.CompressionType = tc.codec
			if tc.lat {
				cfg.MessageTimestampType = "LogAppendTime"
			}
			p := openTest(t, mem, "/d/t-0", cfg, func(o *PartitionOptions) { o.Now = func() time.Time { return now } })
			lines := testLines(0, 3000, 100, 1000, 40<<10)
			first, last, err := p.AppendLines(lines, 16<<10)
			require.NoError(t, err)
			assert.Equal(t, int64(0), first)
			assert.Equal(t, int64(2999), last)
			lines2 := testLines(3000, 5, 10, 0, 0)
			first, last, err = p.AppendLines(lines2, 16<<10)
			require.NoError(t, err)
			assert.Equal(t, int64(3000), first)
			assert.Equal(t, int64(3004), last)

			want := bytes.Split(bytes.TrimSuffix(append(lines, lines2...), []byte("\n")), []byte("\n"))
			got := readAll(t, p)
			require.Len(t, got, len(want))
			for i, r := range got {
				require.Equal(t, int64(i), r.Offset)
				require.Equal(t, want[i], r.Value, "record %d", i)
				require.Nil(t, r.Key)
				require.Empty(t, r.Headers)
				require.Equal(t, now.UnixMilli(), r.Timestamp)
			}
			for _, b := range batchesOf(t, p) {
				assert.Equal(t, tc.lat, b.LogAppendTime())
				if tc.codec == "lz4" {
					assert.Equal(t, record.LZ4, b.Codec())
					continue
				}
				assert.Equal(t, record.None, b.Codec())
				if b.RecordCount > 1 {
					assert.LessOrEqual(t, int(b.Size()), 16<<10, "batch at %d", b.BaseOffset)
				}
			}
			require.NoError(t, p.Close())
			q := openTest(t, mem.Crash(), "/d/t-0", cfg)
			defer q.Close()
			assert.Equal(t, int64(3005), q.LogEndOffset())
			checkIndexes(t, q)
		})
	}
}

// TestAppendLinesRejects: input without a final newline appends nothing; a
// line over max.message.bytes fails with ErrRecordTooLarge after the lines
// before it, and the partition appends on.
func TestAppendLinesRejects(t *testing.T) {
	cfg := DefaultConfig()
	cfg.MaxMessageBytes = 4096
	p := openTest(t, vfs.NewMem(), "/d/t-0", cfg)
	defer p.Close()
	_, _, err := p.AppendLines([]byte("a\nb"), 1024)
	require.Error(t, err)
	_, _, err = p.AppendLines(nil, 1024)
	require.Error(t, err)
	assert.Zero(t, p.LogEndOffset())

	lines := testLines(0, 100, 50, 60, 5000)
	first, last, err := p.AppendLines(lines, 1024)
	require.ErrorIs(t, err, ErrRecordTooLarge)
	assert.Equal(t, int64(0), first)
	assert.Equal(t, int64(59), last, "the lines before the long one")
	assert.Equal(t, int64(60), p.LogEndOffset())
	_, last, err = p.AppendLines(testLines(60, 2, 10, 0, 0), 1024)
	require.NoError(t, err)
	assert.Equal(t, int64(61), last)
	got := readAll(t, p)
	require.Len(t, got, 62)
	assert.Equal(t, "line-000061", string(got[61].Value))
}
