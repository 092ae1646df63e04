package engine

import (
	"cmp"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"maps"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"github.com/topicfs/topicfs/engine/vfs"
)

// Files in the root of a data directory. The checkpoint names and the lock and
// clean-shutdown names are Kafka's (part of the format); the two topicfs-*
// files are ours and Kafka ignores them.
const (
	// RecoveryPointCheckpointFile maps each partition to the offset below
	// which everything is fsynced (version 0, "topic partition offset" lines).
	RecoveryPointCheckpointFile = "recovery-point-offset-checkpoint"
	// LogStartOffsetCheckpointFile maps each partition to its log start offset.
	LogStartOffsetCheckpointFile = "log-start-offset-checkpoint"
	// CleanerOffsetCheckpointFile maps each compacted partition to its first
	// dirty offset.
	CleanerOffsetCheckpointFile = "cleaner-offset-checkpoint"
	// LockFile is the file Kafka (and topicfs) flock while a data directory is
	// in use.
	LockFile = ".lock"
	// KafkaCleanShutdownFile is the marker a Kafka broker leaves on a clean
	// shutdown (empty before Kafka 3.7, JSON after). Only its presence counts.
	KafkaCleanShutdownFile = ".kafka_cleanshutdown"
	// CleanShutdownFile is topicfs's own clean-shutdown marker.
	CleanShutdownFile = "topicfs-clean-shutdown"
	// TopicsConfigFile persists per-topic config overrides altered at run time.
	TopicsConfigFile = "topicfs-topics.json"
	// CreatingTopicFile records a CreateTopic in progress ("<topic> <n>"),
	// so that the next open completes one a crash interrupted.
	CreatingTopicFile = "topicfs-creating-topic"
	// MetadataTopic is KRaft's metadata log; Kafka loads it separately and it
	// is not shown as a topic.
	MetadataTopic = "__cluster_metadata"
)

// maxTopicNameLen is Kafka's limit (Topic.MAX_NAME_LENGTH): the directory name
// <topic>-<partition> must fit in 255 bytes with room for a partition number.
const maxTopicNameLen = 249

// specialDirRe matches Kafka's renamed partition directories,
// <topic>-<partition>.<uuid>-{delete,future,stray}
// (UnifiedLog.parseTopicPartitionName).
var specialDirRe = regexp.MustCompile(`^(\S+)-(\S+)\.(\S+)-(delete|future|stray)$`)

// LogDirOptions configures OpenLogDir. The zero value means built-in defaults,
// read-write, slog.Default() and time.Now.
type LogDirOptions struct {
	Defaults  Config                       // zero value = DefaultConfig()
	Overrides map[string]map[string]string // [topics.NAME] tables from mount.toml
	ReadOnly  bool                         // take no lock, write nothing, recover in memory
	Logger    *slog.Logger
	Now       func() time.Time
	// CheckpointInterval is how often a read-write LogDir writes the three
	// checkpoint files in the background, as Kafka does every
	// log.flush.offset.checkpoint.interval.ms, so that recovery after a
	// crash starts from a recent recovery point. 0 means 60 s; negative
	// means never (Close still writes them).
	CheckpointInterval time.Duration
}

// DefaultCheckpointInterval is Kafka's log.flush.offset.checkpoint.interval.ms.
const DefaultCheckpointInterval = 60 * time.Second

// LogDir is a data directory: one directory per topic partition, named
// <topic>-<partition>, plus Kafka's checkpoint files in the root.
//
// All methods are safe for concurrent use. Lookups (Topics, Topic, Partitions)
// take a read lock over the topic map only, never held across disk I/O; the
// administrative operations (CreateTopic, DeleteTopic, AlterConfig,
// AddPartitions, Checkpoint, Close) are serialized by a separate mutex that is
// held across their I/O.
type LogDir struct {
	fs       vfs.FS
	path     string
	defaults Config
	over     map[string]map[string]string
	readOnly bool
	log      *slog.Logger
	now      func() time.Time
	unlock   io.Closer // nil when read-only
	indexes  *indexLRU // every partition's sealed segments with open indexes

	// admin serializes administrative operations and the persisted config.
	admin sync.Mutex
	// written is what each root checkpoint file held when this LogDir last
	// wrote it (under admin), so an unchanged one is not written again.
	written   map[string]map[TopicPartition]int64
	persisted map[string]map[string]string // protected by admin

	mu struct {
		sync.RWMutex
		topics map[string]*Topic
		closed bool
	}

	bg sync.WaitGroup // background removal of -delete directories

	// del holds the -delete directories waiting for file.delete.delay.ms.
	del struct {
		sync.Mutex
		pending []pendingDelete
	}

	// The periodic checkpoint goroutine: stopped by closing stop (once).
	stop     chan struct{}
	stopOnce sync.Once
	loop     sync.WaitGroup
}

// OpenLogDir opens the data directory at path, discovering every <topic>-<p>
// directory and opening it with OpenPartition, in parallel.
//
// Read-write (the default) creates path if missing and takes an exclusive
// lock on path/.lock first (ErrLocked if another topicfs or a Kafka broker
// holds it). Partitions recover unless the directory was shut down cleanly
// (topicfs-clean-shutdown or Kafka's .kafka_cleanshutdown present); both
// markers are then removed, so a crash is detected on the next open.
// Leftover <topic>-<p>.<uuid>-delete directories are removed
// file.delete.delay.ms after the open, as a broker does at startup.
//
// ReadOnly takes no lock and writes nothing: partitions recover in memory.
func OpenLogDir(fsys vfs.FS, path string, opts LogDirOptions) (*LogDir, error) {
	d := &LogDir{
		fs:       fsys,
		path:     filepath.Clean(path),
		defaults: opts.Defaults,
		over:     make(map[string]map[string]string, len(opts.Overrides)),
		readOnly: opts.ReadOnly,
		log:      opts.Logger,
		now:      opts.Now,
	}
	if reflect.ValueOf(d.defaults).IsZero() {
		d.defaults = DefaultConfig()
	}
	d.indexes = newIndexLRU(int(d.defaults.IndexMappedMaxSegments))
	if d.log == nil {
		d.log = slog.Default()
	}
	if d.now == nil {
		d.now = time.Now
	}
	d.mu.topics = make(map[string]*Topic)
	for name, kv := range opts.Overrides {
		d.over[name] = maps.Clone(kv) // the caller may reuse its maps
	}
	for name, kv := range d.over {
		if _, err := d.defaults.Apply(kv); err != nil {
			return nil, fmt.Errorf("[topics.%s]: %w", name, err)
		}
		for k := range kv {
			if !IsTopicSetting(k) {
				return nil, fmt.Errorf("%w: [topics.%s]: %s is a mount-wide setting", ErrInvalidConfig, name, k)
			}
		}
	}

	if !d.readOnly {
		if err := vfs.MkdirAllDurable(fsys, d.path, 0o755); err != nil {
			return nil, fmt.Errorf("engine: create data dir: %w", err)
		}
		lk, err := LockDir(fsys, d.path)
		if err != nil {
			return nil, err
		}
		d.unlock = lk
	}
	if err := d.load(); err != nil {
		if d.unlock != nil {
			_ = d.unlock.Close()
		}
		return nil, err
	}
	if !d.readOnly {
		every := opts.CheckpointInterval
		if every == 0 {
			every = DefaultCheckpointInterval
		}
		d.stop = make(chan struct{})
		if every > 0 {
			t := time.NewTicker(every)
			d.startCheckpointLoop(t.C, t.Stop)
		}
		t := time.NewTicker(topicDeleteInterval)
		d.startDeleteLoop(t.C, t.Stop)
	}
	return d, nil
}

// startCheckpointLoop writes the checkpoints at every tick until Close.
func (d *LogDir) startCheckpointLoop(tick <-chan time.Time, stopTicker func()) {
	d.every(tick, stopTicker, func() {
		if err := d.Checkpoint(); err != nil && !errors.Is(err, ErrClosed) {
			d.log.Warn("writing checkpoints", "path", d.path, "err", err)
		}
	})
}

// every runs fn in the background at every tick until Close, then stops
// the ticker (stopTicker, if not nil).
func (d *LogDir) every(tick <-chan time.Time, stopTicker func(), fn func()) {
	if d.stop == nil {
		d.stop = make(chan struct{})
	}
	d.loop.Add(1)
	go func() {
		defer d.loop.Done()
		if stopTicker != nil {
			defer stopTicker()
		}
		for {
			select {
			case <-d.stop:
				return
			case <-tick:
				fn()
			}
		}
	}()
}

// load discovers and opens every partition. On error it closes what it opened.
func (d *LogDir) load() error {
	persisted, err := d.readTopicsFile()
	switch {
	case err != nil && d.readOnly && errors.Is(err, ErrInvalidConfig):
		// Nothing can be fixed read-only: show the data with default settings.
		d.log.Warn("ignoring unreadable topic settings (topicfs check --repair sets the file aside)", "err", err)
		persisted = map[string]map[string]string{}
	case err != nil:
		return err
	}
	d.persisted = persisted
	if err := d.finishCreatingTopic(); err != nil {
		return err
	}

	entries, err := d.fs.ReadDir(d.path)
	if err != nil {
		return fmt.Errorf("engine: read data dir: %w", err)
	}
	scan := d.scanDataDir(entries)
	ckpt := d.readRootCheckpoints()
	cfgs, err := d.topicConfigs(scan.found)
	if err != nil {
		return err
	}
	parts, err := d.openPartitions(scan.found, cfgs, ckpt, scan.clean)
	if err != nil {
		return err
	}
	d.addLoaded(scan.found, parts, cfgs)
	if scan.fresh {
		d.log.Info("opened data dir", "path", d.path, "new", true, "read_only", d.readOnly)
	} else {
		d.log.Info("opened data dir", "path", d.path, "topics", len(d.mu.topics), "partitions", len(scan.found),
			"clean_shutdown", scan.clean, "read_only", d.readOnly)
	}

	if d.readOnly {
		return nil
	}
	if err := d.dropCleanShutdownMarkers(); err != nil {
		d.closePartitions()
		return err
	}
	for _, name := range scan.leftovers {
		d.scheduleDelete(filepath.Join(d.path, name))
	}
	return nil
}

// dataDirScan is what the root listing of a data directory says.
type dataDirScan struct {
	clean     bool             // a clean-shutdown marker is present
	fresh     bool             // nothing but the lock file: no shutdown came before, clean or not
	found     []TopicPartition // the <topic>-<p> directories
	leftovers []string         // <topic>-<p>.<uuid>-delete directories to remove
}

// scanDataDir sorts the root entries of the data directory.
func (d *LogDir) scanDataDir(entries []os.DirEntry) dataDirScan {
	scan := dataDirScan{fresh: true}
	for _, e := range entries {
		name := e.Name()
		if name != LockFile {
			scan.fresh = false
		}
		if !e.IsDir() {
			if name == CleanShutdownFile || name == KafkaCleanShutdownFile {
				scan.clean = true
			}
			continue
		}
		if m := specialDirRe.FindStringSubmatch(name); m != nil {
			if m[4] == "delete" {
				scan.leftovers = append(scan.leftovers, name)
			}
			d.log.Debug("skipping special partition directory", "dir", name)
			continue
		}
		tp, ok := ParsePartitionDir(name)
		if !ok {
			if tp.Topic != MetadataTopic {
				d.log.Debug("skipping non-partition directory", "dir", name)
			}
			continue
		}
		scan.found = append(scan.found, tp)
	}
	return scan
}

// topicConfigs computes one config per topic of found, once each.
func (d *LogDir) topicConfigs(found []TopicPartition) (map[string]Config, error) {
	cfgs := make(map[string]Config)
	for _, tp := range found {
		if _, ok := cfgs[tp.Topic]; !ok {
			c, err := d.topicConfig(tp.Topic)
			if err != nil {
				return nil, err
			}
			cfgs[tp.Topic] = c
		}
	}
	return cfgs, nil
}

// rootCheckpoints are the three checkpoint files of the data directory root.
type rootCheckpoints struct {
	recovery, logStart, cleaner map[TopicPartition]int64
	horizons                    map[TopicPartition]int64 // topicfs-delete-horizons
}

func (d *LogDir) readRootCheckpoints() rootCheckpoints {
	return rootCheckpoints{
		recovery: d.readCheckpoint(RecoveryPointCheckpointFile),
		logStart: d.readCheckpoint(LogStartOffsetCheckpointFile),
		cleaner:  d.readCheckpoint(CleanerOffsetCheckpointFile),
		horizons: d.readCheckpoint(DeleteHorizonsFile),
	}
}

// openPartitions opens the partitions found, up to 8 at a time, with their
// offsets from ckpt. On error it closes those it opened.
func (d *LogDir) openPartitions(found []TopicPartition, cfgs map[string]Config, ckpt rootCheckpoints, clean bool) ([]*Partition, error) {
	parts := make([]*Partition, len(found))
	errs := make([]error, len(found))
	sem := make(chan struct{}, 8)
	var wg sync.WaitGroup
	for i, tp := range found {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer func() { <-sem; wg.Done() }()
			parts[i], errs[i] = OpenPartition(d.fs, d.partitionDir(tp.Topic, tp.Partition), tp.Topic, tp.Partition, PartitionOptions{
				Config:         cfgs[tp.Topic],
				RecoveryPoint:  offsetOr(ckpt.recovery, tp),
				LogStartOffset: offsetOr(ckpt.logStart, tp),
				FirstDirty:     offsetOr(ckpt.cleaner, tp),
				DeleteHorizon:  offsetOr(ckpt.horizons, tp),
				LeaderEpochs:   true,
				CleanShutdown:  clean,
				ReadOnly:       d.readOnly,
				Logger:         d.log,
				Now:            d.now,
				indexes:        d.indexes,
			})
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		for _, p := range parts {
			if p != nil {
				_ = p.Close()
			}
		}
		return nil, fmt.Errorf("engine: open data dir %s: %w", d.path, err)
	}
	return parts, nil
}

// addLoaded puts the opened partitions into their topics, in partition order.
func (d *LogDir) addLoaded(found []TopicPartition, parts []*Partition, cfgs map[string]Config) {
	for i, tp := range found {
		t := d.mu.topics[tp.Topic]
		if t == nil {
			t = &Topic{d: d, name: tp.Topic}
			t.mu.cfg = cfgs[tp.Topic]
			d.mu.topics[tp.Topic] = t
		}
		t.mu.parts = append(t.mu.parts, parts[i])
	}
	for _, t := range d.mu.topics {
		slices.SortFunc(t.mu.parts, func(a, b *Partition) int { return cmp.Compare(a.ID(), b.ID()) })
	}
}

// dropCleanShutdownMarkers removes both clean-shutdown markers, and syncs the
// directory if one was there: from here on a crash must be detected.
func (d *LogDir) dropCleanShutdownMarkers() error {
	removed := false
	for _, m := range []string{CleanShutdownFile, KafkaCleanShutdownFile} {
		err := d.fs.Remove(filepath.Join(d.path, m))
		if err == nil {
			removed = true
		} else if !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("engine: remove clean-shutdown marker: %w", err)
		}
	}
	if removed {
		if err := d.fs.SyncDir(d.path); err != nil {
			return fmt.Errorf("engine: sync data dir: %w", err)
		}
	}
	return nil
}

func (d *LogDir) closePartitions() {
	for _, t := range d.mu.topics {
		for _, p := range t.mu.parts {
			_ = p.Close()
		}
	}
}

// readCheckpoint reads a root checkpoint file. Like Kafka's LogManager, a file
// that cannot be parsed is logged and treated as empty, which makes every
// partition recover from its start.
func (d *LogDir) readCheckpoint(name string) map[TopicPartition]int64 {
	m, err := ReadCheckpoint(d.fs, filepath.Join(d.path, name))
	if err != nil {
		d.log.Warn("ignoring unreadable checkpoint file", "file", name, "err", err)
		return nil
	}
	return m
}

func offsetOr(m map[TopicPartition]int64, tp TopicPartition) int64 {
	if v, ok := m[tp]; ok {
		return v
	}
	return -1
}

// ParsePartitionDir parses a partition directory name, <topic>-<partition>,
// splitting on the last '-'. ok is false for anything that is not a live
// topic partition: no '-', a partition that is not a canonical non-negative
// decimal, an invalid topic name, Kafka's -delete/-future/-stray directories,
// and the KRaft metadata topic (whose TopicPartition is still returned so a
// caller can tell it apart).
func ParsePartitionDir(name string) (TopicPartition, bool) {
	if specialDirRe.MatchString(name) {
		return TopicPartition{}, false
	}
	i := strings.LastIndexByte(name, '-')
	if i <= 0 || i == len(name)-1 {
		return TopicPartition{}, false
	}
	topic, ps := name[:i], name[i+1:]
	p, err := strconv.Atoi(ps)
	if err != nil || p < 0 || strconv.Itoa(p) != ps {
		return TopicPartition{}, false
	}
	tp := TopicPartition{Topic: topic, Partition: p}
	if ValidTopicName(topic) != nil || topic == MetadataTopic {
		return tp, false
	}
	return tp, true
}

// ValidTopicName applies Kafka's rule: 1 to 249 characters of [a-zA-Z0-9._-],
// and not "." or "..". The error wraps ErrInvalidTopic.
func ValidTopicName(name string) error {
	switch {
	case name == "":
		return fmt.Errorf("%w: empty name", ErrInvalidTopic)
	case name == "." || name == "..":
		return fmt.Errorf("%w: %q is not allowed", ErrInvalidTopic, name)
	case len(name) > maxTopicNameLen:
		return fmt.Errorf("%w: %d characters, the limit is %d", ErrInvalidTopic, len(name), maxTopicNameLen)
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '.' || c == '_' || c == '-') {
			return fmt.Errorf("%w: %q contains %q; only [a-zA-Z0-9._-] are allowed", ErrInvalidTopic, name, c)
		}
	}
	return nil
}

// Path returns the data directory.
func (d *LogDir) Path() string { return d.path }

// FS returns the file system the directory lives on.
func (d *LogDir) FS() vfs.FS { return d.fs }

// IndexStats describes the sealed segments of every partition whose
// indexes are open, within log.index.mapped.max.segments.
func (d *LogDir) IndexStats() IndexStats { return d.indexes.stats() }

// ReadOnly reports whether the directory was opened read-only.
func (d *LogDir) ReadOnly() bool { return d.readOnly }

// Topics returns every topic, sorted by name.
func (d *LogDir) Topics() []*Topic {
	d.mu.RLock()
	ts := make([]*Topic, 0, len(d.mu.topics))
	for _, t := range d.mu.topics {
		ts = append(ts, t)
	}
	d.mu.RUnlock()
	slices.SortFunc(ts, func(a, b *Topic) int { return cmp.Compare(a.name, b.name) })
	return ts
}

// Topic returns the named topic or an error wrapping ErrUnknownTopic.
func (d *LogDir) Topic(name string) (*Topic, error) {
	d.mu.RLock()
	t := d.mu.topics[name]
	d.mu.RUnlock()
	if t == nil {
		return nil, fmt.Errorf("%w: %q", ErrUnknownTopic, name)
	}
	return t, nil
}

// Partitions returns every partition of every topic, by topic name then id.
func (d *LogDir) Partitions() []*Partition {
	var ps []*Partition
	for _, t := range d.Topics() {
		ps = append(ps, t.Partitions()...)
	}
	return ps
}

// writable reports ErrClosed or ErrReadOnly. Callers hold d.admin.
func (d *LogDir) writable() error {
	d.mu.RLock()
	closed := d.mu.closed
	d.mu.RUnlock()
	if closed {
		return ErrClosed
	}
	if d.readOnly {
		return ErrReadOnly
	}
	return nil
}

func (d *LogDir) partitionDir(topic string, p int) string {
	return filepath.Join(d.path, topic+"-"+strconv.Itoa(p))
}

// Checkpoint writes the three checkpoint files: every partition's recovery
// point and log start offset, and the first dirty offset of every partition
// that has one. On a read-only LogDir it does nothing and returns nil.
func (d *LogDir) Checkpoint() error {
	d.admin.Lock()
	defer d.admin.Unlock()
	d.mu.RLock()
	closed := d.mu.closed
	d.mu.RUnlock()
	if closed {
		return ErrClosed
	}
	return d.checkpointLocked()
}

func (d *LogDir) checkpointLocked() error {
	if d.readOnly {
		return nil
	}
	rp := make(map[TopicPartition]int64)
	ls := make(map[TopicPartition]int64)
	cl := make(map[TopicPartition]int64)
	hz := make(map[TopicPartition]int64)
	for _, p := range d.Partitions() {
		tp := TopicPartition{Topic: p.Topic(), Partition: p.ID()}
		rp[tp] = p.RecoveryPoint()
		ls[tp] = p.LogStartOffset()
		if fd := p.FirstDirtyOffset(); fd >= 0 {
			cl[tp] = fd
		}
		if h := p.PendingDeleteHorizon(); h > 0 {
			hz[tp] = h
		}
	}
	for _, c := range []struct {
		name string
		m    map[TopicPartition]int64
	}{{RecoveryPointCheckpointFile, rp}, {LogStartOffsetCheckpointFile, ls}, {CleanerOffsetCheckpointFile, cl}, {DeleteHorizonsFile, hz}} {
		if last, ok := d.written[c.name]; ok && maps.Equal(last, c.m) {
			continue // unchanged since this LogDir last wrote it: no rename and fsyncs
		}
		if err := WriteCheckpoint(d.fs, filepath.Join(d.path, c.name), c.m); err != nil {
			delete(d.written, c.name)
			return fmt.Errorf("engine: write %s: %w", c.name, err)
		}
		if d.written == nil {
			d.written = map[string]map[TopicPartition]int64{}
		}
		d.written[c.name] = c.m
	}
	return nil
}

// Close flushes every partition, writes the checkpoints, closes the
// partitions, writes topicfs-clean-shutdown (only if all of that succeeded),
// syncs the data dir and releases the lock. It waits for background removals.
// Read-only: closes the partitions and writes nothing. Close is idempotent.
func (d *LogDir) Close() error {
	// Stop the checkpoint loop first: it takes d.admin.
	d.stopOnce.Do(func() {
		if d.stop != nil {
			close(d.stop)
		}
	})
	d.loop.Wait()
	d.admin.Lock()
	defer d.admin.Unlock()
	d.mu.Lock()
	if d.mu.closed {
		d.mu.Unlock()
		return nil
	}
	d.mu.closed = true
	d.mu.Unlock()
	d.bg.Wait()

	parts := d.Partitions()
	var errs []error
	if !d.readOnly {
		for _, p := range parts {
			if err := p.Flush(); err != nil {
				errs = append(errs, fmt.Errorf("engine: flush %s-%d: %w", p.Topic(), p.ID(), err))
			}
		}
		if err := d.checkpointLocked(); err != nil {
			errs = append(errs, err)
		}
	}
	for _, p := range parts {
		if err := p.Close(); err != nil && !errors.Is(err, ErrClosed) {
			errs = append(errs, fmt.Errorf("engine: close %s-%d: %w", p.Topic(), p.ID(), err))
		}
	}
	if !d.readOnly && len(errs) == 0 {
		if err := d.writeCleanShutdown(); err != nil {
			errs = append(errs, err)
		}
	}
	if d.unlock != nil {
		if err := d.unlock.Close(); err != nil {
			errs = append(errs, fmt.Errorf("engine: release lock: %w", err))
		}
	}
	if len(errs) > 0 {
		d.log.Error("closing data dir", "path", d.path, "err", errors.Join(errs...))
	}
	return errors.Join(errs...)
}

func (d *LogDir) writeCleanShutdown() error {
	f, err := d.fs.OpenFile(filepath.Join(d.path, CleanShutdownFile), os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o644)
	if err != nil {
		return fmt.Errorf("engine: write clean-shutdown marker: %w", err)
	}
	if err := f.Sync(); err != nil {
		_ = f.Close()
		return fmt.Errorf("engine: write clean-shutdown marker: %w", err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("engine: write clean-shutdown marker: %w", err)
	}
	if err := d.fs.SyncDir(d.path); err != nil {
		return fmt.Errorf("engine: sync data dir: %w", err)
	}
	return nil
}

// Directory lock.

// LockDir takes the exclusive lock on dir/.lock that OpenLogDir takes, for
// offline tools that write to a data directory (topicfs check --repair). The
// error wraps ErrLocked when a mount or a Kafka broker holds it.
//
// The lock comes from the FS (vfs.Locker: flock(LOCK_EX|LOCK_NB) on vfs.OS,
// in-process on MemFS, delegated by ErrorFS). When the lock is a real file
// descriptor, an open-file-description fcntl write lock (F_OFD_SETLK) is
// taken on it too: that is what conflicts with the POSIX lock a Kafka broker
// holds through Java's FileChannel.tryLock, which flock alone does not see on
// Linux. An FS without Locker gets an in-process lock keyed by FS and path.
func LockDir(fsys vfs.FS, dir string) (io.Closer, error) {
	name := filepath.Join(filepath.Clean(dir), LockFile)
	if _, ok := fsys.(vfs.Locker); !ok {
		return memLock(fsys, name)
	}
	c, err := vfs.Lock(fsys, name)
	if errors.Is(err, vfs.ErrLocked) {
		return nil, lockedErr(name, err)
	}
	if err != nil {
		return nil, fmt.Errorf("engine: lock %s: %w", name, err)
	}
	if f, ok := c.(interface{ Fd() uintptr }); ok {
		lk := unix.Flock_t{Type: unix.F_WRLCK, Whence: io.SeekStart}
		if err := unix.FcntlFlock(f.Fd(), unix.F_OFD_SETLK, &lk); err != nil {
			_ = c.Close()
			if errors.Is(err, unix.EAGAIN) || errors.Is(err, unix.EACCES) {
				return nil, lockedErr(name, err)
			}
			return nil, fmt.Errorf("engine: lock %s: %w", name, err)
		}
	}
	return c, nil
}

func lockedErr(name string, err error) error {
	return fmt.Errorf("%w: %s is held by another process (a running topicfs mount or Kafka broker); stop it first, or open read-only (%v)", ErrLocked, name, err)
}

// In-process locks for file systems that cannot lock.
var memLocks struct {
	sync.Mutex
	held map[memLockKey]bool
}

type memLockKey struct {
	fs   any
	name string
}

func memLock(fsys vfs.FS, name string) (io.Closer, error) {
	var key memLockKey
	if t := reflect.TypeOf(fsys); t != nil && t.Comparable() {
		key = memLockKey{fs: fsys, name: name}
	} else {
		key = memLockKey{fs: fmt.Sprintf("%p", fsys), name: name}
	}
	memLocks.Lock()
	defer memLocks.Unlock()
	if memLocks.held == nil {
		memLocks.held = make(map[memLockKey]bool)
	}
	if memLocks.held[key] {
		return nil, fmt.Errorf("%w: %s is held by another LogDir in this process", ErrLocked, name)
	}
	memLocks.held[key] = true
	return &memUnlock{key: key}, nil
}

type memUnlock struct {
	once sync.Once
	key  memLockKey
}

func (u *memUnlock) Close() error {
	u.once.Do(func() {
		memLocks.Lock()
		delete(memLocks.held, u.key)
		memLocks.Unlock()
	})
	return nil
}
