package engine

import (
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/topicfs/topicfs/internal/testutil"

	"github.com/topicfs/topicfs/engine/record"
	"github.com/topicfs/topicfs/engine/vfs"
)

// ldFS runs a test against MemFS and the real file system.
type ldFS struct {
	name string
	new  func(t *testing.T) (vfs.FS, string)
}

var ldFSes = []ldFS{
	{"mem", func(t *testing.T) (vfs.FS, string) { return vfs.NewMem(), "/data" }},
	{"os", func(t *testing.T) (vfs.FS, string) { return vfs.OS, filepath.Join(t.TempDir(), "data") }},
}

func ldOpts() LogDirOptions {
	return LogDirOptions{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}
}

// posixLock takes a classic POSIX fcntl write lock, as Java's
// FileChannel.tryLock (and so a Kafka broker) does.
func ldPosixLock(f *os.File) error {
	lk := unix.Flock_t{Type: unix.F_WRLCK, Whence: io.SeekStart}
	return unix.FcntlFlock(f.Fd(), unix.F_SETLK, &lk)
}

func ldNames(ts []*Topic) []string {
	var out []string
	for _, t := range ts {
		out = append(out, t.Name())
	}
	return out
}

func ldListDir(t *testing.T, fsys vfs.FS, dir string) []string {
	t.Helper()
	es, err := fsys.ReadDir(dir)
	require.NoError(t, err)
	var out []string
	for _, e := range es {
		out = append(out, e.Name())
	}
	return out
}

func ldExists(fsys vfs.FS, path string) bool {
	_, err := fsys.Stat(path)
	return err == nil
}

func TestValidTopicName(t *testing.T) {
	tests := []struct {
		name string
		ok   bool
	}{
		{"orders", true},
		{"a", true},
		{"my.topic_v2-final", true},
		{"__consumer_offsets", true},
		{strings.Repeat("x", 249), true},
		{strings.Repeat("x", 250), false},
		{"", false},
		{".", false},
		{"..", false},
		{"...", true},
		{"with space", false},
		{"slash/name", false},
		{"ümlaut", false},
		{"colon:x", false},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprintf("%.20q", tt.name), func(t *testing.T) {
			err := ValidTopicName(tt.name)
			if tt.ok {
				assert.NoError(t, err)
			} else {
				assert.ErrorIs(t, err, ErrInvalidTopic)
			}
		})
	}
}

func TestParsePartitionDir(t *testing.T) {
	tests := []struct {
		dir   string
		topic string
		part  int
		ok    bool
	}{
		{"orders-0", "orders", 0, true},
		{"my-topic-12", "my-topic", 12, true},
		{"__consumer_offsets-49", "__consumer_offsets", 49, true},
		{"_confluent-controlcenter-7-6-0-1-KSTREAM-OUTEROTHER-0000000106-store-changelog-0", "_confluent-controlcenter-7-6-0-1-KSTREAM-OUTEROTHER-0000000106-store-changelog", 0, true},
		{"__cluster_metadata-0", "__cluster_metadata", 0, false},
		{"orders-0.0123456789abcdef0123456789abcdef-delete", "", 0, false},
		{"orders-0.0123456789abcdef0123456789abcdef-future", "", 0, false},
		{"orders-0.0123456789abcdef0123456789abcdef-stray", "", 0, false},
		{"orders", "", 0, false},
		{"orders-", "", 0, false},
		{"-0", "", 0, false},
		{"orders-x", "", 0, false},
		{"orders-01", "", 0, false},
		{"orders--1", "orders-", 1, true},
		{"lost+found", "", 0, false},
	}
	for _, tt := range tests {
		t.Run(tt.dir, func(t *testing.T) {
			tp, ok := ParsePartitionDir(tt.dir)
			assert.Equal(t, tt.ok, ok)
			if tt.ok {
				assert.Equal(t, TopicPartition{Topic: tt.topic, Partition: tt.part}, tp)
			}
		})
	}
}

func TestLogDirCreateDeleteReopen(t *testing.T) {
	for _, fx := range ldFSes {
		t.Run(fx.name, func(t *testing.T) {
			fsys, path := fx.new(t)
			d, err := OpenLogDir(fsys, path, ldOpts())
			require.NoError(t, err)
			assert.Empty(t, d.Topics())

			orders, err := d.CreateTopic("orders", 3)
			require.NoError(t, err)
			assert.Equal(t, "orders", orders.Name())
			require.Len(t, orders.Partitions(), 3)
			for i, p := range orders.Partitions() {
				assert.Equal(t, i, p.ID())
				assert.Equal(t, "orders", p.Topic())
				assert.Equal(t, filepath.Join(path, fmt.Sprintf("orders-%d", i)), p.Dir())
			}
			_, err = d.CreateTopic("audit.log", 1)
			require.NoError(t, err)
			_, err = d.CreateTopic("gone", 2)
			require.NoError(t, err)

			_, err = d.CreateTopic("orders", 1)
			assert.ErrorIs(t, err, ErrTopicExists)
			_, err = d.CreateTopic("bad name", 1)
			assert.ErrorIs(t, err, ErrInvalidTopic)
			_, err = d.CreateTopic(MetadataTopic, 1)
			assert.ErrorIs(t, err, ErrInvalidTopic)
			_, err = d.CreateTopic("negative", -1)
			assert.ErrorIs(t, err, ErrInvalidConfig)

			assert.Equal(t, []string{"audit.log", "gone", "orders"}, ldNames(d.Topics()))
			assert.Len(t, d.Partitions(), 6)

			p1, err := orders.Partition(1)
			require.NoError(t, err)
			first, last, err := p1.Append([]record.Record{{Timestamp: -1, Value: []byte("a")}, {Timestamp: -1, Value: []byte("b")}})
			require.NoError(t, err)
			assert.Equal(t, int64(0), first)
			assert.Equal(t, int64(1), last)
			_, err = orders.Partition(3)
			assert.ErrorIs(t, err, ErrUnknownPartition)

			require.NoError(t, d.DeleteTopic("gone"))
			assert.ErrorIs(t, d.DeleteTopic("gone"), ErrUnknownTopic)
			_, err = d.Topic("gone")
			assert.ErrorIs(t, err, ErrUnknownTopic)
			assert.Equal(t, []string{"audit.log", "orders"}, ldNames(d.Topics()))

			require.NoError(t, orders.AddPartitions(5))
			assert.Len(t, orders.Partitions(), 5)
			assert.ErrorIs(t, orders.AddPartitions(5), ErrInvalidConfig)

			require.NoError(t, d.Close())
			require.NoError(t, d.Close(), "Close is idempotent")
			_, err = d.CreateTopic("late", 1)
			assert.ErrorIs(t, err, ErrClosed)

			assert.True(t, ldExists(fsys, filepath.Join(path, CleanShutdownFile)))

			d, err = OpenLogDir(fsys, path, ldOpts())
			require.NoError(t, err)
			defer d.Close()
			assert.False(t, ldExists(fsys, filepath.Join(path, CleanShutdownFile)), "marker removed while open")
			// The deleted topic's -delete directories wait for
			// file.delete.delay.ms (TestRemountFinishesPendingDeletions).
			assert.Len(t, d.PendingTopicDeletions(), 2, "found again at the open")
			assert.Equal(t, []string{"audit.log", "orders"}, ldNames(d.Topics()))
			orders, err = d.Topic("orders")
			require.NoError(t, err)
			assert.Len(t, orders.Partitions(), 5)
			p1, err = orders.Partition(1)
			require.NoError(t, err)
			assert.Equal(t, int64(2), p1.LogEndOffset())

			// A topic can be re-created under a deleted name.
			again, err := d.CreateTopic("gone", 1)
			require.NoError(t, err)
			assert.Len(t, again.Partitions(), 1)
		})
	}
}

func TestLogDirPersistedConfig(t *testing.T) {
	for _, fx := range ldFSes {
		t.Run(fx.name, func(t *testing.T) {
			fsys, path := fx.new(t)
			opts := ldOpts()
			opts.Overrides = map[string]map[string]string{"orders": {"retention.ms": "1000", "segment.bytes": "4096"}}
			d, err := OpenLogDir(fsys, path, opts)
			require.NoError(t, err)
			orders, err := d.CreateTopic("orders", 2)
			require.NoError(t, err)
			other, err := d.CreateTopic("other", 1)
			require.NoError(t, err)
			assert.Equal(t, int64(1000), orders.Config().RetentionMs)
			assert.Equal(t, int64(4096), orders.Config().SegmentBytes)
			assert.Equal(t, DefaultConfig().RetentionMs, other.Config().RetentionMs)

			// All or nothing: one bad setting rejects the whole change.
			err = orders.AlterConfig(map[string]string{"retention.ms": "2000", "segment.bytes": "not-a-number"})
			assert.ErrorIs(t, err, ErrInvalidConfig)
			assert.Equal(t, int64(1000), orders.Config().RetentionMs)
			assert.False(t, ldExists(fsys, filepath.Join(path, TopicsConfigFile)))
			// Mount-wide settings are not topic settings.
			assert.ErrorIs(t, orders.AlterConfig(map[string]string{"log.cleaner.threads": "4"}), ErrInvalidConfig)

			require.NoError(t, orders.AlterConfig(map[string]string{"retention.ms": "2000", "cleanup.policy": "compact"}))
			assert.Equal(t, int64(2000), orders.Config().RetentionMs)
			assert.Equal(t, "compact", orders.Config().CleanupPolicy)
			assert.Equal(t, int64(4096), orders.Config().SegmentBytes, "options override kept")
			for _, p := range orders.Partitions() {
				assert.Equal(t, orders.Config(), p.Config(), "applied to partition %d", p.ID())
			}
			assert.True(t, ldExists(fsys, filepath.Join(path, TopicsConfigFile)))
			// Values are persisted as they read back, spaces trimmed.
			require.NoError(t, orders.AlterConfig(map[string]string{"segment.bytes": " 4096", "min.cleanable.dirty.ratio": "-0"}))
			saved, err := vfs.ReadFile(fsys, filepath.Join(path, TopicsConfigFile))
			require.NoError(t, err)
			assert.Contains(t, string(saved), `"segment.bytes": "4096"`)
			assert.Contains(t, string(saved), `"min.cleanable.dirty.ratio": "0"`)
			require.NoError(t, d.Close())

			d, err = OpenLogDir(fsys, path, opts)
			require.NoError(t, err)
			orders, err = d.Topic("orders")
			require.NoError(t, err)
			assert.Equal(t, int64(2000), orders.Config().RetentionMs, "persisted override beats mount.toml")
			assert.Equal(t, "compact", orders.Config().CleanupPolicy)
			assert.Equal(t, int64(4096), orders.Config().SegmentBytes)
			for _, p := range orders.Partitions() {
				assert.Equal(t, orders.Config(), p.Config())
			}

			// Deleting the topic forgets its persisted settings.
			require.NoError(t, d.DeleteTopic("orders"))
			orders, err = d.CreateTopic("orders", 1)
			require.NoError(t, err)
			assert.Equal(t, int64(1000), orders.Config().RetentionMs)
			assert.Equal(t, DefaultConfig().CleanupPolicy, orders.Config().CleanupPolicy)
			require.NoError(t, d.Close())
		})
	}
}

func TestLogDirInvalidOverrides(t *testing.T) {
	opts := ldOpts()
	opts.Overrides = map[string]map[string]string{"orders": {"retention.ms": "soon"}}
	_, err := OpenLogDir(vfs.NewMem(), "/data", opts)
	assert.ErrorIs(t, err, ErrInvalidConfig)
	opts.Overrides = map[string]map[string]string{"orders": {"log.cleaner.threads": "2"}}
	_, err = OpenLogDir(vfs.NewMem(), "/data", opts)
	assert.ErrorIs(t, err, ErrInvalidConfig)
}

func TestLogDirCheckpointRoundTrip(t *testing.T) {
	for _, fx := range ldFSes {
		t.Run(fx.name, func(t *testing.T) {
			fsys, path := fx.new(t)
			d, err := OpenLogDir(fsys, path, ldOpts())
			require.NoError(t, err)
			tp, err := d.CreateTopic("t", 2)
			require.NoError(t, err)
			p0, err := tp.Partition(0)
			require.NoError(t, err)
			for i := range 5 {
				_, _, err := p0.Append([]record.Record{{Timestamp: -1, Value: []byte{byte('a' + i)}}})
				require.NoError(t, err)
			}
			require.NoError(t, p0.Flush())
			p0.SetFirstDirtyOffset(3)

			require.NoError(t, d.Checkpoint())
			rp, err := ReadCheckpoint(fsys, filepath.Join(path, RecoveryPointCheckpointFile))
			require.NoError(t, err)
			assert.Equal(t, map[TopicPartition]int64{{"t", 0}: 5, {"t", 1}: 0}, rp)
			ls, err := ReadCheckpoint(fsys, filepath.Join(path, LogStartOffsetCheckpointFile))
			require.NoError(t, err)
			assert.Equal(t, map[TopicPartition]int64{{"t", 0}: 0, {"t", 1}: 0}, ls)
			cl, err := ReadCheckpoint(fsys, filepath.Join(path, CleanerOffsetCheckpointFile))
			require.NoError(t, err)
			assert.Equal(t, map[TopicPartition]int64{{"t", 0}: 3}, cl)
			require.NoError(t, d.Close())

			d, err = OpenLogDir(fsys, path, ldOpts())
			require.NoError(t, err)
			defer d.Close()
			tp, err = d.Topic("t")
			require.NoError(t, err)
			p0, err = tp.Partition(0)
			require.NoError(t, err)
			assert.Equal(t, int64(5), p0.LogEndOffset())
			assert.Equal(t, int64(5), p0.RecoveryPoint())
			assert.Equal(t, int64(3), p0.FirstDirtyOffset(), "cleaner checkpoint passed back to the partition")
		})
	}
}

func TestLogDirLock(t *testing.T) {
	for _, fx := range ldFSes {
		t.Run(fx.name, func(t *testing.T) {
			fsys, path := fx.new(t)
			d, err := OpenLogDir(fsys, path, ldOpts())
			require.NoError(t, err)
			_, err = d.CreateTopic("t", 1)
			require.NoError(t, err)

			_, err = OpenLogDir(fsys, path, ldOpts())
			require.ErrorIs(t, err, ErrLocked)
			assert.Contains(t, err.Error(), LockFile)

			// Read-only takes no lock and sees the topic.
			ro := ldOpts()
			ro.ReadOnly = true
			r, err := OpenLogDir(fsys, path, ro)
			require.NoError(t, err)
			assert.Equal(t, []string{"t"}, ldNames(r.Topics()))
			require.NoError(t, r.Close())

			require.NoError(t, d.Close())
			d2, err := OpenLogDir(fsys, path, ldOpts())
			require.NoError(t, err, "lock released by Close")
			require.NoError(t, d2.Close())
		})
	}
}

// TestLogDirLockOtherProcess checks the lock is a real file lock: a child
// process (this test binary) holding .lock makes OpenLogDir fail.
func TestLogDirLockFcntl(t *testing.T) {
	// A POSIX fcntl lock as Java's FileChannel.tryLock takes it, from the
	// same process: OFD locks conflict with it, classic POSIX locks of the
	// same process do not conflict with each other, so we take a classic lock
	// here and expect the OFD lock in OpenLogDir to fail.
	path := t.TempDir()
	f, err := os.OpenFile(filepath.Join(path, LockFile), os.O_RDWR|os.O_CREATE, 0o644)
	require.NoError(t, err)
	defer f.Close()
	require.NoError(t, ldPosixLock(f))
	_, err = OpenLogDir(vfs.OS, path, ldOpts())
	require.ErrorIs(t, err, ErrLocked)
}

func TestLogDirSkipsNonPartitionDirs(t *testing.T) {
	for _, fx := range ldFSes {
		t.Run(fx.name, func(t *testing.T) {
			fsys, path := fx.new(t)
			for _, dir := range []string{
				"real-0", "real-1",
				MetadataTopic + "-0",
				"old-0.0123456789abcdef0123456789abcdef-delete",
				"moving-0.0123456789abcdef0123456789abcdef-future",
				"stray-0.0123456789abcdef0123456789abcdef-stray",
				"lost+found", "notapartition", "x-01",
			} {
				require.NoError(t, fsys.MkdirAll(filepath.Join(path, dir), 0o755))
			}
			for _, file := range []string{"meta.properties", "bootstrap.checkpoint", "replication-offset-checkpoint", "file-0"} {
				f, err := fsys.OpenFile(filepath.Join(path, file), os.O_CREATE|os.O_WRONLY, 0o644)
				require.NoError(t, err)
				require.NoError(t, f.Close())
			}
			d, err := OpenLogDir(fsys, path, ldOpts())
			require.NoError(t, err)
			assert.Equal(t, []string{"real"}, ldNames(d.Topics()))
			_, err = d.Topic(MetadataTopic)
			assert.ErrorIs(t, err, ErrUnknownTopic)
			assert.Equal(t, []string{"old-0.0123456789abcdef0123456789abcdef-delete"}, d.PendingTopicDeletions())
			assert.Equal(t, 1, d.RemoveDeletedTopics(time.Now().Add(61*time.Second)), "removed file.delete.delay.ms after the open")
			require.NoError(t, d.Close())

			left := ldListDir(t, fsys, path)
			assert.NotContains(t, left, "old-0.0123456789abcdef0123456789abcdef-delete", "leftover -delete dir removed")
			assert.Contains(t, left, "moving-0.0123456789abcdef0123456789abcdef-future", "-future dirs left alone")
			assert.Contains(t, left, MetadataTopic+"-0")
		})
	}
}

func TestLogDirReadOnlyWritesNothing(t *testing.T) {
	path := t.TempDir()
	d, err := OpenLogDir(vfs.OS, path, ldOpts())
	require.NoError(t, err)
	tp, err := d.CreateTopic("t", 1)
	require.NoError(t, err)
	p, err := tp.Partition(0)
	require.NoError(t, err)
	_, _, err = p.Append([]record.Record{{Timestamp: -1, Value: []byte("v")}})
	require.NoError(t, err)
	require.NoError(t, tp.AlterConfig(map[string]string{"retention.ms": "5000"}))
	// Simulate a crash: no Close, so no clean-shutdown marker; release the lock only.
	require.NoError(t, p.Flush())
	require.NoError(t, d.unlock.Close())

	before := testutil.TreeState(t, path)
	ro := ldOpts()
	ro.ReadOnly = true
	r, err := OpenLogDir(vfs.OS, path, ro)
	require.NoError(t, err)
	rt, err := r.Topic("t")
	require.NoError(t, err)
	assert.Equal(t, int64(5000), rt.Config().RetentionMs)
	_, err = r.CreateTopic("n", 1)
	assert.ErrorIs(t, err, ErrReadOnly)
	assert.ErrorIs(t, r.DeleteTopic("t"), ErrReadOnly)
	assert.ErrorIs(t, rt.AlterConfig(map[string]string{"retention.ms": "1"}), ErrReadOnly)
	assert.ErrorIs(t, rt.AddPartitions(2), ErrReadOnly)
	require.NoError(t, r.Checkpoint())
	require.NoError(t, r.Close())
	assert.Equal(t, before, testutil.TreeState(t, path))
}

func TestLogDirCleanShutdownMarkers(t *testing.T) {
	fsys := vfs.NewMem()
	require.NoError(t, fsys.MkdirAll("/data/t-0", 0o755))
	f, err := fsys.OpenFile("/data/"+KafkaCleanShutdownFile, os.O_CREATE|os.O_WRONLY, 0o644)
	require.NoError(t, err)
	require.NoError(t, f.Close())
	for _, dir := range []string{"/", "/data", "/data/t-0"} {
		require.NoError(t, fsys.SyncDir(dir))
	}

	d, err := OpenLogDir(fsys, "/data", ldOpts())
	require.NoError(t, err)
	assert.False(t, ldExists(fsys, "/data/"+KafkaCleanShutdownFile), "Kafka's marker is consumed as Kafka does at startup")
	assert.False(t, ldExists(fsys, "/data/"+CleanShutdownFile))
	require.NoError(t, d.Close())
	assert.True(t, ldExists(fsys, "/data/"+CleanShutdownFile))

	// The marker is durable: a crash right after Close keeps it.
	crashed := fsys.Crash()
	assert.True(t, ldExists(crashed, "/data/"+CleanShutdownFile))
}

func TestLogDirConcurrentAdminAndLookups(t *testing.T) {
	d, err := OpenLogDir(vfs.NewMem(), "/data", ldOpts())
	require.NoError(t, err)
	defer d.Close()
	var wg sync.WaitGroup
	stop := make(chan struct{})
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				for _, tp := range d.Topics() {
					_ = tp.Partitions()
					_ = tp.Config()
				}
				_ = d.Partitions()
			}
		}()
	}
	for i := range 20 {
		name := fmt.Sprintf("t%d", i%5)
		if _, err := d.CreateTopic(name, 2); err != nil {
			require.ErrorIs(t, err, ErrTopicExists)
			require.NoError(t, d.DeleteTopic(name))
			continue
		}
		tp, err := d.Topic(name)
		require.NoError(t, err)
		require.NoError(t, tp.AlterConfig(map[string]string{"retention.ms": fmt.Sprint(1000 + i)}))
	}
	close(stop)
	wg.Wait()
}

func TestDeleteDirName(t *testing.T) {
	n := deleteDirName("orders", 3)
	assert.Regexp(t, `^orders-3\.[0-9a-f]{32}-delete$`, n)
	assert.True(t, specialDirRe.MatchString(n))
	long := deleteDirName(strings.Repeat("x", 249), 12345)
	assert.Len(t, long, 255)
	assert.True(t, specialDirRe.MatchString(long))
	_, ok := ParsePartitionDir(n)
	assert.False(t, ok)
	assert.NotEqual(t, n, deleteDirName("orders", 3), "unique")
}

// TestLogDirCrashAtEveryOp runs create/append/alter/delete/close on MemFS,
// crashes at every mutating file operation in turn, reopens what the crash
// model keeps (synced bytes and synced directory entries), and checks that
// everything acknowledged before the crash survived and nothing is half done.
func TestLogDirCrashAtEveryOp(t *testing.T) {
	base := vfs.NewMem()
	d, err := OpenLogDir(base, "/data", ldOpts())
	require.NoError(t, err)
	b, err := d.CreateTopic("b", 2)
	require.NoError(t, err)
	bp, err := b.Partition(1)
	require.NoError(t, err)
	_, _, err = bp.Append([]record.Record{{Timestamp: 1, Value: []byte("x")}, {Timestamp: 2, Value: []byte("y")}})
	require.NoError(t, err)
	require.NoError(t, d.Close())
	defRetention := DefaultConfig().RetentionMs

	type acks struct{ opened, created, flushed, altered, deleted, closed bool }
	scenario := func(fsys vfs.FS) (a acks) {
		d, err := OpenLogDir(fsys, "/data", ldOpts())
		if err != nil {
			return a
		}
		a.opened = true
		defer func() {
			if !a.closed {
				_ = d.Close()
			}
		}()
		tp, err := d.CreateTopic("a", 2)
		if err != nil {
			return a
		}
		a.created = true
		p, err := tp.Partition(0)
		if err != nil {
			return a
		}
		if _, _, err := p.Append([]record.Record{{Timestamp: 5, Value: []byte("1")}, {Timestamp: 6, Value: []byte("2")}, {Timestamp: 7, Value: []byte("3")}}); err != nil {
			return a
		}
		if p.Flush() != nil {
			return a
		}
		a.flushed = true
		if tp.AlterConfig(map[string]string{"retention.ms": "1234"}) != nil {
			return a
		}
		a.altered = true
		if d.DeleteTopic("b") != nil {
			return a
		}
		a.deleted = true
		a.closed = d.Close() == nil
		return a
	}

	for n := int64(0); ; n++ {
		mem := base.Crash()
		inj := vfs.CrashAt(n)
		a := scenario(vfs.NewErrorFS(mem, inj))
		img := mem.Crash()
		d, err := OpenLogDir(img, "/data", ldOpts())
		require.NoError(t, err, "reopen after a crash at op %d", n)
		names := ldNames(d.Topics())
		if tp, err := d.Topic("a"); err == nil {
			assert.Len(t, tp.Partitions(), 2, "op %d: topic a is whole", n)
			p, err := tp.Partition(0)
			require.NoError(t, err)
			assert.Contains(t, []int64{0, 3}, p.LogEndOffset(), "op %d: the append is all or nothing", n)
			if a.flushed {
				assert.EqualValues(t, 3, p.LogEndOffset(), "op %d: a flushed append survives", n)
			}
			assert.Contains(t, []int64{defRetention, 1234}, tp.Config().RetentionMs, "op %d", n)
			if a.altered {
				assert.EqualValues(t, 1234, tp.Config().RetentionMs, "op %d: an acknowledged config change survives", n)
			}
		} else {
			assert.False(t, a.created, "op %d: an acknowledged topic survives (topics %v)", n, names)
		}
		if tp, err := d.Topic("b"); err == nil {
			assert.False(t, a.deleted, "op %d: an acknowledged delete is not undone", n)
			assert.Len(t, tp.Partitions(), 2, "op %d: topic b is whole", n)
			p, err := tp.Partition(1)
			require.NoError(t, err)
			assert.EqualValues(t, 2, p.LogEndOffset(), "op %d", n)
		} else {
			assert.True(t, a.deleted || !ldExists(img, "/data/b-0"), "op %d", n)
		}
		require.NoError(t, d.Close())
		if !inj.Crashed() {
			assert.True(t, a.closed)
			assert.Equal(t, []string{"a"}, names)
			t.Logf("crashed at each of %d mutating operations", n)
			break
		}
		require.Less(t, n, int64(2000), "the scenario should finish")
	}
}

// TestLogDirCreateTopicConfiguredCount: CreateTopic(name, 0) takes the
// topic's effective num.partitions (defaults, then [topics.NAME]).
func TestLogDirCreateTopicConfiguredCount(t *testing.T) {
	for _, fx := range ldFSes {
		t.Run(fx.name, func(t *testing.T) {
			fsys, path := fx.new(t)
			opts := ldOpts()
			opts.Defaults = DefaultConfig()
			opts.Defaults.NumPartitions = 2
			opts.Overrides = map[string]map[string]string{"three": {"num.partitions": "3"}}
			d, err := OpenLogDir(fsys, path, opts)
			require.NoError(t, err)
			three, err := d.CreateTopic("three", 0)
			require.NoError(t, err)
			assert.Len(t, three.Partitions(), 3)
			two, err := d.CreateTopic("plain", 0)
			require.NoError(t, err)
			assert.Len(t, two.Partitions(), 2)
			one, err := d.CreateTopic("explicit", 1)
			require.NoError(t, err)
			assert.Len(t, one.Partitions(), 1, "an explicit count wins")
			assert.False(t, ldExists(fsys, filepath.Join(path, CreatingTopicFile)), "the marker is gone")
			require.NoError(t, d.Close())

			d, err = OpenLogDir(fsys, path, opts)
			require.NoError(t, err)
			defer d.Close()
			for name, n := range map[string]int{"three": 3, "plain": 2, "explicit": 1} {
				tp, err := d.Topic(name)
				require.NoError(t, err)
				assert.Len(t, tp.Partitions(), n, name)
			}
		})
	}
}

// TestLogDirCreateTopicCrashAtEveryOp crashes at every mutating operation of
// CreateTopic(name, 0) and reopens the durable image: the topic is either
// absent (and no directory of it is left) or present with all 3 partitions,
// and it is present whenever CreateTopic returned success.
func TestLogDirCreateTopicCrashAtEveryOp(t *testing.T) {
	opts := ldOpts()
	opts.CheckpointInterval = -1
	opts.Overrides = map[string]map[string]string{"t": {"num.partitions": "3"}}
	base := vfs.NewMem()
	d, err := OpenLogDir(base, "/data", opts)
	require.NoError(t, err)
	require.NoError(t, d.Close())

	sawRollForward := false
	for n := int64(0); ; n++ {
		mem := base.Crash()
		inj := vfs.CrashAt(n)
		efs := vfs.NewErrorFS(mem, inj)
		created := false
		if d, err := OpenLogDir(efs, "/data", opts); err == nil {
			_, err := d.CreateTopic("t", 0)
			created = err == nil
			if !inj.Crashed() {
				require.NoError(t, err)
			}
			if cerr := d.Close(); !inj.Crashed() {
				require.NoError(t, cerr)
			}
		}
		img := mem.Crash()
		markerLeft := ldExists(img, "/data/"+CreatingTopicFile)
		d, err := OpenLogDir(img, "/data", opts)
		require.NoError(t, err, "reopen after a crash at op %d", n)
		tp, terr := d.Topic("t")
		if terr == nil {
			assert.Len(t, tp.Partitions(), 3, "op %d: the topic is whole", n)
			if !created {
				sawRollForward = sawRollForward || markerLeft
			}
		} else {
			assert.False(t, created, "op %d: an acknowledged topic survives", n)
			for _, name := range ldListDir(t, img, "/data") {
				assert.False(t, strings.HasPrefix(name, "t-"), "op %d: no partial topic: %s", n, name)
			}
		}
		assert.False(t, ldExists(img, "/data/"+CreatingTopicFile), "op %d: reopen removed the marker", n)
		require.NoError(t, d.Close())
		if !inj.Crashed() {
			require.True(t, created)
			t.Logf("crashed at each of %d mutating operations", n)
			break
		}
		require.Less(t, n, int64(500), "the scenario should finish")
	}
	assert.True(t, sawRollForward, "some crash point rolled an unacknowledged creation forward")

	t.Run("a marker left by a crash completes the topic on reopen", func(t *testing.T) {
		mem := vfs.NewMem()
		d, err := OpenLogDir(mem, "/data", opts)
		require.NoError(t, err)
		require.NoError(t, d.Close())
		// The state a crash after step 2 on a file system that kept only
		// some of the new directory entries would leave.
		require.NoError(t, vfs.WriteFileAtomic(mem, "/data/"+CreatingTopicFile, []byte("t 3\n"), 0o644))
		require.NoError(t, mem.MkdirAll("/data/t-1", 0o755))
		require.NoError(t, mem.SyncDir("/data"))

		ro := opts
		ro.ReadOnly = true
		d, err = OpenLogDir(mem, "/data", ro)
		require.NoError(t, err)
		assert.True(t, ldExists(mem, "/data/"+CreatingTopicFile), "read-only writes nothing")
		require.NoError(t, d.Close())

		d, err = OpenLogDir(mem, "/data", opts)
		require.NoError(t, err)
		tp, err := d.Topic("t")
		require.NoError(t, err)
		assert.Len(t, tp.Partitions(), 3)
		require.NoError(t, d.Close())
		img := mem.Crash()
		assert.False(t, ldExists(img, "/data/"+CreatingTopicFile), "the removal is durable")
		assert.True(t, ldExists(img, "/data/t-2"), "the completion is durable")
	})
	t.Run("an unreadable marker is removed", func(t *testing.T) {
		mem := vfs.NewMem()
		require.NoError(t, mem.MkdirAll("/data", 0o755))
		require.NoError(t, vfs.WriteFileAtomic(mem, "/data/"+CreatingTopicFile, []byte("bad name x\n"), 0o644))
		d, err := OpenLogDir(mem, "/data", opts)
		require.NoError(t, err)
		assert.Empty(t, d.Topics())
		assert.False(t, ldExists(mem, "/data/"+CreatingTopicFile))
		require.NoError(t, d.Close())
	})
}

func TestLogDirFaults(t *testing.T) {
	t.Run("persisting a config change fails", func(t *testing.T) {
		mem := vfs.NewMem()
		efs := vfs.NewErrorFS(mem, vfs.FailOnPath(TopicsConfigFile+".tmp", vfs.OpAny, syscall.ENOSPC))
		d, err := OpenLogDir(efs, "/data", ldOpts())
		require.NoError(t, err)
		defer d.Close()
		tp, err := d.CreateTopic("t", 1)
		require.NoError(t, err)
		err = tp.AlterConfig(map[string]string{"retention.ms": "5"})
		require.ErrorIs(t, err, syscall.ENOSPC)
		assert.Equal(t, DefaultConfig().RetentionMs, tp.Config().RetentionMs, "not applied when not persisted")
		p, err := tp.Partition(0)
		require.NoError(t, err)
		assert.Equal(t, DefaultConfig().RetentionMs, p.Config().RetentionMs)
	})
	t.Run("creating a partition fails", func(t *testing.T) {
		mem := vfs.NewMem()
		efs := vfs.NewErrorFS(mem, vfs.FailOnPath("/data/t-2", vfs.OpAny, syscall.EIO))
		d, err := OpenLogDir(efs, "/data", ldOpts())
		require.NoError(t, err)
		defer d.Close()
		_, err = d.CreateTopic("t", 3)
		require.ErrorIs(t, err, syscall.EIO)
		_, err = d.Topic("t")
		assert.ErrorIs(t, err, ErrUnknownTopic)
		for _, n := range ldListDir(t, mem, "/data") {
			assert.False(t, strings.HasPrefix(n, "t-"), "nothing left behind: %s", n)
		}
	})
	t.Run("a failed flush leaves no clean-shutdown marker", func(t *testing.T) {
		mem := vfs.NewMem()
		var fail atomic.Bool
		efs := vfs.NewErrorFS(mem, vfs.InjectorFunc(func(op vfs.Op) *vfs.Fault {
			if fail.Load() && op.Kind == vfs.OpSync && strings.HasSuffix(op.Path, ".log") {
				return &vfs.Fault{Err: syscall.EIO}
			}
			return nil
		}))
		d, err := OpenLogDir(efs, "/data", ldOpts())
		require.NoError(t, err)
		tp, err := d.CreateTopic("t", 1)
		require.NoError(t, err)
		p, err := tp.Partition(0)
		require.NoError(t, err)
		_, _, err = p.Append([]record.Record{{Timestamp: 1, Value: []byte("v")}})
		require.NoError(t, err)
		fail.Store(true)
		require.ErrorIs(t, d.Close(), syscall.EIO)
		assert.False(t, ldExists(mem, "/data/"+CleanShutdownFile), "the next open must recover")
		d2, err := OpenLogDir(mem, "/data", ldOpts())
		require.NoError(t, err, "the lock was released despite the error")
		require.NoError(t, d2.Close())
	})
}

func TestLogDirPeriodicCheckpoint(t *testing.T) {
	mem := vfs.NewMem()
	opts := ldOpts()
	opts.CheckpointInterval = -1 // the test drives the loop
	d, err := OpenLogDir(mem, "/data", opts)
	require.NoError(t, err)
	tick := make(chan time.Time)
	d.startCheckpointLoop(tick, nil)
	tp, err := d.CreateTopic("t", 1)
	require.NoError(t, err)
	p, err := tp.Partition(0)
	require.NoError(t, err)
	_, _, err = p.Append([]record.Record{{Timestamp: 1, Value: []byte("a")}, {Timestamp: 2, Value: []byte("b")}})
	require.NoError(t, err)
	require.NoError(t, p.Flush())
	// The second send on the unbuffered channel returns only after the loop
	// finished handling the first tick.
	tick <- time.Time{}
	tick <- time.Time{}
	rp, err := ReadCheckpoint(mem, "/data/"+RecoveryPointCheckpointFile)
	require.NoError(t, err)
	assert.Equal(t, map[TopicPartition]int64{{Topic: "t", Partition: 0}: 2}, rp)

	// A crash now recovers from the checkpointed recovery point.
	img := mem.Crash()
	require.NoError(t, d.Close())
	d2, err := OpenLogDir(img, "/data", ldOpts())
	require.NoError(t, err)
	p2 := interopPartition(t, d2, "t", 0)
	assert.EqualValues(t, 2, p2.LogEndOffset())
	require.NoError(t, d2.Close())
}

func TestLogDirDefaultCheckpointLoopStops(t *testing.T) {
	d, err := OpenLogDir(vfs.NewMem(), "/data", ldOpts())
	require.NoError(t, err)
	require.NotNil(t, d.stop, "read-write LogDirs checkpoint in the background by default")
	require.NoError(t, d.Close()) // returns: the loop stopped
	ro := ldOpts()
	ro.ReadOnly = true
	mem := vfs.NewMem()
	require.NoError(t, mem.MkdirAll("/data2", 0o755))
	r, err := OpenLogDir(mem, "/data2", ro)
	require.NoError(t, err)
	assert.Nil(t, r.stop, "read-only never writes checkpoints")
	require.NoError(t, r.Close())
}

func ExampleOpenLogDir() {
	fsys := vfs.NewMem() // vfs.OS for a real data directory
	d, err := OpenLogDir(fsys, "/data", LogDirOptions{
		Overrides: map[string]map[string]string{"orders": {"retention.ms": "3600000"}},
		Logger:    slog.New(slog.NewTextHandler(io.Discard, nil)),
	})
	if err != nil {
		panic(err)
	}
	orders, _ := d.CreateTopic("orders", 2)
	p, _ := orders.Partition(1)
	first, last, _ := p.Append([]record.Record{
		{Timestamp: 1700000000000, Key: []byte("k"), Value: []byte("hello")},
		{Timestamp: 1700000000001, Value: []byte("world")},
	})
	_ = orders.AlterConfig(map[string]string{"cleanup.policy": "compact"})
	fmt.Println("appended", first, "to", last)
	for _, t := range d.Topics() {
		fmt.Println(t.Name(), len(t.Partitions()), "partitions", "retention.ms="+fmt.Sprint(t.Config().RetentionMs), t.Config().CleanupPolicy)
	}
	entries, _ := fsys.ReadDir("/data/orders-1")
	for _, e := range entries {
		fmt.Println("orders-1/" + e.Name())
	}
	_ = d.Close()
	// Output:
	// appended 0 to 1
	// orders 2 partitions retention.ms=3600000 compact
	// orders-1/00000000000000000000.index
	// orders-1/00000000000000000000.log
	// orders-1/00000000000000000000.timeindex
	// orders-1/leader-epoch-checkpoint
	// orders-1/partition.metadata
}

func TestLogDirUnreadableTopicsFile(t *testing.T) {
	mem := vfs.NewMem()
	d, err := OpenLogDir(mem, "/data", ldOpts())
	require.NoError(t, err)
	_, err = d.CreateTopic("t", 1)
	require.NoError(t, err)
	require.NoError(t, d.Close())
	require.NoError(t, vfs.WriteFileAtomic(mem, "/data/"+TopicsConfigFile, []byte(`{"version":1,`), 0o644))

	_, err = OpenLogDir(mem, "/data", ldOpts())
	require.ErrorIs(t, err, ErrInvalidConfig, "read-write refuses to run with settings it cannot read")
	assert.Contains(t, err.Error(), TopicsConfigFile)

	ro := ldOpts()
	ro.ReadOnly = true
	r, err := OpenLogDir(mem, "/data", ro)
	require.NoError(t, err, "read-only shows the data with default settings")
	tp, err := r.Topic("t")
	require.NoError(t, err)
	assert.Equal(t, DefaultConfig(), tp.Config())
	require.NoError(t, r.Close())
}
