// Kafka's leader-epoch-checkpoint and partition.metadata, kept in a data
// directory's partitions as a single-replica broker keeps them, so that a
// Kafka broker loading the directory finds the files it would have written
// (docs/FORMATS.md §6.2, §6.3).

package engine

import (
	"bytes"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/topicfs/topicfs/engine/vfs"
)

// Per-partition files of Kafka's format.
const (
	// LeaderEpochCheckpointFile lists the first offset of each leader epoch.
	LeaderEpochCheckpointFile = "leader-epoch-checkpoint"
	// PartitionMetadataFile holds the topic id.
	PartitionMetadataFile = "partition.metadata"
)

// EpochEntry is one line of a leader-epoch-checkpoint: the first offset
// written in a leader epoch.
type EpochEntry struct {
	Epoch       int32
	StartOffset int64
}

// ParseLeaderEpochCheckpoint parses a leader-epoch-checkpoint: "0\n", the
// entry count, then "epoch startOffset" lines, epochs and offsets
// increasing. An empty file has no entries. Errors wrap ErrCorrupt.
func ParseLeaderEpochCheckpoint(data []byte) ([]EpochEntry, error) {
	if len(data) == 0 {
		return nil, nil
	}
	lines := strings.Split(strings.TrimSuffix(string(data), "\n"), "\n")
	for i := range lines {
		lines[i] = strings.TrimSuffix(lines[i], "\r")
	}
	bad := func(line int, format string, args ...any) error {
		return fmt.Errorf("%w: %s line %d: %s", ErrCorrupt, LeaderEpochCheckpointFile, line, fmt.Sprintf(format, args...))
	}
	if v := strings.TrimSpace(lines[0]); v != "0" {
		return nil, bad(1, "unsupported version %q", v)
	}
	if len(lines) == 1 {
		return nil, nil
	}
	n, err := strconv.Atoi(strings.TrimSpace(lines[1]))
	if err != nil || n < 0 || n != len(lines)-2 {
		return nil, bad(2, "entry count %q does not match the %d entry lines", lines[1], len(lines)-2)
	}
	out := make([]EpochEntry, 0, n)
	for i, l := range lines[2:] {
		f := strings.Fields(l)
		if len(f) != 2 {
			return nil, bad(i+3, "malformed entry %q (want: epoch startOffset)", l)
		}
		e, err1 := strconv.ParseInt(f[0], 10, 32)
		o, err2 := strconv.ParseInt(f[1], 10, 64)
		if err1 != nil || err2 != nil || e < 0 || o < 0 {
			return nil, bad(i+3, "malformed entry %q", l)
		}
		if k := len(out); k > 0 && (int32(e) <= out[k-1].Epoch || o < out[k-1].StartOffset) {
			return nil, bad(i+3, "entry %q does not follow epoch %d at %d", l, out[k-1].Epoch, out[k-1].StartOffset)
		}
		out = append(out, EpochEntry{Epoch: int32(e), StartOffset: o})
	}
	return out, nil
}

// FormatLeaderEpochCheckpoint encodes entries as Kafka writes the file.
func FormatLeaderEpochCheckpoint(entries []EpochEntry) []byte {
	var b bytes.Buffer
	fmt.Fprintf(&b, "0\n%d\n", len(entries))
	for _, e := range entries {
		fmt.Fprintf(&b, "%d %d\n", e.Epoch, e.StartOffset)
	}
	return b.Bytes()
}

// TruncateEpochsFromStart is Kafka's LeaderEpochFileCache.truncateFromStart
// for a log now starting at start: the entries starting at or before it
// go, and the last of them comes back starting at start (its epoch still
// covers the new first offset).
func TruncateEpochsFromStart(entries []EpochEntry, start int64) []EpochEntry {
	i := 0
	for i < len(entries) && entries[i].StartOffset <= start {
		i++
	}
	if i == 0 {
		return entries
	}
	out := append([]EpochEntry{{Epoch: entries[i-1].Epoch, StartOffset: start}}, entries[i:]...)
	return out
}

// TruncateEpochsFromEnd is Kafka's LeaderEpochFileCache.truncateFromEnd for
// a log now ending at end (the next offset): the entries starting at or
// after it go.
func TruncateEpochsFromEnd(entries []EpochEntry, end int64) []EpochEntry {
	i := len(entries)
	for i > 0 && entries[i-1].StartOffset >= end {
		i--
	}
	return entries[:i]
}

// epochCache is a partition's leader epoch cache, kept only for the
// partitions of a LogDir (PartitionOptions.LeaderEpochs).
type epochCache struct {
	mu      sync.Mutex
	on      bool // kept and written
	entries []EpochEntry
	// latest is the last entry's epoch (0 with none): the current leader
	// epoch, which appends stamp on their batches as a leader does.
	latest atomic.Int32
}

// setEntriesLocked installs entries; callers hold c.mu.
func (c *epochCache) setEntriesLocked(entries []EpochEntry) {
	c.entries = entries
	var e int32
	if n := len(entries); n > 0 {
		e = entries[n-1].Epoch
	}
	c.latest.Store(e)
}

// loadLeaderEpochs reads the partition's leader-epoch-checkpoint, cuts it
// to the log's offsets as Kafka's loader does, and, when no epoch is
// known, starts epoch 0 at the log end, as a broker that becomes the
// leader of the partition does; it writes the file when that changed it.
// A file that does not parse is left as it is (nothing is lost) and not
// maintained until it is fixed or removed.
func (p *Partition) loadLeaderEpochs() error {
	if !p.opts.LeaderEpochs || p.opts.ReadOnly {
		return nil
	}
	c := &p.epochs
	c.mu.Lock()
	defer c.mu.Unlock()
	path := p.path(LeaderEpochCheckpointFile)
	data, err := vfs.ReadFile(p.fs, path)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("engine: read %s: %w", path, err)
	}
	entries, perr := ParseLeaderEpochCheckpoint(data)
	if perr != nil {
		p.logger.Warn("leaving an unreadable leader-epoch-checkpoint alone; topicfs does not keep it until it is removed", "file", path, "err", perr)
		return nil
	}
	c.on = true
	kept := TruncateEpochsFromEnd(TruncateEpochsFromStart(entries, p.logStart.Load()), p.logEnd.Load())
	if len(kept) == 0 {
		kept = []EpochEntry{{Epoch: 0, StartOffset: p.logEnd.Load()}}
	}
	if err == nil && len(kept) == len(entries) && (len(kept) == 0 || kept[0] == entries[0]) {
		c.setEntriesLocked(kept) // unchanged: no write
		return nil
	}
	return p.writeEpochsLocked(kept)
}

// truncateEpochsFromStart applies a new log start offset to the cache.
// The segments are gone already; a failed write is logged, and the next
// open cuts the file the same way.
func (p *Partition) truncateEpochsFromStart(start int64) {
	c := &p.epochs
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.on {
		return
	}
	kept := TruncateEpochsFromStart(c.entries, start)
	if len(kept) == len(c.entries) && (len(kept) == 0 || kept[0] == c.entries[0]) {
		return
	}
	if err := p.writeEpochsLocked(kept); err != nil {
		p.logger.Warn("updating leader-epoch-checkpoint", "err", err)
	}
}

// writeEpochsLocked replaces the file (atomically) and the cache with
// entries; callers hold p.epochs.mu.
func (p *Partition) writeEpochsLocked(entries []EpochEntry) error {
	path := p.path(LeaderEpochCheckpointFile)
	if err := vfs.WriteFileAtomic(p.fs, path, FormatLeaderEpochCheckpoint(entries), 0o644); err != nil {
		return fmt.Errorf("engine: write %s: %w", path, err)
	}
	p.epochs.setEntriesLocked(entries)
	return nil
}

// LatestEpoch returns the partition's current leader epoch: the last
// entry's of its leader epoch cache, 0 when it keeps none. Local appends
// stamp it as partitionLeaderEpoch; AppendAsFollower keeps the leader's.
func (p *Partition) LatestEpoch() int32 { return p.epochs.latest.Load() }

// LeaderEpochs returns the partition's leader epoch entries (nil when the
// partition keeps none: not part of a read-write LogDir).
func (p *Partition) LeaderEpochs() []EpochEntry {
	p.epochs.mu.Lock()
	defer p.epochs.mu.Unlock()
	return append([]EpochEntry(nil), p.epochs.entries...)
}

// TopicID is a Kafka topic id (a UUID).
type TopicID [16]byte

// String is the id as Kafka prints and stores it: URL-safe base64 without
// padding (22 characters).
func (id TopicID) String() string { return base64.RawURLEncoding.EncodeToString(id[:]) }

// NewTopicID returns a random topic id as Kafka's Uuid.randomUuid makes
// one: a version 4 UUID that is neither the zero id nor the metadata
// topic's (1), and whose text does not start with '-'.
func NewTopicID() (TopicID, error) {
	for {
		var id TopicID
		if _, err := rand.Read(id[:]); err != nil {
			return id, fmt.Errorf("engine: topic id: %w", err)
		}
		id[6] = id[6]&0x0f | 0x40 // version 4
		id[8] = id[8]&0x3f | 0x80 // IETF variant
		if !strings.HasPrefix(id.String(), "-") {
			return id, nil // version bits rule out the zero and metadata ids
		}
	}
}

// FormatPartitionMetadata is partition.metadata as Kafka writes it: two
// lines, no final newline.
func FormatPartitionMetadata(id TopicID) []byte {
	return []byte("version: 0\ntopic_id: " + id.String())
}

// ReadPartitionMetadata reads the topic id of a partition directory's
// partition.metadata; ok is false when the file is absent or holds no
// version 0 id.
func ReadPartitionMetadata(fsys vfs.FS, dir string) (id TopicID, ok bool) {
	data, err := vfs.ReadFile(fsys, filepath.Join(dir, PartitionMetadataFile))
	if err != nil {
		return id, false
	}
	version := false
	for _, line := range strings.Split(string(data), "\n") {
		k, v, _ := strings.Cut(strings.TrimSpace(line), ":")
		v = strings.TrimSpace(v)
		switch k {
		case "version":
			version = v == "0"
		case "topic_id":
			b, err := base64.RawURLEncoding.DecodeString(v)
			if err == nil && len(b) == len(id) {
				copy(id[:], b)
				ok = true
			}
		}
	}
	return id, ok && version
}

// writePartitionMetadata writes dir/partition.metadata atomically.
func writePartitionMetadata(fsys vfs.FS, dir string, id TopicID) error {
	path := filepath.Join(dir, PartitionMetadataFile)
	if err := vfs.WriteFileAtomic(fsys, path, FormatPartitionMetadata(id), 0o644); err != nil {
		return fmt.Errorf("engine: write %s: %w", path, err)
	}
	return nil
}

// writeTopicID writes partition.metadata into the directories of
// partitions [from, to) of topic that lack one, with the topic's id: that
// of its other partitions, or a new one for a new topic (from 0). A topic
// made before topicfs wrote the file gets none, so its partitions agree.
// Each partition's file is read once.
func (d *LogDir) writeTopicID(topic string, from, to int) error {
	var id TopicID
	known := false
	lacking := make([]int, 0, to-from)
	for p := range to {
		pid, ok := ReadPartitionMetadata(d.fs, d.partitionDir(topic, p))
		if ok && !known {
			id, known = pid, true
		}
		if !ok && p >= from {
			lacking = append(lacking, p)
		}
	}
	if !known {
		if from > 0 {
			return nil
		}
		var err error
		if id, err = NewTopicID(); err != nil {
			return err
		}
	}
	for _, p := range lacking {
		if err := writePartitionMetadata(d.fs, d.partitionDir(topic, p), id); err != nil {
			return err
		}
	}
	return nil
}
