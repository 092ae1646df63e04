package engine

import (
	"fmt"
	"io"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/topicfs/topicfs/engine/record"
	"github.com/topicfs/topicfs/engine/vfs"
)

// kibRecs returns n records of size-byte values, value i starting with its
// number, and one record of big bytes at index bigAt (if big > 0).
func kibRecs(n, size, bigAt, big int) []record.Record {
	recs := make([]record.Record, n)
	for i := range recs {
		sz := size
		if big > 0 && i == bigAt {
			sz = big
		}
		v := make([]byte, sz)
		for j := range v {
			v[j] = byte('a' + (i+j)%26)
		}
		copy(v, fmt.Sprintf("%08d", i))
		recs[i] = record.Record{Timestamp: -1, Value: v}
	}
	return recs
}

// batchSizes returns the size in bytes and the records of every batch.
func batchSizes(t *testing.T, p *Partition) (sizes []int, counts []int) {
	t.Helper()
	r := p.NewReader(0, ReaderOptions{})
	defer r.Close()
	for {
		b, err := r.Next()
		if err == io.EOF {
			return sizes, counts
		}
		require.NoError(t, err)
		sizes = append(sizes, int(b.Size()))
		counts = append(counts, int(b.RecordCount))
	}
}

// TestAppendLargeGroup: a multi-MiB Append is cut into batches of about
// appendBatchBytes (a larger record gets one of its own) and reads back
// whole and in order, on the real file system and after a crash.
func TestAppendLargeGroup(t *testing.T) {
	for _, fsName := range []string{"os", "mem"} {
		t.Run(fsName, func(t *testing.T) {
			var fs vfs.FS = vfs.OS
			dir := filepath.Join(t.TempDir(), "t-0")
			mem := vfs.NewMem()
			if fsName == "mem" {
				fs, dir = mem, "/d/t-0"
			}
			cfg := DefaultConfig()
			p := openTest(t, fs, dir, cfg)
			_, _, err := p.Append(kibRecs(200, 1024, 0, 0))
			require.NoError(t, err)
			recs := append(kibRecs(200, 1024, 0, 0), kibRecs(3000, 1024, 1500, 300<<10)...)
			first, last, err := p.Append(recs[200:])
			require.NoError(t, err)
			assert.Equal(t, int64(200), first)
			assert.Equal(t, int64(3199), last)
			sizes, counts := batchSizes(t, p)
			total := 0
			for i, sz := range sizes {
				total += counts[i]
				if counts[i] == 1 {
					assert.Greater(t, sz, appendBatchBytes, "a lone record is the big one")
					continue
				}
				assert.LessOrEqual(t, sz, appendBatchBytes, "batch %d", i)
			}
			assert.Equal(t, 3200, total)
			assert.GreaterOrEqual(t, len(sizes), 14, "3.5 MiB in batches of at most 256 KiB")
			got := readAll(t, p)
			require.Len(t, got, 3200)
			for i, r := range got {
				require.Equal(t, int64(i), r.Offset)
				require.Equal(t, recs[i].Value, r.Value, "record %d", i)
			}
			// More appends continue the log; the files hold exactly the
			// published bytes.
			_, last, err = p.Append(kibRecs(10, 100, 0, 0))
			require.NoError(t, err)
			assert.Equal(t, int64(3209), last)
			require.NoError(t, p.Flush())
			s := p.active()
			fi, err := fs.Stat(s.LogPath())
			require.NoError(t, err)
			assert.Equal(t, s.Size(), fi.Size())
			require.NoError(t, p.Close())
			if fsName == "mem" {
				q := openTest(t, mem.Crash(), dir, cfg)
				defer q.Close()
				assert.Equal(t, int64(3210), q.LogEndOffset())
				checkIndexes(t, q)
			}
		})
	}
}

// TestAppendLargeWriteFails: when the write of a large append's run fails
// part way, the call fails, nothing of it is published or left in the
// file, and the partition appends on.
func TestAppendLargeWriteFails(t *testing.T) {
	for _, failAt := range []int{1} {
		t.Run(fmt.Sprintf("write %d", failAt), func(t *testing.T) {
			mem := vfs.NewMem()
			sw := &vfs.Switchable{}
			cfg := DefaultConfig()
			p := openTest(t, vfs.NewErrorFS(mem, sw), "/d/t-0", cfg)
			defer p.Close()
			_, _, err := p.Append(kibRecs(5, 100, 0, 0))
			require.NoError(t, err)
			size0 := p.active().Size()
			writes := 0
			sw.Set(vfs.InjectorFunc(func(op vfs.Op) *vfs.Fault {
				if op.Kind == vfs.OpWriteAt && filepath.Ext(op.Path) == ".log" {
					if writes++; writes == failAt {
						return &vfs.Fault{Err: enospc, Written: op.Len / 2}
					}
				}
				return nil
			}))
			_, _, err = p.Append(kibRecs(1000, 1024, 0, 0))
			sw.Set(nil)
			require.ErrorIs(t, err, enospc)
			assert.Equal(t, int64(5), p.LogEndOffset())
			assert.Equal(t, size0, p.active().Size())
			fi, err := mem.Stat(p.active().LogPath())
			require.NoError(t, err)
			assert.Equal(t, size0, fi.Size(), "the failed run's bytes are cut")

			_, last, err := p.Append(kibRecs(1000, 1024, 0, 0))
			require.NoError(t, err)
			assert.Equal(t, int64(1004), last)
			got := readAll(t, p)
			require.Len(t, got, 1005)
			assert.Equal(t, seq(0, 1005), offsetsOf(got))
		})
	}
}
