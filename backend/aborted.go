package backend

import (
	"slices"

	"github.com/topicfs/topicfs/engine/index"
)

// AbortedSet is the union of the aborted transactions of a partition's
// segments (their .txnindex files): a record of a transactional batch is
// hidden from read_committed readers when an aborted transaction of its
// producer covers its offset. A set never changes once made (With makes a
// new one), so readers share it. The nil set is empty.
type AbortedSet struct {
	byProducer map[int64][]index.AbortedTxn
}

// NewAbortedSet returns the aborted transactions of segs.
func NewAbortedSet(segs []Segment) *AbortedSet {
	var ab AbortedSet
	for _, s := range segs {
		for _, t := range s.AbortedTxns() {
			if ab.byProducer == nil {
				ab.byProducer = map[int64][]index.AbortedTxn{}
			}
			ab.byProducer[t.ProducerID] = append(ab.byProducer[t.ProducerID], t)
		}
	}
	return &ab
}

// Empty reports whether the set holds no transaction.
func (a *AbortedSet) Empty() bool { return a == nil || len(a.byProducer) == 0 }

// With returns a set holding a's transactions and those of segs' txn
// indexes: a itself when that adds none.
func (a *AbortedSet) With(segs []Segment) *AbortedSet {
	out := a
	for _, s := range segs {
		for _, t := range s.AbortedTxns() {
			if out.Has(t) {
				continue
			}
			if out == a {
				out = &AbortedSet{byProducer: map[int64][]index.AbortedTxn{}}
				if a != nil {
					for pid, ts := range a.byProducer {
						out.byProducer[pid] = slices.Clone(ts)
					}
				}
			}
			out.byProducer[t.ProducerID] = append(out.byProducer[t.ProducerID], t)
		}
	}
	return out
}

// Has reports whether the set holds transaction t.
func (a *AbortedSet) Has(t index.AbortedTxn) bool {
	return a != nil && slices.ContainsFunc(a.byProducer[t.ProducerID], func(o index.AbortedTxn) bool {
		return o.FirstOffset == t.FirstOffset && o.LastOffset == t.LastOffset
	})
}

// Aborted reports whether an aborted transaction of producer covers offset.
func (a *AbortedSet) Aborted(producer, offset int64) bool {
	if a == nil {
		return false
	}
	for _, t := range a.byProducer[producer] {
		if offset >= t.FirstOffset && offset <= t.LastOffset {
			return true
		}
	}
	return false
}

// Each calls fn with every transaction of the set, in no particular order.
func (a *AbortedSet) Each(fn func(t index.AbortedTxn)) {
	if a == nil {
		return
	}
	for _, ts := range a.byProducer {
		for _, t := range ts {
			fn(t)
		}
	}
}
