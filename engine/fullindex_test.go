package engine

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/topicfs/topicfs/engine/vfs"
)

// TestRecoveryToleratesFullIndex: an index too small for the entries
// index.interval.bytes asks for (down to one that holds no entry at all)
// only makes the index sparser; appending rolls and crash recovery (which
// rebuilds every index) still opens the partition with every record, and
// the cleaner's segment writer drops entries instead of failing.
func TestRecoveryToleratesFullIndex(t *testing.T) {
	for _, indexBytes := range []int64{4, 8, 11, 12, 13, 24} {
		t.Run(fmt.Sprint(indexBytes), func(t *testing.T) {
			cfg := testConfig()
			cfg.SegmentIndexBytes = indexBytes
			cfg.IndexIntervalBytes = 0
			const dir = "/data/t-0"
			mem := vfs.NewMem()
			p := openTest(t, mem, dir, cfg)
			for i := 0; i < 6; i++ {
				_, _, err := p.Append(makeRecs(i*3, 3, 1_000_000+int64(i*3)))
				require.NoError(t, err)
			}
			require.NoError(t, p.Flush())
			// Crash: no clean close, and no recovery point, so every
			// segment's indexes are rebuilt.
			crashed := mem.Crash()
			p2 := openTest(t, crashed, dir, cfg)
			require.Equal(t, seq(0, 18), offsetsOf(readAll(t, p2)))
			checkIndexes(t, p2)
			_, _, err := p2.Append(makeRecs(18, 3, 2_000_000))
			require.NoError(t, err)
			require.NoError(t, p2.Close())
			p3 := openTest(t, crashed, dir, cfg)
			require.Equal(t, seq(0, 21), offsetsOf(readAll(t, p3)))
			// The cleaner writes a segment of several batches with the same
			// index size: the full index drops entries instead of failing.
			snap := p3.Snapshot()
			bases := []int64{}
			for _, seg := range snap.Segments[:len(snap.Segments)-1] {
				bases = append(bases, seg.BaseOffset())
			}
			snap.Release()
			w, _ := buildCleaned(t, p3, bases)
			require.NoError(t, w.Abort())
			require.NoError(t, p3.Close())
		})
	}
}
