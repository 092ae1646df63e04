package cluster

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/topicfs/topicfs/backend"
)

// groupOffsets reads group's committed offsets on topic with a client of
// its own (franz-go's kmsg alone), as kafka-consumer-groups.sh does.
func groupOffsets(t *testing.T, addrs []string, group, topic string) map[int32]int64 {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(addrs...))
	require.NoError(t, err)
	defer cl.Close()
	req := kmsg.NewPtrOffsetFetchRequest()
	req.Group = group
	resp, err := req.RequestWith(context.Background(), cl)
	require.NoError(t, err)
	out := map[int32]int64{}
	for _, tp := range resp.Topics {
		if tp.Topic != topic {
			continue
		}
		for _, p := range tp.Partitions {
			if p.Offset >= 0 {
				out[p.Partition] = p.Offset
			}
		}
	}
	return out
}

// TestCursorIsConsumerGroup checks that a cursor's positions are the
// committed offsets of the consumer group of its name, as another client
// sees them, and that deleting it deletes them.
func TestCursorIsConsumerGroup(t *testing.T) {
	kc := newKfake(t)
	c, _ := openTest(t, kc, nil)
	ctx := context.Background()
	mkTopic(t, c, "orders", 2)

	_, ok, err := c.Cursor(ctx, "orders", "billing")
	require.NoError(t, err)
	assert.False(t, ok)

	require.NoError(t, c.CommitCursor(ctx, "orders", "billing", map[int]int64{0: 3, 1: 5}))
	require.NoError(t, c.CommitCursor(ctx, "orders", "billing", map[int]int64{1: 7}))
	got, ok, err := c.Cursor(ctx, "orders", "billing")
	require.NoError(t, err)
	assert.True(t, ok)
	assert.Equal(t, map[int]int64{0: 3, 1: 7}, got)
	assert.Equal(t, map[int32]int64{0: 3, 1: 7}, groupOffsets(t, kc.ListenAddrs(), "billing", "orders"))

	all, err := c.ListCursors(ctx, "orders")
	require.NoError(t, err)
	assert.Equal(t, map[string]map[int]int64{"billing": {0: 3, 1: 7}}, all)

	require.NoError(t, c.DeleteCursor(ctx, "orders", "billing", []int{0}))
	assert.Equal(t, map[int32]int64{1: 7}, groupOffsets(t, kc.ListenAddrs(), "billing", "orders"))
	require.NoError(t, c.DeleteCursor(ctx, "orders", "billing", nil))
	assert.Empty(t, groupOffsets(t, kc.ListenAddrs(), "billing", "orders"))
	assert.ErrorIs(t, c.DeleteCursor(ctx, "orders", "billing", nil), backend.ErrUnknownCursor)
}
