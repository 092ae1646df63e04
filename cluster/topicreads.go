// Reads of many partitions of a topic at once: their offsets, and
// Snapshots, each with one listing round for all of them instead of one
// per partition (backend.OffsetsLister, backend.TopicSnapshotter).

package cluster

import (
	"cmp"
	"context"
	"maps"
	"slices"

	"github.com/topicfs/topicfs/backend"
)

var (
	_ backend.OffsetsLister    = (*Topic)(nil)
	_ backend.TopicSnapshotter = (*Topic)(nil)
)

// PartitionOffsets lists the log start and the high watermark of
// partitions ids together: two ListOffsets rounds for all of them, sent
// at once, instead of two per partition (backend.OffsetsLister).
func (t *Topic) PartitionOffsets(ctx context.Context, ids []int) (map[int]backend.Offsets, error) {
	ps, ids32, err := t.partitions(ids)
	if err != nil {
		return nil, err
	}
	var starts, ends map[int32]int64
	var serrs, errs map[int32]error
	together(
		func() { starts, serrs = t.c.listOffsets(ctx, t.name, ids32, earliestTS, false) },
		func() { ends, errs = t.c.listOffsets(ctx, t.name, ids32, latestTS, false) })
	out := make(map[int]backend.Offsets, len(ids))
	for i, p := range ps {
		if err := cmp.Or(serrs[p.id], errs[p.id]); err != nil {
			err = mapErr("list offsets of "+p.name(), err)
			p.staleOn(err)
			return nil, err
		}
		out[ids[i]] = backend.Offsets{LogStart: starts[p.id], End: ends[p.id]}
	}
	return out, nil
}

// Snapshots takes a Snapshot of each partition in from, from its offset
// there, all ending where the one listing of their ends says (the high
// watermark, or the last stable offset with Options.ReadCommitted):
// backend.TopicSnapshotter.
func (t *Topic) Snapshots(ctx context.Context, from map[int]int64) (map[int]*backend.Snapshot, error) {
	ids := slices.Sorted(maps.Keys(from))
	ps, ids32, err := t.partitions(ids)
	if err != nil {
		return nil, err
	}
	var ends map[int32]int64
	var errs map[int32]error
	if err := t.verifying(ctx, func() error {
		ends, errs = t.c.listOffsets(ctx, t.name, ids32, latestTS, t.c.opts.ReadCommitted)
		return nil // each partition's error is looked at below
	}); err != nil {
		return nil, err
	}
	out := make(map[int]*backend.Snapshot, len(ids))
	for i, p := range ps {
		if err := errs[p.id]; err != nil {
			err = mapErr("list offsets of "+p.name(), err)
			p.staleOn(err)
			backend.ReleaseSnapshots(out)
			return nil, err
		}
		snap, err := p.snapshot(ctx, from[ids[i]], ends[p.id])
		if err != nil {
			backend.ReleaseSnapshots(out)
			return nil, err
		}
		out[ids[i]] = snap
	}
	return out, nil
}

// partitions returns partitions ids of t, and their ids as the protocol
// has them.
func (t *Topic) partitions(ids []int) ([]*Partition, []int32, error) {
	ps := make([]*Partition, len(ids))
	ids32 := make([]int32, len(ids))
	for i, id := range ids {
		p, err := t.partition(id)
		if err != nil {
			return nil, nil, err
		}
		ps[i], ids32[i] = p, int32(id)
	}
	return ps, ids32, nil
}
