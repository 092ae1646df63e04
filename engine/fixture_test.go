package engine

import (
	"errors"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/topicfs/topicfs/engine/record"
	"github.com/topicfs/topicfs/engine/vfs"
	"github.com/topicfs/topicfs/internal/testutil"
)

// fixtureDir is one partition directory of the real broker fixtures
// (testdata/kafka-real, plus the extra corpus when it is set; see
// testutil.KafkaFixtureRoots), read in place.
type fixtureDir struct {
	name string // set/relative path, the subtest name
	dir  string
}

// fixturePartitions lists every directory of the fixtures holding a .log.
func fixturePartitions(t *testing.T) []fixtureDir {
	t.Helper()
	roots := testutil.KafkaFixtureRoots(t)
	sets := make([]string, 0, len(roots))
	for set := range roots {
		sets = append(sets, set)
	}
	sort.Strings(sets)
	var out []fixtureDir
	for _, set := range sets {
		root := roots[set]
		var dirs []string
		err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			if !d.IsDir() && strings.HasSuffix(path, ".log") {
				dir := filepath.Dir(path)
				if len(dirs) == 0 || dirs[len(dirs)-1] != dir {
					dirs = append(dirs, dir)
				}
			}
			return nil
		})
		require.NoError(t, err)
		require.NotEmpty(t, dirs, "fixtures missing: %s", root)
		// Dozens of partitions hold only an empty segment: keep one per set.
		seenEmpty := false
		for _, d := range dirs {
			if onlyEmptyLogs(t, d) {
				if seenEmpty {
					continue
				}
				seenEmpty = true
			}
			rel, err := filepath.Rel(root, d)
			require.NoError(t, err)
			out = append(out, fixtureDir{name: filepath.Join(set, rel), dir: d})
		}
	}
	return out
}

func onlyEmptyLogs(t *testing.T, dir string) bool {
	t.Helper()
	ents, err := os.ReadDir(dir)
	require.NoError(t, err)
	for _, e := range ents {
		if strings.HasSuffix(e.Name(), ".log") {
			fi, err := e.Info()
			require.NoError(t, err)
			if fi.Size() > 0 {
				return false
			}
		}
	}
	return true
}

// groundTruth reads every batch of every .log in dir independently of the
// engine: the records and the log end offset.
func groundTruth(t *testing.T, dir string) (offsets []int64, leo int64) {
	t.Helper()
	ents, err := os.ReadDir(dir)
	require.NoError(t, err)
	offsets = []int64{}
	for _, e := range ents {
		base, ext, ok := ParseSegmentName(e.Name())
		if !ok || ext != "log" {
			continue
		}
		leo = max(leo, base)
		f, err := os.Open(filepath.Join(dir, e.Name()))
		require.NoError(t, err)
		fi, _ := f.Stat()
		var recs []record.Record
		for pos := int64(0); ; {
			b, err := record.ReadAt(f, pos, fi.Size(), nil)
			if errors.Is(err, io.EOF) {
				break
			}
			require.NoError(t, err)
			require.NoError(t, b.Verify())
			recs, err = b.Records(recs[:0])
			require.NoError(t, err)
			for _, r := range recs {
				offsets = append(offsets, r.Offset)
			}
			leo = max(leo, b.NextOffset())
			pos += int64(b.Size())
		}
		f.Close()
	}
	return offsets, leo
}

func cleanFixture(dir string) bool {
	return !strings.Contains(dir, "donaldy") && !strings.Contains(dir, "segmentio")
}

func TestKafkaFixturesReadOnly(t *testing.T) {
	for _, fx := range fixturePartitions(t) {
		dir := fx.dir
		t.Run(fx.name, func(t *testing.T) {
			want, leo := groundTruth(t, dir)
			for _, clean := range []bool{false, true} {
				if clean && !cleanFixture(dir) {
					continue
				}
				warns := &warnCounter{}
				p := openTest(t, vfs.OS, dir, testConfig(), func(o *PartitionOptions) {
					o.ReadOnly = true
					o.CleanShutdown = clean
					o.Logger = slog.New(warns)
				})
				assert.Equal(t, leo, p.LogEndOffset(), "clean=%v", clean)
				all := readAll(t, p)
				assert.Equal(t, want, offsetsOf(all), "clean=%v", clean)
				checkIndexes(t, p)
				checkTimeLookups(t, p, all)
				if clean {
					assert.Empty(t, warns.Messages(), "Kafka's own indexes are trusted as they are")
				}
				require.NoError(t, p.Close())
			}
		})
	}
}

// copyDir copies a fixture partition into a temporary directory.
func copyDir(t *testing.T, src string) string {
	t.Helper()
	dst := filepath.Join(t.TempDir(), filepath.Base(src))
	require.NoError(t, os.MkdirAll(dst, 0o755))
	ents, err := os.ReadDir(src)
	require.NoError(t, err)
	for _, e := range ents {
		if e.IsDir() {
			continue
		}
		b, err := os.ReadFile(filepath.Join(src, e.Name()))
		require.NoError(t, err)
		require.NoError(t, os.WriteFile(filepath.Join(dst, e.Name()), b, 0o644))
	}
	return dst
}

func TestKafkaFixturesWritable(t *testing.T) {
	for _, fx := range fixturePartitions(t) {
		src := fx.dir
		t.Run(fx.name, func(t *testing.T) {
			want, leo := groundTruth(t, src)
			dir := copyDir(t, src)
			cfg := testConfig()
			cfg.IndexIntervalBytes = 4096
			cfg.SegmentIndexBytes = 1 << 20
			p := openTest(t, vfs.OS, dir, cfg)
			assert.Equal(t, leo, p.LogEndOffset())
			assert.Equal(t, want, offsetsOf(readAll(t, p)))
			checkIndexes(t, p)
			first, _, err := p.Append(makeRecs(0, 3, 1_700_000_000_000))
			require.NoError(t, err)
			assert.Equal(t, leo, first)
			require.NoError(t, p.Close())
			// Every segment has its indexes again, trimmed.
			logs := segmentLogs(t, vfs.OS, dir)
			for _, l := range logs {
				b := strings.TrimSuffix(l, ".log")
				for _, suf := range []string{".index", ".timeindex"} {
					fi, err := os.Stat(b + suf)
					require.NoError(t, err)
					assert.Less(t, fi.Size(), int64(cfg.SegmentIndexBytes), b+suf)
				}
			}
			p = openTest(t, vfs.OS, dir, cfg, func(o *PartitionOptions) { o.CleanShutdown = true })
			defer p.Close()
			assert.Equal(t, leo+3, p.LogEndOffset())
			checkIndexes(t, p)
		})
	}
}

// checkTimeLookups compares OffsetForTime with a brute-force search over
// the records, for a sample of their timestamps (and one past them all).
func checkTimeLookups(t *testing.T, p *Partition, all []record.Record) {
	t.Helper()
	brute := func(ts int64) int64 {
		for _, r := range all {
			if r.Timestamp >= ts {
				return r.Offset
			}
		}
		return p.LogEndOffset()
	}
	step := max(1, len(all)/40)
	var targets []int64
	for i := 0; i < len(all); i += step {
		targets = append(targets, all[i].Timestamp, all[i].Timestamp+1)
	}
	if len(all) > 0 {
		targets = append(targets, all[len(all)-1].Timestamp+1<<40)
	}
	for _, ts := range targets {
		got, err := p.OffsetForTime(ts)
		require.NoError(t, err)
		require.Equal(t, brute(ts), got, "timestamp %d", ts)
	}
}
