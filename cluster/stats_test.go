package cluster

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/topicfs/topicfs/engine/record"
)

func TestPartitionStats(t *testing.T) {
	kc := newKfake(t)
	c, _ := openTest(t, kc, nil)
	ctx := context.Background()
	tp := mkTopic(t, c, "st", 2)
	p := part(t, tp, 1)
	_, _, err := p.AppendEach(ctx, [][]record.Record{values("v", 5)})
	require.NoError(t, err)

	raw, err := p.StatsJSON(ctx)
	require.NoError(t, err)
	var keys map[string]any
	require.NoError(t, json.Unmarshal(raw, &keys))
	for _, k := range []string{"topic", "partition", "log_start_offset", "high_watermark", "last_stable_offset",
		"leader", "leader_epoch", "replicas", "isr", "offline_replicas", "min_insync_replicas", "size_bytes",
		"health", "health_detail"} {
		assert.Contains(t, keys, k)
	}
	var ps PartitionStats
	require.NoError(t, json.Unmarshal(raw, &ps))
	assert.Equal(t, "st", ps.Topic)
	assert.Equal(t, int32(1), ps.Partition)
	assert.Equal(t, int64(0), ps.LogStartOffset)
	assert.Equal(t, int64(5), ps.HighWatermark)
	assert.Equal(t, int64(5), ps.LastStableOffset)
	assert.Equal(t, kc.LeaderFor("st", 1), ps.Leader)
	assert.Len(t, ps.Replicas, 3)
	assert.ElementsMatch(t, ps.Replicas, ps.ISR)
	assert.Empty(t, ps.OfflineReplicas)
	require.NotNil(t, ps.SizeBytes)
	assert.Positive(t, *ps.SizeBytes)
	assert.Equal(t, "ok", ps.Health)
	assert.Equal(t, "all 3 replicas in sync (min.insync.replicas=1)", ps.HealthDetail)
	assert.Empty(t, ps.Errors)

	// min.insync.replicas above the ISR: produces with acks=all fail.
	require.NoError(t, tp.AlterConfig(ctx, map[string]string{"min.insync.replicas": "4"}))
	// DescribeLogDirs refused (the credentials lack DESCRIBE on the cluster).
	kc.Fault(kfake.Fault{Keys: []kmsg.Key{kmsg.DescribeLogDirs}, Err: kerr.ClusterAuthorizationFailed, Count: -1})
	raw, err = p.StatsJSON(ctx)
	require.NoError(t, err)
	ps = PartitionStats{}
	require.NoError(t, json.Unmarshal(raw, &ps))
	assert.Equal(t, "at risk", ps.Health)
	assert.Contains(t, ps.HealthDetail, "fewer than min.insync.replicas=4")
	assert.Nil(t, ps.SizeBytes)
	assert.Contains(t, string(raw), `"size_bytes": null`)

	raw, err = tp.StatsJSON(ctx)
	require.NoError(t, err)
	var ts TopicStats
	require.NoError(t, json.Unmarshal(raw, &ts))
	assert.Equal(t, 2, ts.Partitions)
	assert.Equal(t, 3, ts.ReplicationFactor)
	assert.Equal(t, 4, ts.MinInsyncReplicas)
	assert.Equal(t, "at risk", ts.Health)
	assert.Equal(t, []int32{0, 1}, ts.AtRisk)
	assert.Empty(t, ts.UnderReplicated)
	assert.Nil(t, ts.SizeBytes)
	require.Len(t, ts.PartitionStats, 2)
	assert.Equal(t, int64(5), ts.PartitionStats[1].HighWatermark)
	assert.Equal(t, "2 partitions: 0 offline, 2 at risk (appends fail), 0 under-replicated, 0 with every replica in sync", ts.HealthDetail)
}

func TestTopicStatsSizes(t *testing.T) {
	kc := newKfake(t)
	c, _ := openTest(t, kc, nil)
	ctx := context.Background()
	tp := mkTopic(t, c, "sizes", 3)
	for i := range 3 {
		_, _, err := part(t, tp, i).AppendEach(ctx, [][]record.Record{values("x", i+1)})
		require.NoError(t, err)
	}
	raw, err := tp.StatsJSON(ctx)
	require.NoError(t, err)
	var ts TopicStats
	require.NoError(t, json.Unmarshal(raw, &ts))
	require.NotNil(t, ts.SizeBytes)
	sum := int64(0)
	for i, ps := range ts.PartitionStats {
		require.NotNil(t, ps.SizeBytes)
		sum += *ps.SizeBytes
		assert.Equal(t, int64(i+1), ps.HighWatermark)
	}
	assert.Equal(t, sum, *ts.SizeBytes)
	assert.Equal(t, "ok", ts.Health)
}

// TestHealth covers the words kfake cannot show: it keeps every replica
// in sync and always has a leader, so under-replicated and offline
// partitions exist only here.
func TestHealth(t *testing.T) {
	for _, tc := range []struct {
		st           replicationState
		word, detail string
	}{
		{replicationState{Leader: 1, Replicas: []int32{1, 2, 3}, ISR: []int32{1, 2, 3}, MinISR: 2},
			"ok", "all 3 replicas in sync (min.insync.replicas=2)"},
		{replicationState{Leader: 1, Replicas: []int32{1, 2, 3}, ISR: []int32{1, 2}, MinISR: 1},
			"under-replicated", "2 of 3 replicas in sync (min.insync.replicas=1): appends still succeed; losing 2 more fails them"},
		{replicationState{Leader: 1, Replicas: []int32{1, 2, 3}, ISR: []int32{1}, MinISR: 2},
			"at risk", "1 of 3 replicas in sync, fewer than min.insync.replicas=2: appends (acks=all) fail"},
		{replicationState{Leader: -1, Replicas: []int32{1, 2, 3}, ISR: []int32{}, MinISR: 2},
			"offline", "no leader: reads and appends fail until the cluster elects one"},
	} {
		word, detail := health(tc.st)
		assert.Equal(t, tc.word, word)
		assert.Equal(t, tc.detail, detail)
	}
}
