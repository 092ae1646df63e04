package backend

import (
	"context"

	"github.com/topicfs/topicfs/engine/index"
	"github.com/topicfs/topicfs/engine/record"
)

// Backend is where the topics of one mount live: the local engine
// (backend/local) or a Kafka cluster. Its methods are safe for concurrent
// use. Errors wrap the sentinels of errors.go.
type Backend interface {
	// Topics returns the names of the topics, sorted.
	Topics(ctx context.Context) ([]string, error)
	// Topic returns the topic name (ErrUnknownTopic if there is none).
	Topic(ctx context.Context, name string) (Topic, error)
	// CreateTopic creates a topic with partitions partitions (0: the
	// backend's default, num.partitions).
	CreateTopic(ctx context.Context, name string, partitions int) (Topic, error)
	// DeleteTopic deletes a topic and its records.
	DeleteTopic(ctx context.Context, name string) error
	// ReadOnly reports whether the backend refuses every change
	// (ErrReadOnly).
	ReadOnly() bool
}

// Topic is one topic of a Backend. A Topic value stays usable after the
// topic is deleted: its methods then fail with ErrUnknownTopic or
// ErrClosed.
type Topic interface {
	Name() string
	NumPartitions() int
	// Partition returns partition id (ErrUnknownPartition if there is none).
	Partition(id int) (Partition, error)
	// Settings returns what the file tree needs of the topic's
	// configuration to frame, check and render records.
	Settings() Settings
	// ConfigText renders the topic's configuration as the config file
	// shows it: name=value lines, sorted.
	ConfigText(ctx context.Context) ([]byte, error)
	// AlterConfig validates every name=value and then applies them all, or
	// changes nothing and returns an error wrapping ErrInvalidConfig (or
	// the backend's failure). num.partitions adds partitions; it never
	// shrinks.
	AlterConfig(ctx context.Context, kv map[string]string) error
	// AddPartitions grows the topic to total partitions.
	AddPartitions(ctx context.Context, total int) error
}

// Settings are the configuration values the file tree applies itself.
type Settings struct {
	ParseKey     bool   // parse.key: plain appends split key and value at KeySeparator
	PrintKey     bool   // print.key: plain views print the key and KeySeparator
	KeySeparator string // key.separator
	NullMarker   string // null.marker: how a null key or value reads and writes
	BatchSize    int64  // batch.size: bytes an append file buffers per partition
	LingerMs     int64  // linger.ms: how long a partial batch may wait
	// MaxRecordBytes is the largest batch the backend accepts: Kafka's
	// max.message.bytes, bounded by what one segment holds.
	MaxRecordBytes int64
	// Uncompressed reports that batches are stored as encoded
	// (compression.type none, uncompressed or producer), so their encoded
	// size is their stored size.
	Uncompressed bool
	// Compacted reports that cleanup.policy includes compact: records
	// need keys (ErrKeyRequired).
	Compacted bool
	// CursorStart is cursor.start: where a cursor read for the first
	// time starts, "earliest" (the log start; also "") or "latest".
	CursorStart string
}

// Offsets are a partition's bounds as a reader sees them.
type Offsets struct {
	// LogStart is the first offset still retained.
	LogStart int64
	// End is the offset the next record readers will see gets: the log
	// end on one disk, the high watermark in a cluster.
	End int64
}

// Partition is one partition of a Topic.
type Partition interface {
	Topic() string
	ID() int
	// AppendEach appends each group of records as its own batch (more if
	// a group exceeds Settings.MaxRecordBytes), in order, stopping at the
	// first error; it returns the first and last offsets assigned.
	AppendEach(ctx context.Context, groups [][]record.Record) (first, last int64, err error)
	// AppendLines appends each '\n'-terminated line of lines as a
	// value-only record, in batches of about batchBytes.
	AppendLines(ctx context.Context, lines []byte, batchBytes int) (first, last int64, err error)
	// Sync returns once every record appended before it is durable
	// (fsynced locally, acknowledged by the cluster).
	Sync(ctx context.Context) error
	// Offsets returns the partition's current bounds.
	Offsets(ctx context.Context) (Offsets, error)
	// OffsetForTime returns the first offset whose timestamp is >= ts, or
	// Offsets().End if there is none.
	OffsetForTime(ctx context.Context, ts int64) (int64, error)
	// Snapshot returns the segments holding the records from offset from
	// (FromStart: the log start) to the end as it is now, retained until
	// Release. Readers read batches from them; nothing they hold changes
	// until Release.
	Snapshot(ctx context.Context, from int64) (*Snapshot, error)
	// Subscribe returns a channel that receives a value (never blocking
	// the writer; it has room for one) after the partition grows, and a
	// function that ends the subscription.
	Subscribe() (<-chan struct{}, func())
}

// Enqueuer is a Partition whose appends travel to a remote log and can be
// handed over without waiting for them (cluster mode: the producer keeps
// its requests full instead of draining at every call). The records are
// copied: the caller may reuse its buffers once Enqueue returns. Records
// of successive calls are appended in call order, and a failure fails
// every record handed over after it that was not yet appended, as with
// any idempotent Kafka producer.
type Enqueuer interface {
	EnqueueEach(ctx context.Context, groups [][]record.Record) (Pending, error)
	EnqueueLines(ctx context.Context, lines []byte) (Pending, error)
}

// Pending is the outcome of records handed to an Enqueuer.
type Pending interface {
	// Done is closed when every record is acknowledged or failed, or its
	// delivery deadline passed.
	Done() <-chan struct{}
	// Wait returns the first and last offsets assigned, or the first
	// failure, as AppendEach does; it returns by the delivery deadline.
	Wait() (first, last int64, err error)
}

// Verifier is a Topic that can make sure it is still the topic of its
// name: in a cluster another client may delete a topic and make it again
// under the name, which a lookup that reuses what it read would miss.
type Verifier interface {
	// Verify reads the topic again if the topic of its name is another
	// one now (ErrUnknownTopic if there is none).
	Verify(ctx context.Context) error
}

// VerifyTopic calls t's Verify where it has one.
func VerifyTopic(ctx context.Context, t Topic) error {
	if v, ok := t.(Verifier); ok {
		return v.Verify(ctx)
	}
	return nil
}

// OffsetsLister is a Topic that lists the offsets of many partitions in
// one round (a cluster: one ListOffsets per leader, not two per
// partition).
type OffsetsLister interface {
	PartitionOffsets(ctx context.Context, ids []int) (map[int]Offsets, error)
}

// TopicOffsets returns the offsets of t's partitions ids: in one round
// where t is an OffsetsLister, else partition by partition.
func TopicOffsets(ctx context.Context, t Topic, ids []int) (map[int]Offsets, error) {
	if ol, ok := t.(OffsetsLister); ok {
		return ol.PartitionOffsets(ctx, ids)
	}
	out := make(map[int]Offsets, len(ids))
	for _, id := range ids {
		p, err := t.Partition(id)
		if err != nil {
			return nil, err
		}
		if out[id], err = p.Offsets(ctx); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// TopicSnapshotter is a Topic that takes Snapshots of many partitions,
// each from its offset in from, with one listing of their ends.
type TopicSnapshotter interface {
	Snapshots(ctx context.Context, from map[int]int64) (map[int]*Snapshot, error)
}

// TopicSnapshots returns a Snapshot of each partition in from, from its
// offset there (Partition.Snapshot): in one round where t is a
// TopicSnapshotter, else partition by partition. The caller releases
// them; on an error none is left held.
func TopicSnapshots(ctx context.Context, t Topic, from map[int]int64) (map[int]*Snapshot, error) {
	if ts, ok := t.(TopicSnapshotter); ok {
		return ts.Snapshots(ctx, from)
	}
	out := make(map[int]*Snapshot, len(from))
	for id, off := range from {
		p, err := t.Partition(id)
		var snap *Snapshot
		if err == nil {
			snap, err = p.Snapshot(ctx, off)
		}
		if err != nil {
			ReleaseSnapshots(out)
			return nil, err
		}
		out[id] = snap
	}
	return out, nil
}

// ReleaseSnapshots releases every Snapshot of snaps.
func ReleaseSnapshots(snaps map[int]*Snapshot) {
	for _, s := range snaps {
		s.Release()
	}
}

// TailSnapshotter is a Partition that takes a Snapshot of its last n
// records (fewer if it holds fewer) in one step: a remote log lists its
// bounds once, not once to find the start and again for the snapshot.
type TailSnapshotter interface {
	SnapshotLast(ctx context.Context, n int64) (*Snapshot, error)
}

// Streamer is a Partition whose Snapshot must fetch the records it lacks
// (cluster mode's local copy). SnapshotStream returns as soon as records
// from offset from on (FromStart: the log start) are there, with a
// Snapshot of them, and goes on fetching in the background up to the end
// as it was at the call; the Stream hands out the rest as it arrives. A
// reader can start on the first records instead of waiting for the whole
// range. stream is nil when the Snapshot already reaches that end.
type Streamer interface {
	SnapshotStream(ctx context.Context, from int64) (snap *Snapshot, stream Stream, err error)
}

// Stream is the rest of a SnapshotStream.
type Stream interface {
	// Next waits until records past offset past are there, or the stream
	// has ended, and returns a Snapshot from the stream's start to where
	// they are (its Offsets.End); last says it reaches the stream's end.
	// Records of a transaction whose outcome is not known yet are never
	// in it. After last, or an error, Next is not called again.
	Next(ctx context.Context, past int64) (snap *Snapshot, last bool, err error)
	// Close stops the fetching (what arrived stays) and lets go of the
	// stream. Safe to call more than once.
	Close()
}

// RecordReader is a Partition that reads one record by its offset in
// place (the local engine: one index lookup and one read of the record's
// bytes) instead of through a Snapshot.
type RecordReader interface {
	// ReadRecord calls fn with the first record at or after offset and the
	// header of its batch (Raw nil); ErrOffsetOutOfRange if there is none.
	// What fn gets is valid only during the call.
	ReadRecord(ctx context.Context, offset int64, fn func(b *record.Batch, r *record.Record) error) error
}

// FromStart asks Snapshot for every retained record.
const FromStart = -1

// Snapshot is a partition's segments at one moment, oldest first.
type Snapshot struct {
	Segments []Segment
	Offsets  Offsets
	release  func()
}

// NewSnapshot returns a Snapshot of segs whose Release calls release (nil:
// nothing to release).
func NewSnapshot(segs []Segment, offs Offsets, release func()) *Snapshot {
	return &Snapshot{Segments: segs, Offsets: offs, release: release}
}

// Release lets go of the segments. It is safe to call more than once.
func (s *Snapshot) Release() {
	if s.release != nil {
		s.release()
		s.release = nil
	}
}

// Segment is a file of record batches in Kafka's on-disk format, as a
// reader sees it. The bytes below Size never change while it is retained.
type Segment interface {
	// BaseOffset is the offset of the segment's first record (its name).
	BaseOffset() int64
	// NextOffset is the offset after its last record.
	NextOffset() int64
	// Size is the number of committed bytes.
	Size() int64
	// ReadBatch reads and verifies the batch at byte position pos (buf,
	// if large enough, holds its bytes).
	ReadBatch(pos int64, buf []byte) (record.Batch, error)
	// ReadAt reads committed bytes, as io.ReaderAt.
	ReadAt(p []byte, off int64) (int, error)
	// FindOffset returns the byte position of the batch holding target.
	FindOffset(target int64) (int64, error)
	// AbortedTxns lists the aborted transactions the segment's
	// transaction index knows.
	AbortedTxns() []index.AbortedTxn
	// Retain and Release count holders; bytes stay readable until the
	// last Release.
	Retain()
	Release()
	// LogPath names the segment in logs and errors.
	LogPath() string
}

// Cursors is a Backend that keeps named, durable read positions per topic
// (the cursors/ directories): a map from partition to the offset of the
// next record to read, as a Kafka consumer group commits them. A commit
// that returned survives a crash. Names are checked by the caller
// (fusefs: Kafka's topic-name characters).
type Cursors interface {
	// Cursor returns the committed positions of cursor name on topic, and
	// whether it has any.
	Cursor(ctx context.Context, topic, name string) (map[int]int64, bool, error)
	// CommitCursor sets the positions of the partitions in offs, leaving
	// the cursor's other partitions as they are, all or none.
	// ErrCursorBusy: another consumer holds it (a group with members).
	CommitCursor(ctx context.Context, topic, name string, offs map[int]int64) error
	// DeleteCursor forgets the positions of partitions (nil: all) of
	// cursor name on topic; ErrUnknownCursor if it has none of them.
	DeleteCursor(ctx context.Context, topic, name string, partitions []int) error
	// ListCursors returns every cursor of topic with its positions.
	ListCursors(ctx context.Context, topic string) (map[string]map[int]int64, error)
}
