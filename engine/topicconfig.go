package engine

import (
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"path/filepath"
	"slices"
	"sync"

	"github.com/topicfs/topicfs/engine/vfs"
)

// This file holds Topic: a topic's partitions and its effective config, and
// the persistence of per-topic overrides in topicfs-topics.json.

// Topic is one topic of a LogDir: its partitions and its effective config.
// Safe for concurrent use; mu protects the partition list and the config.
type Topic struct {
	d    *LogDir
	name string
	mu   struct {
		sync.RWMutex
		parts   []*Partition // sorted by ID; ids may have gaps in a copied Kafka dir
		cfg     Config
		deleted bool
	}
}

// Name returns the topic name.
func (t *Topic) Name() string { return t.name }

// Partitions returns the topic's partitions sorted by id.
func (t *Topic) Partitions() []*Partition {
	t.mu.RLock()
	defer t.mu.RUnlock()
	return slices.Clone(t.mu.parts)
}

// NumPartitions returns how many partitions the topic has (len of
// Partitions, without the copy).
func (t *Topic) NumPartitions() int {
	t.mu.RLock()
	defer t.mu.RUnlock()
	return len(t.mu.parts)
}

// Partition returns partition id or an error wrapping ErrUnknownPartition.
func (t *Topic) Partition(id int) (*Partition, error) {
	t.mu.RLock()
	defer t.mu.RUnlock()
	i, ok := slices.BinarySearchFunc(t.mu.parts, id, func(p *Partition, id int) int { return cmp.Compare(p.ID(), id) })
	if !ok {
		return nil, fmt.Errorf("%w: %s-%d", ErrUnknownPartition, t.name, id)
	}
	return t.mu.parts[i], nil
}

// Config returns the topic's effective config: defaults, then the
// [topics.NAME] overrides of the options, then the overrides persisted by
// AlterConfig.
func (t *Topic) Config() Config {
	t.mu.RLock()
	defer t.mu.RUnlock()
	return t.mu.cfg
}

// AlterConfig validates kv against the current config (all or nothing;
// mount-wide settings such as log.cleaner.threads are refused), persists the
// overrides in topicfs-topics.json, and applies the new config to every
// partition. Errors wrap ErrInvalidConfig, ErrUnknownTopic (deleted),
// ErrReadOnly or ErrClosed; on error nothing changes.
func (t *Topic) AlterConfig(kv map[string]string) error {
	d := t.d
	d.admin.Lock()
	defer d.admin.Unlock()
	if err := d.writable(); err != nil {
		return err
	}
	for k := range kv {
		if !IsTopicSetting(k) {
			return fmt.Errorf("%w: %s is a mount-wide setting, not a topic setting", ErrInvalidConfig, k)
		}
	}
	t.mu.RLock()
	cur, deleted := t.mu.cfg, t.mu.deleted
	t.mu.RUnlock()
	if deleted {
		return fmt.Errorf("%w: %q", ErrUnknownTopic, t.name)
	}
	next, err := cur.Apply(kv)
	if err != nil {
		return err
	}
	if len(kv) == 0 {
		return nil
	}
	persisted := cloneOverrides(d.persisted)
	over := make(map[string]string)
	for k, v := range persisted[t.name] {
		over[k] = v
	}
	for k := range kv {
		// Persist the value as read back (" 2000" is stored as "2000").
		if over[k], err = next.Get(k); err != nil {
			return err
		}
	}
	persisted[t.name] = over
	if err := d.writeTopicsFile(persisted); err != nil {
		return err
	}
	d.persisted = persisted

	t.mu.Lock()
	t.mu.cfg = next
	parts := slices.Clone(t.mu.parts)
	t.mu.Unlock()
	for _, p := range parts {
		p.SetConfig(next)
	}
	d.log.Info("altered topic config", "topic", t.name, "settings", kv)
	return nil
}

// AddPartitions grows the topic to total partitions, creating ids from the
// current highest id + 1 up to total-1. total must exceed the current count
// (ErrInvalidConfig otherwise, as Kafka refuses to shrink a topic).
func (t *Topic) AddPartitions(total int) error {
	d := t.d
	d.admin.Lock()
	defer d.admin.Unlock()
	if err := d.writable(); err != nil {
		return err
	}
	t.mu.RLock()
	cur, cfg, deleted := 0, t.mu.cfg, t.mu.deleted
	if n := len(t.mu.parts); n > 0 {
		cur = t.mu.parts[n-1].ID() + 1
	}
	t.mu.RUnlock()
	if deleted {
		return fmt.Errorf("%w: %q", ErrUnknownTopic, t.name)
	}
	if total <= cur {
		return fmt.Errorf("%w: topic %q has %d partitions; the new total %d must be larger", ErrInvalidConfig, t.name, cur, total)
	}
	if total > MaxPartitions {
		return fmt.Errorf("%w: topic %q: %d partitions is more than the most, %d", ErrInvalidConfig, t.name, total, MaxPartitions)
	}
	for p := cur; p < total; p++ {
		if _, err := d.fs.Stat(d.partitionDir(t.name, p)); err == nil {
			return fmt.Errorf("%w: directory %s already exists", ErrTopicExists, d.partitionDir(t.name, p))
		}
	}
	parts, err := d.createPartitions(t.name, cfg, cur, total)
	if err != nil {
		return err
	}
	t.mu.Lock()
	t.mu.parts = append(t.mu.parts, parts...)
	t.mu.Unlock()
	d.log.Info("added partitions", "topic", t.name, "from", cur, "total", total)
	return nil
}

// topicConfig computes a topic's config from defaults, options overrides and
// persisted overrides. Invalid persisted settings (e.g. written by a newer
// version) are logged and skipped one by one.
func (d *LogDir) topicConfig(name string) (Config, error) {
	c, err := d.defaults.Apply(d.over[name])
	if err != nil {
		return Config{}, fmt.Errorf("[topics.%s]: %w", name, err)
	}
	return ApplyPersisted(c, d.persisted[name], func(k, v string, err error) {
		d.log.Warn("ignoring invalid persisted topic setting", "topic", name, "setting", k, "value", v, "err", err)
	}), nil
}

// ApplyPersisted applies a topic's persisted settings kv (from
// ReadTopicsFile) to c. An invalid one (written by another version, say)
// is skipped, and skip is told of it; the others apply.
func ApplyPersisted(c Config, kv map[string]string, skip func(k, v string, err error)) Config {
	if len(kv) == 0 {
		return c
	}
	if n, err := c.Apply(kv); err == nil {
		return n
	}
	for k, v := range kv {
		if n, err := c.Apply(map[string]string{k: v}); err != nil {
			skip(k, v, err)
		} else {
			c = n
		}
	}
	return c
}

// topicsFile is the JSON form of topicfs-topics.json:
//
//	{"version":1,"topics":{"orders":{"retention.ms":"3600000"}}}
type topicsFile struct {
	Version int                          `json:"version"`
	Topics  map[string]map[string]string `json:"topics"`
}

func (d *LogDir) readTopicsFile() (map[string]map[string]string, error) {
	return ReadTopicsFile(d.fs, d.path)
}

// ReadTopicsFile reads the per-topic settings persisted in the data
// directory dir's topicfs-topics.json: topic → setting → value, empty when
// there is no such file. An unreadable file is an error (ErrInvalidConfig
// when it does not parse).
func ReadTopicsFile(fsys vfs.FS, dir string) (map[string]map[string]string, error) {
	path := filepath.Join(dir, TopicsConfigFile)
	buf, err := vfs.ReadFile(fsys, path)
	if errors.Is(err, fs.ErrNotExist) {
		return map[string]map[string]string{}, nil
	}
	if err != nil {
		return nil, fmt.Errorf("engine: read %s: %w", path, err)
	}
	var tf topicsFile
	if err := json.Unmarshal(buf, &tf); err != nil {
		return nil, fmt.Errorf("%w: %s: %v", ErrInvalidConfig, path, err)
	}
	if tf.Version != 1 {
		return nil, fmt.Errorf("%w: %s: unknown version %d", ErrInvalidConfig, path, tf.Version)
	}
	if tf.Topics == nil {
		tf.Topics = map[string]map[string]string{}
	}
	return tf.Topics, nil
}

// writeTopicsFile replaces topicfs-topics.json atomically: write a .tmp file,
// fsync it, rename it over the old one, fsync the directory.
func (d *LogDir) writeTopicsFile(m map[string]map[string]string) error {
	data, err := json.MarshalIndent(topicsFile{Version: 1, Topics: m}, "", "  ")
	if err != nil {
		return err
	}
	path := filepath.Join(d.path, TopicsConfigFile)
	if err := vfs.WriteFileAtomic(d.fs, path, append(data, '\n'), 0o644); err != nil {
		return fmt.Errorf("engine: write %s: %w", path, err)
	}
	return nil
}

// cloneOverrides copies the outer map (inner maps are never mutated in place).
func cloneOverrides(m map[string]map[string]string) map[string]map[string]string {
	if m == nil {
		return map[string]map[string]string{}
	}
	return maps.Clone(m)
}
