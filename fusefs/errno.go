package fusefs

import (
	"context"
	"errors"
	"log/slog"
	"syscall"

	"github.com/topicfs/topicfs/backend"
	"github.com/topicfs/topicfs/engine/record"
)

// errnoTable maps backend errors (every backend wraps backend's sentinels) to the errno a user sees, following the error
// table in README.md (The mount). It is walked in order with errors.Is, so wrapped
// errors ("engine: unknown topic: orders") map like their sentinels. Errnos
// that the file system passes through wrapped (ENOSPC, EIO, ...) are found by
// errors.As on syscall.Errno after the table.
var errnoTable = []struct {
	err   error
	errno syscall.Errno
}{
	{backend.ErrUnknownTopic, syscall.ENOENT},
	{backend.ErrUnknownPartition, syscall.ENOENT},
	{backend.ErrUnknownCursor, syscall.ENOENT},
	{backend.ErrCursorBusy, syscall.EBUSY},
	{backend.ErrOffsetOutOfRange, syscall.ENOENT},
	{backend.ErrRecordTooLarge, syscall.EMSGSIZE},
	{backend.ErrInvalidConfig, syscall.EINVAL},
	{backend.ErrInvalidTopic, syscall.EINVAL},
	{backend.ErrInvalidRecord, syscall.EINVAL},
	{backend.ErrTopicExists, syscall.EEXIST},
	{backend.ErrReadOnly, syscall.EROFS},
	{backend.ErrCorrupt, syscall.EIO},
	{record.ErrTruncated, syscall.EIO},  // a batch running past the committed end: corrupt
	{backend.ErrClosed, syscall.ENOENT}, // the topic was deleted under an open handle
	{backend.ErrNotEnoughReplicas, syscall.EIO},
	{backend.ErrNotAuthorized, syscall.EACCES},
	{backend.ErrTimedOut, syscall.ETIMEDOUT},
	{backend.ErrUnavailable, syscall.EHOSTUNREACH},
	{errParse, syscall.EINVAL},
	{errTooLong, syscall.EMSGSIZE},
	{errKeyRequired, syscall.EINVAL},
	{context.Canceled, syscall.EINTR},
	{context.DeadlineExceeded, syscall.EINTR},
}

// errParse reports a malformed append line, config line or view name.
var errParse = errors.New("fusefs: malformed input")

// errKeyRequired reports a record without a key written to a compacted topic
// (Kafka's InvalidRecordException "Compacted topic cannot accept message
// without key").
var errKeyRequired = errors.New("fusefs: compacted topic cannot accept a record without a key")

// errTooLong reports a record (or an unterminated line) above max.message.bytes.
var errTooLong = errors.New("fusefs: record larger than max.message.bytes")

// toErrno is the one place where an error becomes an errno. nil is 0
// (success). Errors it does not know are logged and become EIO, so a bug
// shows up in the log instead of as a misleading errno.
func toErrno(log *slog.Logger, op string, err error) syscall.Errno {
	if err == nil {
		return 0
	}
	for _, e := range errnoTable {
		if errors.Is(err, e.err) {
			return e.errno
		}
	}
	var errno syscall.Errno
	if errors.As(err, &errno) && errno != 0 {
		return errno
	}
	if log == nil {
		log = slog.Default()
	}
	log.Error("fusefs: unmapped error, answering EIO", "op", op, "err", err)
	return syscall.EIO
}
