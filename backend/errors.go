package backend

import (
	"errors"

	"github.com/topicfs/topicfs/engine/record"
)

// Sentinel errors every backend wraps, so that the file tree maps each to
// one errno whatever stores the topic (fusefs/errno.go; README, Errors).
// Test with errors.Is.
var (
	// ErrCorrupt reports stored bytes that fail a CRC or structural check.
	ErrCorrupt = record.ErrCorrupt
	// ErrOffsetOutOfRange reports an offset below the log start or above the end.
	ErrOffsetOutOfRange = errors.New("offset out of range")
	// ErrRecordTooLarge reports a batch above max.message.bytes (Kafka's
	// MESSAGE_TOO_LARGE, RECORD_LIST_TOO_LARGE).
	ErrRecordTooLarge = errors.New("record larger than max.message.bytes")
	// ErrInvalidConfig reports an unknown setting or a value it does not accept.
	ErrInvalidConfig = errors.New("invalid config")
	// ErrInvalidTopic reports a topic name outside Kafka's rule.
	ErrInvalidTopic = errors.New("invalid topic name")
	// ErrTopicExists reports a create of a topic that already exists.
	ErrTopicExists = errors.New("topic already exists")
	// ErrUnknownTopic reports a topic that does not exist.
	ErrUnknownTopic = errors.New("unknown topic")
	// ErrUnknownPartition reports a partition that does not exist.
	ErrUnknownPartition = errors.New("unknown partition")
	// ErrClosed reports use of a closed partition or backend (a deleted
	// topic, say).
	ErrClosed = errors.New("closed")
	// ErrReadOnly reports a change to a backend opened read-only.
	ErrReadOnly = errors.New("read-only")
	// ErrInvalidRecord reports a record the store refuses as such (Kafka's
	// INVALID_RECORD: a keyless record to a compacted topic).
	ErrInvalidRecord = errors.New("invalid record")
	// ErrNotEnoughReplicas reports a write refused because fewer replicas
	// than min.insync.replicas are in sync.
	ErrNotEnoughReplicas = errors.New("not enough in-sync replicas")
	// ErrNotAuthorized reports an operation the credentials may not do.
	ErrNotAuthorized = errors.New("not authorized")
	// ErrTimedOut reports a request that did not complete within its
	// timeout (request.timeout.ms, delivery.timeout.ms).
	ErrTimedOut = errors.New("timed out")
	// ErrUnavailable reports that no broker could be reached.
	ErrUnavailable = errors.New("unavailable")
	// ErrUnknownCursor reports a cursor that has no committed position.
	ErrUnknownCursor = errors.New("unknown cursor")
	// ErrCursorBusy reports a cursor another reader holds: a consumer
	// group with active members refuses a commit from outside it.
	ErrCursorBusy = errors.New("cursor in use")
)
