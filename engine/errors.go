package engine

import (
	"errors"
	"fmt"

	"github.com/topicfs/topicfs/backend"
)

// Sentinel errors. Callers test with errors.Is; the engine wraps them with
// context (segment, position, offset). Those a backend user sees wrap
// backend's sentinels (errors.Is(engine.ErrUnknownTopic,
// backend.ErrUnknownTopic) holds), which fusefs/errno.go maps to errnos.
var (
	// ErrCorrupt reports bytes on disk that fail a CRC or structural check.
	ErrCorrupt = backend.ErrCorrupt
	// ErrOffsetOutOfRange reports an offset below the log start or above the log end.
	ErrOffsetOutOfRange = fmt.Errorf("engine: %w", backend.ErrOffsetOutOfRange)
	// ErrRecordTooLarge reports a record whose batch exceeds max.message.bytes.
	ErrRecordTooLarge = fmt.Errorf("engine: %w", backend.ErrRecordTooLarge)
	// ErrInvalidConfig reports an unknown setting or a value it does not accept.
	ErrInvalidConfig = fmt.Errorf("engine: %w", backend.ErrInvalidConfig)
	// ErrInvalidTopic reports a topic name outside Kafka's rule.
	ErrInvalidTopic = fmt.Errorf("engine: %w", backend.ErrInvalidTopic)
	// ErrTopicExists reports a create of a topic that already exists.
	ErrTopicExists = fmt.Errorf("engine: %w", backend.ErrTopicExists)
	// ErrUnknownTopic reports a topic that does not exist.
	ErrUnknownTopic = fmt.Errorf("engine: %w", backend.ErrUnknownTopic)
	// ErrUnknownPartition reports a partition that does not exist.
	ErrUnknownPartition = fmt.Errorf("engine: %w", backend.ErrUnknownPartition)
	// ErrClosed reports use of a closed partition or log directory.
	ErrClosed = fmt.Errorf("engine: %w", backend.ErrClosed)
	// ErrSealed reports a write to a sealed segment.
	ErrSealed = errors.New("engine: segment sealed")
	// ErrReadOnly reports a write to a log opened read-only.
	ErrReadOnly = fmt.Errorf("engine: %w", backend.ErrReadOnly)
	// ErrConflict reports a segment replacement that raced with another change.
	ErrConflict = errors.New("engine: conflicting change")
	// ErrLocked reports a data directory already in use by another process.
	ErrLocked = errors.New("engine: data directory locked")

	// The producer-state errors of AppendBatch (Kafka's error codes). Each
	// wraps backend.ErrInvalidRecord: the batch is refused, nothing of it
	// is stored.

	// ErrOutOfOrderSequence reports a producer's batch whose sequence does
	// not follow the producer's last one (OUT_OF_ORDER_SEQUENCE_NUMBER).
	ErrOutOfOrderSequence = fmt.Errorf("engine: out of order sequence number: %w", backend.ErrInvalidRecord)
	// ErrInvalidProducerEpoch reports a batch or marker of an epoch below
	// the producer's (INVALID_PRODUCER_EPOCH): a fenced producer.
	ErrInvalidProducerEpoch = fmt.Errorf("engine: invalid producer epoch: %w", backend.ErrInvalidRecord)
	// ErrInvalidTxnState reports a non-transactional batch of a producer
	// whose transaction is open (INVALID_TXN_STATE).
	ErrInvalidTxnState = fmt.Errorf("engine: invalid transaction state: %w", backend.ErrInvalidRecord)
	// ErrCoordinatorFenced reports a COMMIT or ABORT marker from a
	// transaction coordinator epoch below the producer's last marker's
	// (TRANSACTION_COORDINATOR_FENCED).
	ErrCoordinatorFenced = fmt.Errorf("engine: transaction coordinator fenced: %w", backend.ErrInvalidRecord)
)
