package cluster

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"syscall"

	"github.com/topicfs/topicfs/backend"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

// sentinels are the backend errors a mapped error may already wrap.
var sentinels = []error{
	backend.ErrCorrupt, backend.ErrOffsetOutOfRange, backend.ErrRecordTooLarge,
	backend.ErrInvalidConfig, backend.ErrInvalidTopic, backend.ErrTopicExists,
	backend.ErrUnknownTopic, backend.ErrUnknownPartition, backend.ErrClosed,
	backend.ErrReadOnly, backend.ErrInvalidRecord, backend.ErrNotEnoughReplicas,
	backend.ErrNotAuthorized, backend.ErrTimedOut, backend.ErrUnavailable,
	backend.ErrUnknownCursor, backend.ErrCursorBusy,
}

// kerrSentinels maps Kafka's error codes to the backend's errors, so that
// each means the same errno as on one disk (fusefs/errno.go).
var kerrSentinels = map[*kerr.Error]error{
	kerr.MessageTooLarge: backend.ErrRecordTooLarge,
	// A cursor is a consumer group: one with members refuses commits and
	// deletes from outside it (cursors.go).
	kerr.UnknownMemberID:                    backend.ErrCursorBusy,
	kerr.IllegalGeneration:                  backend.ErrCursorBusy,
	kerr.RebalanceInProgress:                backend.ErrCursorBusy,
	kerr.GroupSubscribedToTopic:             backend.ErrCursorBusy,
	kerr.NonEmptyGroup:                      backend.ErrCursorBusy,
	kerr.GroupIDNotFound:                    backend.ErrUnknownCursor,
	kerr.RecordListTooLarge:                 backend.ErrRecordTooLarge,
	kerr.InvalidRecord:                      backend.ErrInvalidRecord,
	kerr.CorruptMessage:                     backend.ErrCorrupt,
	kerr.NotEnoughReplicas:                  backend.ErrNotEnoughReplicas,
	kerr.NotEnoughReplicasAfterAppend:       backend.ErrNotEnoughReplicas,
	kerr.TopicAuthorizationFailed:           backend.ErrNotAuthorized,
	kerr.ClusterAuthorizationFailed:         backend.ErrNotAuthorized,
	kerr.GroupAuthorizationFailed:           backend.ErrNotAuthorized,
	kerr.TransactionalIDAuthorizationFailed: backend.ErrNotAuthorized,
	kerr.DelegationTokenAuthorizationFailed: backend.ErrNotAuthorized,
	kerr.SaslAuthenticationFailed:           backend.ErrNotAuthorized,
	kerr.RequestTimedOut:                    backend.ErrTimedOut,
	kerr.UnknownTopicOrPartition:            backend.ErrUnknownTopic,
	kerr.UnknownTopicID:                     backend.ErrUnknownTopic,
	kerr.TopicAlreadyExists:                 backend.ErrTopicExists,
	kerr.InvalidTopicException:              backend.ErrInvalidTopic,
	kerr.InvalidConfig:                      backend.ErrInvalidConfig,
	kerr.InvalidPartitions:                  backend.ErrInvalidConfig,
	kerr.InvalidReplicationFactor:           backend.ErrInvalidConfig,
	kerr.InvalidReplicaAssignment:           backend.ErrInvalidConfig,
	kerr.PolicyViolation:                    backend.ErrInvalidConfig,
	kerr.OffsetOutOfRange:                   backend.ErrOffsetOutOfRange,
	kerr.LeaderNotAvailable:                 backend.ErrUnavailable,
	kerr.NotLeaderForPartition:              backend.ErrUnavailable,
	kerr.BrokerNotAvailable:                 backend.ErrUnavailable,
	kerr.ReplicaNotAvailable:                backend.ErrUnavailable,
	kerr.NotController:                      backend.ErrUnavailable,
	kerr.KafkaStorageError:                  backend.ErrUnavailable,
	kerr.NetworkException:                   backend.ErrUnavailable,
	kerr.CoordinatorNotAvailable:            backend.ErrUnavailable,
	kerr.FencedLeaderEpoch:                  backend.ErrUnavailable,
	kerr.UnknownLeaderEpoch:                 backend.ErrUnavailable,
	kerr.ThrottlingQuotaExceeded:            backend.ErrUnavailable,
	kerr.UnstableOffsetCommit:               backend.ErrUnavailable,
	kerr.OffsetNotAvailable:                 backend.ErrUnavailable,
	kerr.EligibleLeadersNotAvailable:        backend.ErrUnavailable,
	kerr.PreferredLeaderNotAvailable:        backend.ErrUnavailable,
	kerr.ListenerNotFound:                   backend.ErrUnavailable,
	kerr.UnsupportedForMessageFormat:        backend.ErrInvalidRecord,
	kerr.InvalidTimestamp:                   backend.ErrInvalidRecord,
	kerr.TopicDeletionDisabled:              backend.ErrNotAuthorized,
	kerr.UnsupportedSaslMechanism:           backend.ErrNotAuthorized,
	kerr.IllegalSaslState:                   backend.ErrNotAuthorized,
	kerr.InvalidRequiredAcks:                backend.ErrInvalidConfig,
	kerr.InvalidRequest:                     backend.ErrInvalidConfig,
	kerr.UnsupportedVersion:                 backend.ErrInvalidConfig,
}

// kgoConnDied is the text of the error kgo returns for a request whose
// broker connection died (it does not export it).
const kgoConnDied = "the broker connection has died"

// sentinelOf returns the backend error err means, or nil if it means none.
func sentinelOf(err error) error {
	var ke *kerr.Error
	var ne net.Error
	switch {
	case err == nil:
		return nil
	case errors.As(err, &ke):
		if s := kerrSentinels[ke]; s != nil {
			return s
		}
	case errors.Is(err, kgo.ErrRecordTimeout), errors.Is(err, context.DeadlineExceeded):
		return backend.ErrTimedOut
	case errors.Is(err, kgo.ErrClientClosed):
		return backend.ErrClosed
	case strings.Contains(err.Error(), kgoConnDied):
		return backend.ErrUnavailable
	case errors.Is(err, syscall.ECONNREFUSED), errors.Is(err, syscall.ECONNRESET),
		errors.Is(err, syscall.EHOSTUNREACH), errors.Is(err, syscall.ENETUNREACH),
		errors.Is(err, syscall.EPIPE), errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF):
		return backend.ErrUnavailable
	case errors.As(err, &ne):
		if ne.Timeout() {
			return backend.ErrTimedOut
		}
		return backend.ErrUnavailable
	}
	return nil
}

// mapErr returns err, marked with the backend error it means, with op
// (and what it worked on) in front. An error that already wraps a backend
// error, or means none, is only prefixed. A context deadline is one of the
// backend's own timeouts: ErrTimedOut, no longer wrapping
// context.DeadlineExceeded (which the file tree takes for an interrupted
// request).
func mapErr(op string, err error) error {
	if err == nil {
		return nil
	}
	for _, s := range sentinels {
		if errors.Is(err, s) {
			return fmt.Errorf("cluster: %s: %w", op, err)
		}
	}
	if errors.Is(err, context.DeadlineExceeded) {
		return fmt.Errorf("cluster: %s: %w: %v", op, backend.ErrTimedOut, err)
	}
	if s := sentinelOf(err); s != nil {
		return fmt.Errorf("cluster: %s: %w: %w", op, s, err)
	}
	return fmt.Errorf("cluster: %s: %w", op, err)
}

// codeErr returns the error of a response's error code (nil for none),
// with the broker's message if it sent one.
func codeErr(code int16, msg *string) error {
	err := kerr.ErrorForCode(code)
	if err == nil {
		return nil
	}
	if msg != nil && *msg != "" {
		return fmt.Errorf("%w (%s)", err, *msg)
	}
	return err
}

// single returns the error of the one entry a response must hold (the
// topic or config resource a request named), or says that it holds
// another number of them.
func single[T any](entries []T, code func(*T) (int16, *string)) error {
	if len(entries) != 1 {
		return fmt.Errorf("the broker answered with %d entries, not 1", len(entries))
	}
	return codeErr(code(&entries[0]))
}
