package fusefs

import (
	"github.com/topicfs/topicfs/backend"
	"slices"

	"github.com/topicfs/topicfs/engine"
	"github.com/topicfs/topicfs/engine/record"
)

// Per-partition batching of an append handle: the records pending for each
// partition, routing records to partitions, marking and taking full batches
// into a job, and the arena that keeps pending records' bytes after their
// WRITE returned.

// partBatch is what a handle buffers for one partition: pending records,
// oldest first, and during a write the ends of the batches that are full.
type partBatch struct {
	p    backend.Partition
	recs []record.Record
	// stable counts the leading records that own their bytes (copied to
	// the arena, or parsed from JSON); the others alias the current
	// WRITE's lines and are copied before Write returns.
	stable int
	// bytes is the encoded size of the records after the last full batch.
	bytes int64
	// cuts are the ends (in recs) of the full batches of this write.
	cuts []int
	// spares are emptied record slices (one per job that can be in
	// flight, and one more), reused when full batches leave.
	spares [][]record.Record
	// dirty: routed to in the current write (listed in h.dirty).
	dirty   bool
	touched bool // appended to since open (fsync flushes it)
	written bool // appended to since the last close
}

// resolve makes sure h.parts holds every partition records may go to and
// returns the partition count of a topic-level file. The caller holds h.mu.
func (h *appendHandle) resolve() (int, error) {
	if h.fixed >= 0 {
		h.fixedBatch()
		return 0, nil
	}
	n := h.topic.NumPartitions()
	if n == 0 {
		return 0, engine.ErrUnknownPartition
	}
	if len(h.parts) >= n && !slices.Contains(h.parts[:n], nil) {
		return n, nil // every partition resolved: no copy of the list per WRITE
	}
	if len(h.parts) < n {
		h.parts = append(h.parts, make([]*partBatch, n-len(h.parts))...)
	}
	for id := range n {
		if h.parts[id] != nil {
			continue
		}
		p, err := h.topic.Partition(id)
		if err != nil {
			return 0, err
		}
		h.parts[id] = &partBatch{p: p}
	}
	return n, nil
}

// route adds recs (sizes are their recordSize) to their partitions'
// pending records (Kafka's default partitioner for a topic-level file) and
// marks where batches become full. For a partition-level file recs are
// already the tail of its pending records. The caller holds h.mu and called
// resolve (n is its count).
func (h *appendHandle) route(recs []record.Record, sizes []int64, n int) {
	if h.fixed >= 0 {
		pb := h.parts[h.fixed]
		h.markDirty(h.fixed, pb)
		end := len(pb.recs) - len(recs)
		for i, sz := range sizes {
			if pb.bytes += sz; pb.bytes >= h.batchSize {
				pb.cuts = append(pb.cuts, end+i+1)
				pb.bytes = 0
			}
		}
	} else {
		for i := range recs {
			var id int
			if recs[i].Key != nil {
				id = partitionForKey(recs[i].Key, n)
			} else {
				id = h.sticky % n
			}
			pb := h.parts[id]
			h.markDirty(id, pb)
			pb.recs = append(pb.recs, recs[i])
			if pb.bytes += sizes[i]; pb.bytes >= h.batchSize {
				pb.cuts = append(pb.cuts, len(pb.recs))
				pb.bytes = 0
				if id == h.sticky%n {
					h.sticky++ // keyless records move on to the next partition
				}
			}
		}
	}
	if h.jsonl {
		// Parsed JSON owns its bytes.
		for _, id := range h.dirty {
			h.parts[id].stable = len(h.parts[id].recs)
		}
	}
}

// fixedBatch returns the pending batch of a partition-level file.
func (h *appendHandle) fixedBatch() *partBatch {
	if len(h.parts) <= h.fixed {
		h.parts = append(h.parts, make([]*partBatch, h.fixed+1-len(h.parts))...)
	}
	if h.parts[h.fixed] == nil {
		h.parts[h.fixed] = &partBatch{p: h.fixedLog}
	}
	return h.parts[h.fixed]
}

// keepRecs stores recs back: as the pending records of a partition-level
// file (fixed), else as the scratch.
func (h *appendHandle) keepRecs(fixed *partBatch, recs []record.Record) {
	if fixed != nil {
		fixed.recs = recs
	} else {
		h.recs = recs[:0]
	}
}

func (h *appendHandle) markDirty(id int, pb *partBatch) {
	if !pb.dirty {
		pb.dirty = true
		h.dirty = append(h.dirty, id)
	}
}

// take moves pb's full batches, and with all its other pending records
// too, into job. The caller holds h.mu; n is the partition count of a
// topic-level file.
func (h *appendHandle) take(job *appendJob, id int, pb *partBatch, all bool, n int) {
	pb.dirty = false
	end := 0
	if len(pb.cuts) > 0 {
		end = pb.cuts[len(pb.cuts)-1]
	}
	if all && len(pb.recs) > end {
		pb.cuts = append(pb.cuts, len(pb.recs))
		end = len(pb.recs)
		pb.bytes = 0
		if h.fixed < 0 && n > 0 && id == h.sticky%n {
			h.sticky++ // keyless records move on to the next partition
		}
	}
	if end == 0 {
		return
	}
	var groups [][]record.Record
	if k := len(job.free); k > 0 {
		groups, job.free = job.free[k-1], job.free[:k-1]
	}
	job.items = append(job.items, jobItem{pb: pb, recs: pb.recs, groups: groups})
	it := &job.items[len(job.items)-1]
	start := 0
	for _, c := range pb.cuts {
		it.groups = append(it.groups, pb.recs[start:c])
		start = c
	}
	if pb.stable > 0 {
		job.arena = true
	}
	rest := pb.recs[end:]
	var spare []record.Record
	if k := len(pb.spares); k > 0 {
		spare, pb.spares = pb.spares[k-1], pb.spares[:k-1]
	}
	pb.recs = append(spare, rest...)
	pb.stable = max(pb.stable-end, 0)
	pb.cuts = pb.cuts[:0]
	pb.touched, pb.written = true, true
}

// keep copies the bytes of pending records that alias the current WRITE
// (or the bulk buffer) into the arena, so they outlive Write. The caller
// holds h.mu.
func (h *appendHandle) keep() {
	need := 0
	for _, id := range h.dirty {
		pb := h.parts[id]
		for i := pb.stable; i < len(pb.recs); i++ {
			need += len(pb.recs[i].Key) + len(pb.recs[i].Value)
		}
	}
	if need > 0 || len(h.dirty) > 0 {
		if h.arenaFree() {
			h.arena = h.arena[:0]
		}
		if cap(h.arena)-len(h.arena) < need {
			// Records still pending or in flight keep the old arena alive
			// until they are appended.
			h.arena = make([]byte, 0, max(need, min(max(2*cap(h.arena), 4<<10), arenaSize)))
		}
	}
	for _, id := range h.dirty {
		pb := h.parts[id]
		pb.dirty = false
		for i := pb.stable; i < len(pb.recs); i++ {
			r := &pb.recs[i]
			r.Key = h.keepBytes(r.Key)
			r.Value = h.keepBytes(r.Value)
		}
		pb.stable = len(pb.recs)
	}
	h.dirty = h.dirty[:0]
}

// keepBytes copies b into the arena. nil (a null key or value) stays nil
// and an empty b stays empty but not nil: a slice of a still-nil arena
// would be nil, turning an empty line into a tombstone.
func (h *appendHandle) keepBytes(b []byte) []byte {
	switch {
	case b == nil:
		return nil
	case len(b) == 0:
		return emptyBytes
	}
	s := len(h.arena)
	h.arena = append(h.arena, b...)
	return h.arena[s:len(h.arena):len(h.arena)]
}

// emptyBytes is the one empty, non-nil key or value pending records share.
var emptyBytes = []byte{}

// arenaFree reports whether no pending record and no record in flight
// aliases the arena. The caller holds h.mu.
func (h *appendHandle) arenaFree() bool {
	for _, j := range h.jobs {
		if j.arena {
			return false
		}
	}
	for _, pb := range h.parts {
		if pb != nil && pb.stable > 0 {
			return false
		}
	}
	return true
}

// pending reports whether records wait for linger.ms or close.
func (h *appendHandle) pending() bool {
	for _, pb := range h.parts {
		if pb != nil && len(pb.recs) > 0 {
			return true
		}
	}
	return false
}

// arenaSize caps the geometric growth of a handle's arena (MaxWrite, the
// largest WRITE).
const arenaSize = maxWrite

// maxIdleRecords bounds the record slice a handle keeps for reuse.
const maxIdleRecords = 1 << 15
