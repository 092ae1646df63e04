package cluster

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/topicfs/topicfs/backend"
	"github.com/topicfs/topicfs/engine/record"
)

func TestTopicsCreateDelete(t *testing.T) {
	kc := newKfake(t, kfake.SeedTopics(2, "seeded"), kfake.DefaultNumPartitions(4))
	c, _ := openTest(t, kc, nil)
	ctx := context.Background()
	assert.False(t, c.ReadOnly())
	assert.Equal(t, "kfake", c.ClusterID())

	mkTopic(t, c, "b-topic", 3)
	mkTopic(t, c, "a.topic", 0) // the broker's num.partitions (kfake.DefaultNumPartitions)
	mkTopic(t, c, "__internal", 1)
	names, err := c.Topics(ctx)
	require.NoError(t, err)
	assert.Equal(t, []string{"a.topic", "b-topic", "seeded"}, names, "sorted, __ topics hidden")

	bt, err := c.Topic(ctx, "a.topic")
	require.NoError(t, err)
	assert.Equal(t, "a.topic", bt.Name())
	assert.Equal(t, 4, bt.NumPartitions())
	bt, err = c.Topic(ctx, "seeded")
	require.NoError(t, err)
	assert.Equal(t, 2, bt.NumPartitions())
	_, err = bt.Partition(2)
	assert.ErrorIs(t, err, backend.ErrUnknownPartition)
	p, err := bt.Partition(1)
	require.NoError(t, err)
	assert.Equal(t, "seeded", p.Topic())
	assert.Equal(t, 1, p.ID())

	_, err = c.CreateTopic(ctx, "b-topic", 1)
	assert.ErrorIs(t, err, backend.ErrTopicExists)
	_, err = c.CreateTopic(ctx, "b_topic", 1) // - and _ do not collide; . and _ do
	require.NoError(t, err)
	_, err = c.CreateTopic(ctx, "a_topic", 1) // a.topic and a_topic collide (the broker's INVALID_TOPIC_EXCEPTION)
	assert.ErrorIs(t, err, backend.ErrInvalidTopic)
	for _, bad := range []string{"", ".", "..", "a/b", "spaced name", string(make([]byte, 250))} {
		_, err = c.CreateTopic(ctx, bad, 1)
		assert.ErrorIs(t, err, backend.ErrInvalidTopic, "%q", bad)
	}

	require.NoError(t, c.DeleteTopic(ctx, "b-topic"))
	_, err = c.Topic(ctx, "b-topic")
	assert.ErrorIs(t, err, backend.ErrUnknownTopic)
	assert.ErrorIs(t, c.DeleteTopic(ctx, "b-topic"), backend.ErrUnknownTopic)
	_, err = c.Topic(ctx, "never")
	assert.ErrorIs(t, err, backend.ErrUnknownTopic)
	_, err = c.Topic(ctx, "no/such")
	assert.ErrorIs(t, err, backend.ErrUnknownTopic, "a name no topic can have")
	assert.ErrorIs(t, c.DeleteTopic(ctx, ".."), backend.ErrUnknownTopic)
}

func TestShowInternal(t *testing.T) {
	kc := newKfake(t)
	c, _ := openTest(t, kc, func(o *Options) { o.ShowInternal = true })
	mkTopic(t, c, "__internal", 1)
	mkTopic(t, c, "plain", 1)
	names, err := c.Topics(context.Background())
	require.NoError(t, err)
	assert.Equal(t, []string{"__internal", "plain"}, names)
}

func TestCreateTopicReplicationAndPartitionDefaults(t *testing.T) {
	kc := newKfake(t, kfake.DefaultNumPartitions(7))
	ctx := context.Background()
	c, _ := openTest(t, kc, func(o *Options) { o.NumPartitions = 5; o.ReplicationFactor = 2 })
	tp := mkTopic(t, c, "five", 0)
	assert.Equal(t, 5, tp.NumPartitions(), "Options.NumPartitions")
	assert.Equal(t, 2, tp.rf)

	c2, _ := openTest(t, kc, func(o *Options) { o.ReplicationFactor = -1 })
	tp = mkTopic(t, c2, "seven", 0)
	assert.Equal(t, 7, tp.NumPartitions(), "the broker's num.partitions")
	assert.Equal(t, 3, tp.rf, "the broker's default replication factor")

	c3, _ := openTest(t, kc, func(o *Options) { o.ReplicationFactor = 4 })
	_, err := c3.CreateTopic(ctx, "four", 1)
	assert.ErrorIs(t, err, backend.ErrInvalidConfig, "more replicas than brokers: INVALID_REPLICATION_FACTOR")
}

func TestAddPartitions(t *testing.T) {
	kc := newKfake(t)
	c, _ := openTest(t, kc, nil)
	ctx := context.Background()
	tp := mkTopic(t, c, "grow", 2)
	require.NoError(t, tp.AddPartitions(ctx, 2), "the same count changes nothing")
	require.NoError(t, tp.AddPartitions(ctx, 5))
	assert.Equal(t, 5, tp.NumPartitions())
	_, err := tp.Partition(4)
	require.NoError(t, err)
	assert.ErrorIs(t, tp.AddPartitions(ctx, 3), backend.ErrInvalidConfig, "never shrinks")
	assert.Equal(t, 5, tp.NumPartitions())
}

// TestAuthorizationErrors: the broker's authorization failures (injected,
// as kfake's ACLs would need a second user) mean ErrNotAuthorized.
func TestAuthorizationErrors(t *testing.T) {
	kc := newKfake(t)
	c, _ := openTest(t, kc, nil)
	ctx := context.Background()
	tp := mkTopic(t, c, "locked", 1)
	kc.Fault(kfake.Fault{Keys: []kmsg.Key{kmsg.CreateTopics}, Err: kerr.TopicAuthorizationFailed})
	_, err := c.CreateTopic(ctx, "denied", 1)
	assert.ErrorIs(t, err, backend.ErrNotAuthorized)
	kc.Fault(kfake.Fault{Keys: []kmsg.Key{kmsg.DeleteTopics}, Err: kerr.TopicAuthorizationFailed})
	assert.ErrorIs(t, c.DeleteTopic(ctx, "locked"), backend.ErrNotAuthorized)
	h := kc.Fault(kfake.Fault{Keys: []kmsg.Key{kmsg.Produce}, Topic: "locked", Err: kerr.TopicAuthorizationFailed, Count: -1})
	_, _, err = part(t, tp, 0).AppendEach(ctx, [][]record.Record{values("v", 1)})
	assert.ErrorIs(t, err, backend.ErrNotAuthorized)
	h.Remove()
}
