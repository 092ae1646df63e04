package policies

import "sort"

// keepRecord is Kafka's per-record rule for a data record of a v2 batch that
// the cleaner rewrites (Cleaner.shouldRetainRecord):
//
//   - a record past the map's latest offset is kept (it was not mapped);
//   - a record without a key is dropped (Kafka counts it invalid);
//   - otherwise it is kept iff it is the key's latest record (offset >= the
//     mapped offset; a key absent from the map maps to -1) and it has a value,
//     or the batch has no delete horizon yet, or the horizon is still ahead.
//
// horizon is the batch's deleteHorizonMs, -1 when it has none.
func keepRecord(m *OffsetMap, offset int64, key, value []byte, horizon, nowMs int64) bool {
	return keepHashed(m, offset, key, 0, value, horizon, nowMs)
}

// keepHashed is keepRecord for a key whose OffsetMap.Hash is h1 (0: not
// computed yet).
func keepHashed(m *OffsetMap, offset int64, key []byte, h1 uint64, value []byte, horizon, nowMs int64) bool {
	if offset > m.LatestOffset() {
		return true
	}
	if key == nil {
		return false
	}
	if h1 == 0 {
		h1 = m.Hash(key)
	}
	if offset < m.GetHashed(key, h1) {
		return false
	}
	return value != nil || horizon < 0 || nowMs < horizon
}

// abortedTxn is an aborted transaction as the .txnindex records it.
type abortedTxn struct {
	ProducerID  int64
	FirstOffset int64
	LastOffset  int64
}

// txnTracker follows transactions through the batches of a cleaning round in
// offset order, as Kafka's CleanedTransactionMetadata does, to tell which
// batches belong to aborted transactions and which markers may go.
//
// Its memory is bounded by the aborted transactions of the cleaned range and
// the producers with a transaction open at the current position.
type txnTracker struct {
	aborted          []abortedTxn // sorted by FirstOffset, consumed from the front
	ongoingAborted   map[int64]*abortedMeta
	ongoingCommitted map[int64]struct{}
}

type abortedMeta struct {
	txn      abortedTxn
	observed bool // a batch of this transaction was seen in this round
}

func newTxnTracker(aborted []abortedTxn) *txnTracker {
	a := append([]abortedTxn(nil), aborted...)
	sort.SliceStable(a, func(i, j int) bool { return a[i].FirstOffset < a[j].FirstOffset })
	return &txnTracker{
		aborted:          a,
		ongoingAborted:   map[int64]*abortedMeta{},
		ongoingCommitted: map[int64]struct{}{},
	}
}

func (t *txnTracker) consumeUpTo(offset int64) {
	for len(t.aborted) > 0 && t.aborted[0].FirstOffset <= offset {
		a := t.aborted[0]
		t.aborted = t.aborted[1:]
		if _, ok := t.ongoingAborted[a.ProducerID]; !ok {
			t.ongoingAborted[a.ProducerID] = &abortedMeta{txn: a}
		}
	}
}

// onDataBatch reports whether a data batch belongs to an aborted transaction
// (and so is discarded with all its records).
func (t *txnTracker) onDataBatch(producerID, lastOffset int64, transactional bool) bool {
	t.consumeUpTo(lastOffset)
	if !transactional {
		return false
	}
	if m, ok := t.ongoingAborted[producerID]; ok {
		m.observed = true
		return true
	}
	t.ongoingCommitted[producerID] = struct{}{}
	return false
}

// Control record types (Kafka's ControlRecordType); part of the format.
const (
	controlAbort  = 0
	controlCommit = 1
)

// onControlBatch reports whether a control batch may be discarded once its
// delete horizon has passed: an ABORT marker once no batch of its
// transaction remains, a COMMIT marker once no batch of its transaction was
// seen this round, an empty (already cleaned) control batch always.
// hasRecord is false for an empty control batch; ctype is the control type.
func (t *txnTracker) onControlBatch(producerID, lastOffset int64, hasRecord bool, ctype int16) bool {
	t.consumeUpTo(lastOffset)
	if !hasRecord {
		return true
	}
	switch ctype {
	case controlAbort:
		m, ok := t.ongoingAborted[producerID]
		delete(t.ongoingAborted, producerID)
		return !(ok && m.observed)
	case controlCommit:
		_, ok := t.ongoingCommitted[producerID]
		delete(t.ongoingCommitted, producerID)
		return !ok
	default:
		return false
	}
}
