// The Mirror: a local read-through copy of the cluster partitions views
// read, one engine.Partition per cluster partition under a cache
// directory. This file opens and closes it; mirrorpart.go fills a
// partition's copy and hands out its segments (mirror_doc.go says why).

package cluster

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"

	"github.com/topicfs/topicfs/engine"
	"github.com/topicfs/topicfs/engine/vfs"
)

// Defaults of MirrorOptions.
const (
	DefaultMirrorRetentionBytes = 1 << 30
	DefaultMirrorSegmentBytes   = 64 << 20
	DefaultMirrorFillGapBytes   = 16 << 20
)

// MirrorOptions configure a Mirror. Zero values are the defaults.
type MirrorOptions struct {
	// RetentionBytes caps each partition's copy, as retention.bytes caps
	// a log: past it, the oldest segments no reader holds are deleted
	// (whole segments; the active one stays). Negative: no cap.
	RetentionBytes int64
	// SegmentBytes is the size at which the copy rolls to a new segment:
	// the unit the cap deletes.
	SegmentBytes int64
	// FillGapBytes: when a Snapshot starts past the copy's end, the gap
	// is fetched (the copy stays one range) if it is estimated, from the
	// copy's bytes per offset, at most this large; otherwise the copy
	// restarts at the Snapshot's start. Negative: always restart.
	FillGapBytes int64
	// MaxOpen bounds the partition copies kept open (each holds a few
	// files per segment): opening one more closes, cleanly, the least
	// recently used copy no reader holds and no fill uses; it reopens
	// without a scan when asked for again. 0: DefaultMaxOpenCopies.
	MaxOpen int
	Logger  *slog.Logger
}

// DefaultMaxOpenCopies is MirrorOptions.MaxOpen's default: at a few
// segments each, well inside the open-file limit the mount asks for.
const DefaultMaxOpenCopies = 256

// Files a mirror partition directory holds besides its segments.
const (
	// cleanFile marks a copy closed cleanly (JSON: the transactions that
	// were open). A copy without it is discarded when opened
	// (mirror_doc.go).
	cleanFile = "topicfs-mirror-clean"
)

// Mirror keeps, under a cache directory, a local copy of the cluster
// partitions that were read: DIR/<cluster id>/<topic>-<partition>/, each an
// engine partition of the batches fetched, in Kafka's format. One process
// uses a cluster's directory at a time (engine.LockDir, ErrLocked). Safe
// for concurrent use.
type Mirror struct {
	fs vfs.FS
	// cache is fs without fsyncs, for what a crash discards anyway (the
	// copies' files, their topic ids, discarding): a copy is made durable
	// once, before its clean-close mark (syncCopy).
	cache  vfs.FS
	dir    string
	opts   MirrorOptions
	logger *slog.Logger

	mu     sync.Mutex
	closed bool
	locks  map[string]io.Closer
	parts  map[mirrorKey]*MirrorPartition
	clock  int64 // counts Partition calls: MirrorPartition.used
}

type mirrorKey struct {
	cluster   string
	topic     string
	partition int32
}

// OpenMirror returns a Mirror under dir (created if missing). Partitions
// are opened when first asked for.
func OpenMirror(fsys vfs.FS, dir string, opts MirrorOptions) (*Mirror, error) {
	if opts.RetentionBytes == 0 {
		opts.RetentionBytes = DefaultMirrorRetentionBytes
	}
	if opts.SegmentBytes <= 0 {
		opts.SegmentBytes = DefaultMirrorSegmentBytes
	}
	if opts.FillGapBytes == 0 {
		opts.FillGapBytes = DefaultMirrorFillGapBytes
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	if err := fsys.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("cluster: mirror directory: %w", err)
	}
	return &Mirror{fs: fsys, cache: vfs.NoSync(fsys), dir: dir, opts: opts, logger: opts.Logger,
		locks: map[string]io.Closer{}, parts: map[mirrorKey]*MirrorPartition{}}, nil
}

// engineConfig is the configuration of every mirror partition: segments
// roll by size only, deleted files go at once, nothing is fsynced before
// Close (a copy lost in a crash is fetched again).
func (m *Mirror) engineConfig() engine.Config {
	cfg := engine.DefaultConfig()
	cfg.SegmentBytes = m.opts.SegmentBytes
	cfg.SegmentMs = math.MaxInt64
	cfg.RetentionMs = -1
	cfg.RetentionBytes = -1
	cfg.FileDeleteDelayMs = 0
	return cfg
}

// Use calls fn with the copy of a cluster partition, opened on first use
// and kept open (not evicted as unused) until fn returns.
func (m *Mirror) Use(clusterID, topic string, partition int32, fn func(mp *MirrorPartition) error) error {
	mp, err := m.partition(clusterID, topic, partition, true)
	if err != nil {
		return err
	}
	defer mp.pins.Add(-1)
	return fn(mp)
}

// Partition returns the copy of a cluster partition, opening it on first
// use. Once no reader holds its segments it may be closed to keep
// MirrorOptions.MaxOpen copies open (its calls then fail with
// backend.ErrClosed); Use keeps it open.
func (m *Mirror) Partition(clusterID, topic string, partition int32) (*MirrorPartition, error) {
	return m.partition(clusterID, topic, partition, false)
}

// partition is Partition; pin counts a user that keeps the copy open.
func (m *Mirror) partition(clusterID, topic string, partition int32, pin bool) (*MirrorPartition, error) {
	if err := validClusterID(clusterID); err != nil {
		return nil, err
	}
	if err := engine.ValidTopicName(topic); err != nil {
		return nil, err
	}
	if partition < 0 {
		return nil, fmt.Errorf("cluster: mirror of partition %d: %w", partition, engine.ErrUnknownPartition)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return nil, fmt.Errorf("cluster: mirror: %w", engine.ErrClosed)
	}
	key := mirrorKey{clusterID, topic, partition}
	m.clock++
	if mp := m.parts[key]; mp != nil {
		mp.used = m.clock
		if pin {
			mp.pins.Add(1)
		}
		return mp, nil
	}
	if err := m.lockClusterLocked(clusterID); err != nil {
		return nil, err
	}
	m.evictLocked()
	mp, err := m.openPartition(key)
	if err != nil {
		return nil, err
	}
	mp.used = m.clock
	if pin {
		mp.pins.Add(1)
	}
	m.parts[key] = mp
	return mp, nil
}

// evictLocked closes least recently used copies while MaxOpen are open,
// skipping those a reader holds or a fill uses (more stay open then).
// Callers hold m.mu.
func (m *Mirror) evictLocked() {
	limit := m.opts.MaxOpen
	if limit <= 0 {
		limit = DefaultMaxOpenCopies
	}
	for len(m.parts) >= limit {
		var lru *MirrorPartition
		for _, mp := range m.parts {
			if (lru == nil || mp.used < lru.used) && mp.idle() {
				lru = mp
			}
		}
		if lru == nil || !lru.tryAcquire() {
			return
		}
		delete(m.parts, lru.key)
		if err := lru.closeLocked(true); err != nil {
			m.logger.Warn("cluster: closing an unused copy", "dir", lru.dir, "err", err)
		}
		lru.release()
		m.logger.Debug("cluster: closed the least recently used copy", "dir", lru.dir, "open", len(m.parts))
	}
}

// LockCluster takes the lock of the cluster's directory of copies now:
// another mount of the same cluster with the same cache directory holds
// it (engine.ErrLocked), which a mount should hear at once rather than at
// its first read.
func (m *Mirror) LockCluster(clusterID string) error {
	if err := validClusterID(clusterID); err != nil {
		return err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.lockClusterLocked(clusterID)
}

// lockClusterLocked takes the lock of a cluster's directory, once.
// Callers hold m.mu.
func (m *Mirror) lockClusterLocked(clusterID string) error {
	if _, ok := m.locks[clusterID]; ok {
		return nil
	}
	cdir := filepath.Join(m.dir, clusterID)
	if err := m.fs.MkdirAll(cdir, 0o700); err != nil {
		return fmt.Errorf("cluster: mirror directory: %w", err)
	}
	lock, err := engine.LockDir(m.fs, cdir)
	if err != nil {
		return err
	}
	m.locks[clusterID] = lock
	return nil
}

// validClusterID refuses a cluster id that is not one path element.
func validClusterID(id string) error {
	if id == "" || id == "." || id == ".." || strings.ContainsAny(id, "/\x00") {
		return fmt.Errorf("cluster: mirror: cluster id %q cannot name a directory", id)
	}
	return nil
}

func (m *Mirror) partDir(key mirrorKey) string {
	return filepath.Join(m.dir, key.cluster, key.topic+"-"+strconv.Itoa(int(key.partition)))
}

// openPartition opens a copy: after a clean close, without a scan and
// with the transactions that were open given back to the producer state;
// otherwise from nothing (what a crash left is discarded).
func (m *Mirror) openPartition(key mirrorKey) (*MirrorPartition, error) {
	dir := m.partDir(key)
	open, clean := m.readClean(dir)
	if clean {
		// From now on the copy is not clean: a crash must find no marker.
		if err := m.fs.Remove(filepath.Join(dir, cleanFile)); err != nil {
			return nil, fmt.Errorf("cluster: mirror %s: %w", dir, err)
		}
		if err := m.fs.SyncDir(dir); err != nil {
			return nil, fmt.Errorf("cluster: mirror %s: %w", dir, err)
		}
	} else if err := m.discard(dir); err != nil {
		return nil, err
	}
	p, err := engine.OpenPartition(m.cache, dir, key.topic, int(key.partition), engine.PartitionOptions{
		Config: m.engineConfig(), RecoveryPoint: -1, LogStartOffset: -1, FirstDirty: -1,
		CleanShutdown: clean, Logger: m.logger})
	if err != nil {
		return nil, fmt.Errorf("cluster: mirror: %w", err)
	}
	if err := p.SetOpenTransactions(open); err != nil {
		// A marker that does not fit the log: start the copy afresh.
		m.logger.Warn("cluster: mirror marker does not match the log; restarting the copy", "dir", dir, "err", err)
		if err := p.TruncateFullyAndStartAt(0); err != nil {
			return nil, errors.Join(fmt.Errorf("cluster: mirror: %w", err), p.Close())
		}
	}
	mp := newMirrorPartition(m, key, dir, p)
	mp.topicID = m.readTopicID(dir)
	return mp, nil
}

// cleanMarker is what cleanFile holds.
type cleanMarker struct {
	OpenTransactions []openTxn `json:"open_transactions"`
}

type openTxn struct {
	ProducerID  int64 `json:"producer_id"`
	FirstOffset int64 `json:"first_offset"`
}

// readClean reads the clean-close marker of dir: the transactions that
// were open.
func (m *Mirror) readClean(dir string) (open map[int64]int64, ok bool) {
	data, err := vfs.ReadFile(m.fs, filepath.Join(dir, cleanFile))
	if err != nil {
		return nil, false
	}
	var c cleanMarker
	if err := json.Unmarshal(data, &c); err != nil || c.OpenTransactions == nil {
		m.logger.Warn("cluster: unreadable mirror marker", "dir", dir)
		return nil, false
	}
	open = map[int64]int64{}
	for _, t := range c.OpenTransactions {
		open[t.ProducerID] = t.FirstOffset
	}
	return open, true
}

// discard removes what a copy that was not closed cleanly left.
func (m *Mirror) discard(dir string) error {
	ents, err := m.fs.ReadDir(dir)
	if errors.Is(err, os.ErrNotExist) || (err == nil && len(ents) == 0) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("cluster: mirror %s: %w", dir, err)
	}
	m.logger.Info("cluster: discarding a mirror that was not closed cleanly", "dir", dir)
	// Not made durable: a crash before the copy is marked clean again
	// discards whatever is left of this one too.
	if err := m.cache.RemoveAll(dir); err != nil {
		return fmt.Errorf("cluster: mirror %s: %w", dir, err)
	}
	return nil
}

// writeClean marks dir's copy closed cleanly, with its open transactions.
func (m *Mirror) writeClean(dir string, open map[int64]int64) error {
	c := cleanMarker{OpenTransactions: []openTxn{}}
	for pid, first := range open {
		c.OpenTransactions = append(c.OpenTransactions, openTxn{ProducerID: pid, FirstOffset: first})
	}
	data, err := json.Marshal(c)
	if err != nil {
		return err
	}
	if err := m.syncCopy(dir); err != nil {
		return err
	}
	return vfs.WriteFileAtomic(m.fs, filepath.Join(dir, cleanFile), append(data, '\n'), 0o600)
}

// syncCopy makes every file of a closed copy, the directory's entries and
// the directory itself durable: they were written without fsync (Mirror.cache), and the clean
// mark written next says they can be trusted without a scan.
func (m *Mirror) syncCopy(dir string) error {
	ents, err := m.fs.ReadDir(dir)
	if err != nil {
		return fmt.Errorf("cluster: mirror %s: %w", dir, err)
	}
	for _, e := range ents {
		if !e.Type().IsRegular() {
			continue
		}
		f, err := m.fs.OpenFile(filepath.Join(dir, e.Name()), os.O_RDONLY, 0)
		if err != nil {
			return fmt.Errorf("cluster: mirror %s: %w", dir, err)
		}
		err = f.Sync()
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return fmt.Errorf("cluster: mirror %s: %w", dir, err)
		}
	}
	// The directory and its parents up to the cache's were created
	// without fsync too.
	for d := dir; ; d = filepath.Dir(d) {
		if err := m.fs.SyncDir(d); err != nil {
			return fmt.Errorf("cluster: mirror %s: %w", dir, err)
		}
		if d == m.dir || d == filepath.Dir(d) {
			return m.fs.SyncDir(filepath.Dir(d))
		}
	}
}

// readTopicID reads partition.metadata (Kafka's format, as the engine
// reads it); zero if absent or unreadable.
func (m *Mirror) readTopicID(dir string) [16]byte {
	id, _ := engine.ReadPartitionMetadata(m.fs, dir)
	return id
}

// writeTopicID writes partition.metadata as Kafka does.
func (m *Mirror) writeTopicID(dir string, id [16]byte) error {
	return vfs.WriteFileAtomic(m.cache, filepath.Join(dir, engine.PartitionMetadataFile), engine.FormatPartitionMetadata(id), 0o600)
}

// Close closes every partition copy, marking each closed cleanly, and
// releases the directory locks. Snapshots handed out stay readable until
// released. A Snapshot call in progress is waited for.
func (m *Mirror) Close() error {
	m.mu.Lock()
	if m.closed {
		m.mu.Unlock()
		return nil
	}
	m.closed = true
	parts := m.parts
	m.parts = nil
	locks := m.locks
	m.mu.Unlock()
	var errs []error
	for _, mp := range parts {
		errs = append(errs, mp.close(true))
	}
	for _, l := range locks {
		errs = append(errs, l.Close())
	}
	return errors.Join(errs...)
}

// RemoveTopic drops the copies of every partition of a topic (it was
// deleted in the cluster, or is not wanted any more), open or not.
func (m *Mirror) RemoveTopic(clusterID, topic string) error {
	if err := validClusterID(clusterID); err != nil {
		return err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return fmt.Errorf("cluster: mirror: %w", engine.ErrClosed)
	}
	if err := m.lockClusterLocked(clusterID); err != nil {
		return err
	}
	var errs []error
	for key, mp := range m.parts {
		if key.cluster == clusterID && key.topic == topic {
			errs = append(errs, mp.close(false))
			delete(m.parts, key)
		}
	}
	cdir := filepath.Join(m.dir, clusterID)
	ents, err := m.fs.ReadDir(cdir)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return errors.Join(append(errs, err)...)
	}
	for _, e := range ents {
		if tp, ok := engine.ParsePartitionDir(e.Name()); ok && e.IsDir() && tp.Topic == topic {
			errs = append(errs, m.fs.RemoveAll(filepath.Join(cdir, e.Name())))
		}
	}
	return errors.Join(errs...)
}
