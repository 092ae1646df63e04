package cluster

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// Health words of the stats files, worst last.
const (
	healthOK              = "ok"
	healthUnderReplicated = "under-replicated"
	healthAtRisk          = "at risk"
	healthOffline         = "offline"
)

var healthOrder = []string{healthOK, healthUnderReplicated, healthAtRisk, healthOffline}

// PartitionStats is a partition's stats file in cluster mode. Field names
// are part of the user contract (scripts parse them).
type PartitionStats struct {
	Topic             string  `json:"topic"`
	Partition         int32   `json:"partition"`
	LogStartOffset    int64   `json:"log_start_offset"`   // -1: not known (see errors)
	HighWatermark     int64   `json:"high_watermark"`     // -1: not known
	LastStableOffset  int64   `json:"last_stable_offset"` // -1: not known
	Leader            int32   `json:"leader"`             // -1: none
	LeaderEpoch       int32   `json:"leader_epoch"`
	Replicas          []int32 `json:"replicas"`
	ISR               []int32 `json:"isr"`
	OfflineReplicas   []int32 `json:"offline_replicas"`
	MinInsyncReplicas int     `json:"min_insync_replicas"`
	// SizeBytes is the leader's log size (DescribeLogDirs); null when the
	// credentials may not describe log dirs or no replica answered.
	SizeBytes    *int64   `json:"size_bytes"`
	Health       string   `json:"health"` // ok, under-replicated, at risk, offline
	HealthDetail string   `json:"health_detail"`
	Errors       []string `json:"errors,omitempty"` // requests that failed for this partition
}

// TopicStats summarises a topic's partitions.
type TopicStats struct {
	Topic             string `json:"topic"`
	Partitions        int    `json:"partitions"`
	ReplicationFactor int    `json:"replication_factor"`
	MinInsyncReplicas int    `json:"min_insync_replicas"`
	// SizeBytes sums the partitions' sizes; null if any is unknown.
	SizeBytes       *int64  `json:"size_bytes"`
	Health          string  `json:"health"` // the worst partition's
	HealthDetail    string  `json:"health_detail"`
	UnderReplicated []int32 `json:"under_replicated_partitions"`
	AtRisk          []int32 `json:"at_risk_partitions"`
	Offline         []int32 `json:"offline_partitions"`
	// Offsets and ByPartition are the fields of a local topic's stats:
	// the records between each log start and high watermark, summed, and
	// each partition's bounds and size.
	Offsets        int64            `json:"offsets"`
	ByPartition    []PartitionBrief `json:"by_partition"`
	PartitionStats []PartitionStats `json:"partition_stats"`
}

// PartitionBrief is a partition's line of the topic's stats, as a local
// topic's stats have it (log_end_offset is the high watermark).
type PartitionBrief struct {
	Partition      int32  `json:"partition"`
	LogStartOffset int64  `json:"log_start_offset"`
	LogEndOffset   int64  `json:"log_end_offset"`
	SizeBytes      *int64 `json:"size_bytes"`
}

// replicationState is what metadata says of a partition's replicas.
type replicationState struct {
	Leader, LeaderEpoch            int32
	Replicas, ISR, OfflineReplicas []int32
	MinISR                         int
}

// replication reads the partition's replicas now, with min.insync.replicas
// as last read.
func (p *Partition) replication(ctx context.Context) (replicationState, error) {
	resp, err := p.c.metadata(ctx, []string{p.topic})
	if err != nil {
		return replicationState{}, mapErr("metadata of "+p.name(), err)
	}
	mt, err := metadataTopic(resp, p.topic)
	if err != nil {
		return replicationState{}, err
	}
	p.t.mu.Lock()
	minISR := p.t.minISR
	p.t.mu.Unlock()
	for i := range mt.Partitions {
		if mp := &mt.Partitions[i]; mp.Partition == p.id {
			return stateOf(mp, minISR), nil
		}
	}
	return replicationState{}, mapErr("metadata of "+p.name(), fmt.Errorf("no such partition in the metadata"))
}

func stateOf(mp *kmsg.MetadataResponseTopicPartition, minISR int) replicationState {
	orEmpty := func(s []int32) []int32 {
		if s == nil {
			return []int32{}
		}
		return slices.Clone(s)
	}
	return replicationState{Leader: mp.Leader, LeaderEpoch: mp.LeaderEpoch, Replicas: orEmpty(mp.Replicas),
		ISR: orEmpty(mp.ISR), OfflineReplicas: orEmpty(mp.OfflineReplicas), MinISR: minISR}
}

// health words a partition's replication: offline without a leader, at
// risk with fewer in-sync replicas than min.insync.replicas (acks=all
// produces fail), under-replicated with fewer in-sync replicas than
// replicas.
func health(st replicationState) (string, string) {
	isr, n, m := len(st.ISR), len(st.Replicas), st.MinISR
	switch {
	case st.Leader < 0:
		return healthOffline, "no leader: reads and appends fail until the cluster elects one"
	case isr < m:
		return healthAtRisk, fmt.Sprintf("%d of %d replicas in sync, fewer than min.insync.replicas=%d: appends (acks=all) fail", isr, n, m)
	case isr < n:
		return healthUnderReplicated, fmt.Sprintf("%d of %d replicas in sync (min.insync.replicas=%d): appends still succeed; losing %d more fails them",
			isr, n, m, isr-m+1)
	}
	return healthOK, fmt.Sprintf("all %d replicas in sync (min.insync.replicas=%d)", n, m)
}

// StatsJSON renders the partition's stats, read now.
func (p *Partition) StatsJSON(ctx context.Context) ([]byte, error) {
	all, err := p.t.stats(ctx, []int32{p.id})
	if err != nil {
		return nil, err
	}
	return json.MarshalIndent(all[0], "", "  ")
}

// StatsJSON renders the topic's stats, read now: a summary of its
// partitions and each partition's stats.
func (t *Topic) StatsJSON(ctx context.Context) ([]byte, error) {
	ids := make([]int32, t.NumPartitions())
	for i := range ids {
		ids[i] = int32(i)
	}
	parts, err := t.stats(ctx, ids)
	if err != nil {
		return nil, err
	}
	t.mu.Lock()
	ts := TopicStats{Topic: t.name, Partitions: len(t.parts), ReplicationFactor: t.rf, MinInsyncReplicas: t.minISR,
		Health: healthOK, UnderReplicated: []int32{}, AtRisk: []int32{}, Offline: []int32{}, PartitionStats: parts,
		ByPartition: []PartitionBrief{}}
	t.mu.Unlock()
	size, known := int64(0), true
	for _, ps := range parts {
		ts.ByPartition = append(ts.ByPartition, PartitionBrief{Partition: ps.Partition,
			LogStartOffset: ps.LogStartOffset, LogEndOffset: ps.HighWatermark, SizeBytes: ps.SizeBytes})
		if ps.LogStartOffset >= 0 && ps.HighWatermark >= ps.LogStartOffset {
			ts.Offsets += ps.HighWatermark - ps.LogStartOffset
		}
		if ps.SizeBytes == nil {
			known = false
		} else {
			size += *ps.SizeBytes
		}
		switch ps.Health {
		case healthUnderReplicated:
			ts.UnderReplicated = append(ts.UnderReplicated, ps.Partition)
		case healthAtRisk:
			ts.AtRisk = append(ts.AtRisk, ps.Partition)
		case healthOffline:
			ts.Offline = append(ts.Offline, ps.Partition)
		}
		if slices.Index(healthOrder, ps.Health) > slices.Index(healthOrder, ts.Health) {
			ts.Health = ps.Health
		}
	}
	if known {
		ts.SizeBytes = &size
	}
	ts.HealthDetail = fmt.Sprintf("%d partitions: %d offline, %d at risk (appends fail), %d under-replicated, %d with every replica in sync",
		len(parts), len(ts.Offline), len(ts.AtRisk), len(ts.UnderReplicated),
		len(parts)-len(ts.Offline)-len(ts.AtRisk)-len(ts.UnderReplicated))
	return json.MarshalIndent(ts, "", "  ")
}

// stats reads the stats of partitions ids: the topic's metadata and
// configuration, three ListOffsets (log start, high watermark, last stable
// offset) and DescribeLogDirs, each one request for all of ids.
func (t *Topic) stats(ctx context.Context, ids []int32) ([]PartitionStats, error) {
	mt, err := t.read(ctx)
	if err != nil {
		return nil, err
	}
	t.mu.Lock()
	minISR := t.minISR
	t.mu.Unlock()
	c := t.c
	var (
		start, hw, lso             map[int32]int64
		startErrs, hwErrs, lsoErrs map[int32]error
		sizes                      map[int32]int64
	)
	together( // each bounded by the request timeout: together, one wait
		func() { start, startErrs = c.listOffsets(ctx, t.name, ids, earliestTS, false) },
		func() { hw, hwErrs = c.listOffsets(ctx, t.name, ids, latestTS, false) },
		func() { lso, lsoErrs = c.listOffsets(ctx, t.name, ids, latestTS, true) },
		func() { sizes = c.logSizes(ctx, mt, ids) })
	out := make([]PartitionStats, 0, len(ids))
	for _, id := range ids {
		ps := PartitionStats{Topic: t.name, Partition: id, Leader: -1, LeaderEpoch: -1,
			Replicas: []int32{}, ISR: []int32{}, OfflineReplicas: []int32{}, MinInsyncReplicas: minISR}
		st := replicationState{Leader: -1, MinISR: minISR}
		for i := range mt.Partitions {
			if mp := &mt.Partitions[i]; mp.Partition == id {
				st = stateOf(mp, minISR)
				ps.Leader, ps.LeaderEpoch = st.Leader, st.LeaderEpoch
				ps.Replicas, ps.ISR, ps.OfflineReplicas = st.Replicas, st.ISR, st.OfflineReplicas
			}
		}
		ps.Health, ps.HealthDetail = health(st)
		ps.LogStartOffset = offsetOr(start, startErrs, id, "log start offset", &ps.Errors)
		ps.HighWatermark = offsetOr(hw, hwErrs, id, "high watermark", &ps.Errors)
		ps.LastStableOffset = offsetOr(lso, lsoErrs, id, "last stable offset", &ps.Errors)
		if s, ok := sizes[id]; ok {
			ps.SizeBytes = &s
		}
		out = append(out, ps)
	}
	return out, nil
}

// offsetOr returns the offset of id, or -1 and the error noted in errs.
func offsetOr(offs map[int32]int64, errs map[int32]error, id int32, what string, notes *[]string) int64 {
	if err := errs[id]; err != nil {
		*notes = append(*notes, what+": "+mapErr("list offsets", err).Error())
		return -1
	}
	return offs[id]
}

// logSizes asks the replicas of ids for their log sizes (DescribeLogDirs)
// and keeps each partition's leader's answer (else the largest). A broker
// that refuses (the credentials may lack DESCRIBE on the cluster) or fails
// leaves its partitions out.
func (c *Cluster) logSizes(ctx context.Context, mt *kmsg.MetadataResponseTopic, ids []int32) map[int32]int64 {
	rctx, cancel := c.reqCtx(ctx)
	defer cancel()
	req := kmsg.NewPtrDescribeLogDirsRequest()
	rt := kmsg.NewDescribeLogDirsRequestTopic()
	rt.Topic = *mt.Topic
	rt.Partitions = ids
	req.Topics = append(req.Topics, rt)
	leaders := map[int32]int32{}
	for _, mp := range mt.Partitions {
		leaders[mp.Partition] = mp.Leader
	}
	sizes, fromLeader := map[int32]int64{}, map[int32]bool{}
	for _, shard := range c.client.RequestSharded(rctx, req) {
		resp, ok := shard.Resp.(*kmsg.DescribeLogDirsResponse)
		if shard.Err != nil || !ok || resp.ErrorCode != 0 {
			continue
		}
		for _, dir := range resp.Dirs {
			if dir.ErrorCode != 0 {
				continue
			}
			for _, dt := range dir.Topics {
				if dt.Topic != rt.Topic {
					continue
				}
				for _, dp := range dt.Partitions {
					leader := leaders[dp.Partition] == shard.Meta.NodeID
					if fromLeader[dp.Partition] && !leader {
						continue
					}
					if old, seen := sizes[dp.Partition]; !seen || leader || dp.Size > old {
						sizes[dp.Partition], fromLeader[dp.Partition] = dp.Size, leader
					}
				}
			}
		}
	}
	return sizes
}
