package fusefs

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/topicfs/topicfs/engine"
)

func TestToErrno(t *testing.T) {
	log := slog.New(slog.DiscardHandler)
	tests := []struct {
		name string
		err  error
		want syscall.Errno
	}{
		{"nil", nil, 0},
		{"unknown topic wrapped", fmt.Errorf("lookup: %w", engine.ErrUnknownTopic), syscall.ENOENT},
		{"unknown partition", engine.ErrUnknownPartition, syscall.ENOENT},
		{"offset out of range", fmt.Errorf("%w: 5", engine.ErrOffsetOutOfRange), syscall.ENOENT},
		{"record too large", engine.ErrRecordTooLarge, syscall.EMSGSIZE},
		{"invalid config", errors.Join(fmt.Errorf("%w: a", engine.ErrInvalidConfig), fmt.Errorf("%w: b", engine.ErrInvalidConfig)), syscall.EINVAL},
		{"invalid topic", engine.ErrInvalidTopic, syscall.EINVAL},
		{"topic exists", engine.ErrTopicExists, syscall.EEXIST},
		{"read-only", engine.ErrReadOnly, syscall.EROFS},
		{"corrupt", fmt.Errorf("segment 0 pos 7: %w", engine.ErrCorrupt), syscall.EIO},
		{"disk full", fmt.Errorf("append: %w", syscall.ENOSPC), syscall.ENOSPC},
		{"parse", fmt.Errorf("%w: bad", errParse), syscall.EINVAL},
		{"cancelled", context.Canceled, syscall.EINTR},
		{"unmapped", errors.New("something else"), syscall.EIO},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.want, toErrno(log, "test", tt.err))
		})
	}
}
