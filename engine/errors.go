package engine

import (
	"errors"

	"github.com/topicfs/topicfs/engine/record"
)

// Sentinel errors. Callers test with errors.Is; the engine wraps them with
// context (segment, position, offset). fusefs/errno.go maps each to an errno.
var (
	// ErrCorrupt reports bytes on disk that fail a CRC or structural check.
	ErrCorrupt = record.ErrCorrupt
	// ErrOffsetOutOfRange reports an offset below the log start or above the log end.
	ErrOffsetOutOfRange = errors.New("engine: offset out of range")
	// ErrRecordTooLarge reports a record whose batch exceeds max.message.bytes.
	ErrRecordTooLarge = errors.New("engine: record larger than max.message.bytes")
	// ErrInvalidConfig reports an unknown setting or a value it does not accept.
	ErrInvalidConfig = errors.New("engine: invalid config")
	// ErrInvalidTopic reports a topic name outside Kafka's rule.
	ErrInvalidTopic = errors.New("engine: invalid topic name")
	// ErrTopicExists reports a create of a topic that already exists.
	ErrTopicExists = errors.New("engine: topic already exists")
	// ErrUnknownTopic reports a topic that does not exist.
	ErrUnknownTopic = errors.New("engine: unknown topic")
	// ErrUnknownPartition reports a partition that does not exist.
	ErrUnknownPartition = errors.New("engine: unknown partition")
	// ErrClosed reports use of a closed partition or log directory.
	ErrClosed = errors.New("engine: closed")
	// ErrSealed reports a write to a sealed segment.
	ErrSealed = errors.New("engine: segment sealed")
	// ErrReadOnly reports a write to a log opened read-only.
	ErrReadOnly = errors.New("engine: read-only")
	// ErrConflict reports a segment replacement that raced with another change.
	ErrConflict = errors.New("engine: conflicting change")
	// ErrLocked reports a data directory already in use by another process.
	ErrLocked = errors.New("engine: data directory locked")
)
