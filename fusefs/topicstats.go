package fusefs

import (
	"context"
	"encoding/json"
)

// topicStats is a topic's stats file on local disk: its partitions summed,
// and each partition's bounds and size (the partition's own stats file has
// the rest). Field names are part of the user contract, as partitionStats'.
type topicStats struct {
	Topic      string           `json:"topic"`
	Partitions int              `json:"partitions"`
	SizeBytes  int64            `json:"size_bytes"`
	Offsets    int64            `json:"offsets"` // sum of log_end_offset - log_start_offset
	Each       []partitionBrief `json:"by_partition"`
}

type partitionBrief struct {
	Partition      int   `json:"partition"`
	LogStartOffset int64 `json:"log_start_offset"`
	LogEndOffset   int64 `json:"log_end_offset"`
	SizeBytes      int64 `json:"size_bytes"`
	SegmentCount   int   `json:"segment_count"`
}

// renderTopic renders the topic-level stats file: the backend's own if it
// renders one (a cluster), else topicStats.
func (s *statsNode) renderTopic(ctx context.Context) ([]byte, error) {
	t, err := s.fsys.topic(ctx, s.loc.topic, s.loc.gen)
	if err != nil {
		return nil, err
	}
	if r, ok := t.(statsRenderer); ok {
		return r.StatsJSON(ctx)
	}
	st := topicStats{Topic: t.Name(), Partitions: t.NumPartitions(), Each: []partitionBrief{}}
	for id := range st.Partitions {
		p, err := t.Partition(id)
		if err != nil {
			return nil, err
		}
		offs, err := p.Offsets(ctx)
		if err != nil {
			return nil, err
		}
		b := partitionBrief{Partition: id, LogStartOffset: offs.LogStart, LogEndOffset: offs.End}
		if ep := localOf(p); ep != nil {
			for _, si := range ep.Segments() {
				b.SizeBytes += si.Size
				b.SegmentCount++
			}
		}
		st.SizeBytes += b.SizeBytes
		st.Offsets += offs.End - offs.LogStart
		st.Each = append(st.Each, b)
	}
	out, err := json.MarshalIndent(st, "", "  ")
	if err != nil {
		return nil, err
	}
	return append(out, '\n'), nil
}
