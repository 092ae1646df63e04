package local

import (
	"context"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/topicfs/topicfs/backend"
	"github.com/topicfs/topicfs/engine"
	"github.com/topicfs/topicfs/engine/record"
)

// Backend is a backend.Backend over one engine.LogDir.
type Backend struct {
	d *engine.LogDir

	mu    sync.Mutex
	parts map[*engine.Partition]*Partition // one Partition value per engine partition

	cursors cursorStore // CursorsFile, read by New (cursors.go)
}

var _ backend.Backend = (*Backend)(nil)

// New returns the backend of d. The caller keeps owning d (and closes it).
func New(d *engine.LogDir) *Backend {
	b := &Backend{d: d, parts: map[*engine.Partition]*Partition{}}
	// The cursors are read now, while the topics are those on disk: an
	// entry of a topic deleted before a crash must not come back when a
	// topic of the same name is created later.
	b.cursors.mu.Lock()
	if err := b.loadLocked(); err != nil {
		slog.Warn("local: cursors unusable until the file is fixed or moved aside", "err", err)
	}
	b.cursors.mu.Unlock()
	return b
}

// LogDir returns the data directory.
func (b *Backend) LogDir() *engine.LogDir { return b.d }

// ReadOnly reports whether the data directory was opened read-only.
func (b *Backend) ReadOnly() bool { return b.d.ReadOnly() }

// Topics returns the topic names, sorted.
func (b *Backend) Topics(ctx context.Context) ([]string, error) {
	ts := b.d.Topics()
	names := make([]string, len(ts))
	for i, t := range ts {
		names[i] = t.Name()
	}
	return names, nil
}

// Topic returns the topic name.
func (b *Backend) Topic(ctx context.Context, name string) (backend.Topic, error) {
	t, err := b.d.Topic(name)
	if err != nil {
		return nil, err
	}
	return &Topic{b: b, t: t}, nil
}

// CreateTopic creates a topic (partitions 0: num.partitions).
func (b *Backend) CreateTopic(ctx context.Context, name string, partitions int) (backend.Topic, error) {
	t, err := b.d.CreateTopic(name, partitions)
	if err != nil {
		return nil, err
	}
	return &Topic{b: b, t: t}, nil
}

// DeleteTopic deletes a topic; open snapshots keep reading its segments.
func (b *Backend) DeleteTopic(ctx context.Context, name string) error {
	if err := b.d.DeleteTopic(name); err != nil {
		return err
	}
	if err := b.dropCursors(name); err != nil {
		// The next load drops the cursors of a topic that is gone.
		slog.Warn("local: could not drop the cursors of a deleted topic", "topic", name, "err", err)
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	for ep := range b.parts {
		if ep.Topic() == name {
			delete(b.parts, ep)
		}
	}
	return nil
}

// partition returns the one Partition value of ep, so callers may key
// state by it.
func (b *Backend) partition(ep *engine.Partition) *Partition {
	b.mu.Lock()
	defer b.mu.Unlock()
	p := b.parts[ep]
	if p == nil {
		p = &Partition{Partition: ep}
		b.parts[ep] = p
	}
	return p
}

// Topic is a backend.Topic over an engine.Topic.
type Topic struct {
	b *Backend
	t *engine.Topic
}

var _ backend.Topic = (*Topic)(nil)

// Engine returns the engine's topic.
func (t *Topic) Engine() *engine.Topic { return t.t }

// Name returns the topic's name.
func (t *Topic) Name() string { return t.t.Name() }

// NumPartitions returns the number of partitions.
func (t *Topic) NumPartitions() int { return t.t.NumPartitions() }

// Partition returns partition id.
func (t *Topic) Partition(id int) (backend.Partition, error) {
	ep, err := t.t.Partition(id)
	if err != nil {
		return nil, err
	}
	return t.b.partition(ep), nil
}

// AddPartitions grows the topic to total partitions.
func (t *Topic) AddPartitions(ctx context.Context, total int) error { return t.t.AddPartitions(total) }

// Settings returns the settings the file tree applies.
func (t *Topic) Settings() backend.Settings { return SettingsOf(t.t.Config()) }

// SettingsOf returns the settings the file tree applies of cfg.
func SettingsOf(cfg engine.Config) backend.Settings {
	return backend.Settings{
		ParseKey:       cfg.ParseKey,
		PrintKey:       cfg.PrintKey,
		KeySeparator:   cfg.KeySeparator,
		NullMarker:     cfg.NullMarker,
		BatchSize:      cfg.BatchSize,
		LingerMs:       cfg.LingerMs,
		MaxRecordBytes: cfg.MaxRecordBytes(),
		Uncompressed:   cfg.CompressionType == "none" || cfg.CompressionType == "producer" || cfg.CompressionType == "uncompressed",
		Compacted:      cfg.Compact(),
		CursorStart:    cfg.CursorStart,
	}
}

// ConfigText renders the topic's config; num.partitions shows the actual
// count.
func (t *Topic) ConfigText(ctx context.Context) ([]byte, error) {
	cfg := t.t.Config()
	cfg.NumPartitions = int64(t.t.NumPartitions())
	return []byte(cfg.String()), nil
}

// AlterConfig validates kv against the topic's config and applies it: the
// settings (persisted first), then new partitions. A name restating its
// current value is skipped, so a config file written back whole is
// accepted. If adding partitions fails the settings are put back, so a
// call applies all or nothing.
func (t *Topic) AlterConfig(ctx context.Context, kv map[string]string) error {
	next := t.t.Config()
	next.NumPartitions = int64(t.t.NumPartitions())
	partitions := next.NumPartitions
	add := map[string]string{}
	for _, name := range sortedKeys(kv) {
		value := kv[name]
		if old, err := next.Get(name); err == nil && old == value {
			continue
		}
		if !engine.IsTopicSetting(name) {
			return fmt.Errorf("%w: %s is not a topic setting", engine.ErrInvalidConfig, name)
		}
		if err := next.Set(name, value); err != nil {
			return err
		}
		if name == "num.partitions" && next.NumPartitions < partitions {
			return fmt.Errorf("%w: num.partitions cannot shrink from %d to %d", engine.ErrInvalidConfig, partitions, next.NumPartitions)
		}
		add[name] = value
	}
	if len(add) == 0 {
		return nil
	}
	return t.apply(add)
}

// apply applies validated changes; see AlterConfig.
func (t *Topic) apply(kv map[string]string) error {
	kv = maps.Clone(kv)
	n := -1
	if v, ok := kv["num.partitions"]; ok {
		n, _ = strconv.Atoi(strings.TrimSpace(v))
		delete(kv, "num.partitions")
	}
	old := map[string]string{}
	cur := t.t.Config()
	for k := range kv {
		v, err := cur.Get(k)
		if err != nil {
			return err
		}
		old[k] = v
	}
	if len(kv) > 0 {
		if err := t.t.AlterConfig(kv); err != nil {
			return err
		}
	}
	if n > t.t.NumPartitions() {
		if err := t.t.AddPartitions(n); err != nil {
			if len(old) > 0 {
				if rerr := t.t.AlterConfig(old); rerr != nil {
					return fmt.Errorf("%w (and restoring the settings of the same write failed: %v)", err, rerr)
				}
			}
			return err
		}
	}
	return nil
}

func sortedKeys(m map[string]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// Partition is a backend.Partition over an engine.Partition, whose other
// methods (segments, recovery point, counters, the encode-outside-the-lock
// append path) it promotes for the file tree's local-only parts.
type Partition struct {
	*engine.Partition
}

var (
	_ backend.Partition       = (*Partition)(nil)
	_ backend.TailSnapshotter = (*Partition)(nil)
	_ backend.RecordReader    = (*Partition)(nil)
)

// pointReaders are the engine's point readers ReadRecord reuses (one is
// not safe for concurrent use).
var pointReaders = sync.Pool{New: func() any { return new(engine.PointReader) }}

// ReadRecord reads the first record at or after offset with the engine's
// point reader.
func (p *Partition) ReadRecord(ctx context.Context, offset int64, fn func(b *record.Batch, r *record.Record) error) error {
	pr := pointReaders.Get().(*engine.PointReader)
	defer pointReaders.Put(pr)
	rec, err := pr.ReadRecord(p.Partition, offset)
	if err != nil {
		return err
	}
	return fn(&rec.Batch, &rec.Record)
}

// Engine returns the engine's partition.
func (p *Partition) Engine() *engine.Partition { return p.Partition }

// AppendEach appends each group as its own batch (engine.Partition.AppendEach).
func (p *Partition) AppendEach(ctx context.Context, groups [][]record.Record) (first, last int64, err error) {
	return p.Partition.AppendEach(groups)
}

// AppendLines appends value-only records (engine.Partition.AppendLines).
func (p *Partition) AppendLines(ctx context.Context, lines []byte, batchBytes int) (first, last int64, err error) {
	return p.Partition.AppendLines(lines, batchBytes)
}

// Sync fsyncs what was appended.
func (p *Partition) Sync(ctx context.Context) error { return p.Partition.Flush() }

// Offsets returns the log start and the log end.
func (p *Partition) Offsets(ctx context.Context) (backend.Offsets, error) {
	return backend.Offsets{LogStart: p.LogStartOffset(), End: p.LogEndOffset()}, nil
}

// OffsetForTime returns the first offset with a timestamp >= ts.
func (p *Partition) OffsetForTime(ctx context.Context, ts int64) (int64, error) {
	return p.Partition.OffsetForTime(ts)
}

// Snapshot returns every segment, retained (the engine's segments are
// already local: from is not needed to fetch anything). Its end is the
// last stable offset, where a Kafka broker stops read_committed readers:
// records of a transaction without its COMMIT or ABORT marker yet, and
// everything after them, are not shown until the marker is appended. The
// active segment grows past it: readers read it up to the end only
// (engine.Segment.SizeBelow).
func (p *Partition) Snapshot(ctx context.Context, from int64) (*backend.Snapshot, error) {
	snap := p.Partition.Snapshot()
	segs := make([]backend.Segment, len(snap.Segments))
	for i, s := range snap.Segments {
		segs[i] = s
	}
	return backend.NewSnapshot(segs, backend.Offsets{LogStart: snap.LogStartOffset, End: snap.LastStableOffset}, snap.Release), nil
}

// SnapshotLast is Snapshot for a view of the last n offsets before the
// last stable offset (by-offset/-N), as kcat -o -N reads with
// read_committed.
func (p *Partition) SnapshotLast(ctx context.Context, n int64) (*backend.Snapshot, error) {
	return p.Snapshot(ctx, backend.FromStart)
}
