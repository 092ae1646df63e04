package cluster

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/topicfs/topicfs/backend"
	"github.com/topicfs/topicfs/engine/record"
	"github.com/topicfs/topicfs/internal/testutil/kfakehold"
)

// TestLookupsAfterAnUnansweredOne: while the cluster does not answer, the
// lookup after one that timed out fails at once with its error, without a
// request of its own (the kernel runs lookups of one name one after the
// other, so each would wait a request timeout in turn); after
// outageWindow, with the cluster answering again, lookups work.
func TestLookupsAfterAnUnansweredOne(t *testing.T) {
	kc := newKfake(t)
	c, logs := openTest(t, kc, func(o *Options) { o.RequestTimeout = 500 * time.Millisecond })
	mkTopic(t, c, "quiet", 1)
	time.Sleep(topicFresh) // the lookup must ask the cluster

	release, seen := kfakehold.Hold(t, kc, kmsg.Metadata, 0)
	ctx := context.Background()
	_, err := c.Topic(ctx, "quiet")
	require.ErrorIs(t, err, backend.ErrTimedOut)
	asked := seen()
	require.Positive(t, asked)
	for range 5 {
		_, err = c.Topic(ctx, "quiet")
		assert.ErrorIs(t, err, backend.ErrTimedOut)
	}
	assert.Equal(t, asked, seen(), "the lookups after it sent no request")
	assert.Equal(t, 1, strings.Count(logs.String(), "a topic lookup could not reach the cluster"), "one log line")

	release()
	time.Sleep(outageWindow)
	_, err = c.Topic(ctx, "quiet")
	assert.NoError(t, err, "the cluster answers again")
}

// TestCloseReportsUnacknowledged: records a writer handed over that the
// cluster never acknowledged make Close fail and log how many, instead
// of being dropped in silence at unmount.
func TestCloseReportsUnacknowledged(t *testing.T) {
	kc := newKfake(t)
	logs := &logBuf{}
	o := testOptions(t, kc, logs)
	o.RequestTimeout = 300 * time.Millisecond
	c, err := Open(context.Background(), o)
	require.NoError(t, err)
	tp := mkTopic(t, c, "unacked", 1)
	kfakehold.Hold(t, kc, kmsg.Produce, 0)
	_, err = part(t, tp, 0).EnqueueEach(context.Background(), [][]record.Record{{{Value: []byte("held")}}})
	require.NoError(t, err)
	err = c.Close()
	require.ErrorIs(t, err, backend.ErrTimedOut)
	assert.Contains(t, err.Error(), "1 appended records not acknowledged at unmount")
	assert.Contains(t, logs.String(), "records not acknowledged at unmount are dropped")
}
