// Producer state: what a Kafka broker's ProducerStateManager keeps per
// partition of every idempotent or transactional producer whose batches
// are in the log (producer id, epoch, the last sequences, the open
// transaction, the coordinator epoch of its last marker). The engine
// builds it from the batches it appends or scans, checks a producer's
// batch against it before AppendBatch stores it (duplicates, sequence
// gaps, fenced epochs: Kafka's rules), takes the last stable offset from
// its open transactions, and saves it in <offset>.snapshot files
// (producersnapshot.go).

package engine

import (
	"encoding/binary"
	"fmt"
	"maps"
	"math"
	"runtime"
	"slices"

	"github.com/topicfs/topicfs/engine/index"
	"github.com/topicfs/topicfs/engine/record"
)

// producerBatchesKept is how many of a producer's last batches are kept
// for duplicate detection (Kafka's ProducerStateEntry.NumBatchesToRetain,
// the producer's max.in.flight.requests.per.connection bound).
const producerBatchesKept = 5

// producerExpirationMs is how long a producer without an open transaction
// is kept after the timestamp of its last batch: Kafka's broker default of
// producer.id.expiration.ms (one day).
const producerExpirationMs = 24 * 60 * 60 * 1000

// batchMeta is what is kept of one of a producer's last batches (Kafka's
// BatchMetadata).
type batchMeta struct {
	lastSeq     int32
	lastOffset  int64
	offsetDelta int32
	timestamp   int64
}

func (m batchMeta) firstSeq() int32    { return decrementSequence(m.lastSeq, m.offsetDelta) }
func (m batchMeta) firstOffset() int64 { return m.lastOffset - int64(m.offsetDelta) }

// decrementSequence subtracts dec from a sequence number, wrapping below 0
// to MaxInt32 as Kafka's DefaultRecordBatch.decrementSequence does.
func decrementSequence(seq, dec int32) int32 {
	if seq < dec {
		return math.MaxInt32 - (dec - seq) + 1
	}
	return seq - dec
}

// producerEntry is one producer's state (Kafka's ProducerStateEntry).
type producerEntry struct {
	epoch            int16
	batches          []batchMeta // oldest first, at most producerBatchesKept
	coordinatorEpoch int32
	lastTimestamp    int64
	txnFirst         int64 // first offset of the open transaction, -1 none
}

func newProducerEntry() *producerEntry {
	return &producerEntry{epoch: -1, coordinatorEpoch: -1, lastTimestamp: -1, txnFirst: -1}
}

// lastSeq is the last sequence the producer wrote (-1 none).
func (e *producerEntry) lastSeq() int32 {
	if len(e.batches) == 0 {
		return -1
	}
	return e.batches[len(e.batches)-1].lastSeq
}

// lastDataOffset is the last offset of the producer's last data batch (-1
// when it wrote only markers since its epoch began).
func (e *producerEntry) lastDataOffset() int64 {
	if len(e.batches) == 0 {
		return -1
	}
	return e.batches[len(e.batches)-1].lastOffset
}

// setEpoch moves the entry to epoch; a new epoch forgets the batches of
// the old one (their sequences start again at 0).
func (e *producerEntry) setEpoch(epoch int16) {
	if e.epoch != epoch {
		e.batches = e.batches[:0]
		e.epoch = epoch
	}
}

func (e *producerEntry) addBatch(m batchMeta) {
	if len(e.batches) == producerBatchesKept {
		copy(e.batches, e.batches[1:])
		e.batches = e.batches[:producerBatchesKept-1]
	}
	e.batches = append(e.batches, m)
}

// duplicateOf returns the kept batch with exactly b's sequence range in
// b's epoch, if any: a producer's retry of a batch already in the log.
func (e *producerEntry) duplicateOf(b *record.Batch) (batchMeta, bool) {
	if b.ProducerEpoch != e.epoch {
		return batchMeta{}, false
	}
	last := b.LastSequence()
	for _, m := range e.batches {
		if m.firstSeq() == b.BaseSequence && m.lastSeq == last {
			return m, true
		}
	}
	return batchMeta{}, false
}

// producerState is a partition's producer state. open indexes the open
// transactions (producer id -> first offset, the entries' txnFirst), so
// the last stable offset costs the open transactions, not the producers.
// Callers serialise access (the partition's writer lock, or a scan that
// owns it).
type producerState struct {
	producers map[int64]*producerEntry
	open      map[int64]int64
}

func newProducerState() *producerState {
	return &producerState{producers: map[int64]*producerEntry{}, open: map[int64]int64{}}
}

// clone copies the state deeply.
func (ps *producerState) clone() *producerState {
	c := &producerState{producers: make(map[int64]*producerEntry, len(ps.producers)), open: maps.Clone(ps.open)}
	for pid, e := range ps.producers {
		ce := *e
		ce.batches = slices.Clone(e.batches)
		c.producers[pid] = &ce
	}
	return c
}

// entry returns pid's entry, creating an empty one.
func (ps *producerState) entry(pid int64) *producerEntry {
	e := ps.producers[pid]
	if e == nil {
		e = newProducerEntry()
		ps.producers[pid] = e
	}
	return e
}

// firstUnstable is the first offset of the oldest open transaction, or
// MaxInt64 when none is open.
func (ps *producerState) firstUnstable() int64 {
	fu := int64(math.MaxInt64)
	for _, f := range ps.open {
		fu = min(fu, f)
	}
	return fu
}

// setTxn opens (first >= 0) or ends (first < 0) pid's transaction.
func (ps *producerState) setTxn(pid int64, e *producerEntry, first int64) {
	e.txnFirst = first
	if first >= 0 {
		ps.open[pid] = first
	} else {
		delete(ps.open, pid)
	}
}

// endTxnMarker is the COMMIT or ABORT marker of a control batch.
type endTxnMarker struct {
	abort            bool
	coordinatorEpoch int32
	timestamp        int64
}

// markerOf decodes the end-transaction marker of a control batch: ok is
// false for an empty control batch (the cleaner emptied it: its
// transaction is gone from the log) and for control records of other
// types (KRaft's, which carry no producer).
func markerOf(b *record.Batch) (m endTxnMarker, ok bool, err error) {
	var one [1]record.Record
	recs, err := b.Records(one[:0])
	if err != nil || len(recs) == 0 {
		return m, false, err
	}
	r := &recs[0]
	if len(r.Key) < 4 {
		return m, false, fmt.Errorf("%w: offset %d: control record key of %d bytes", ErrCorrupt, b.BaseOffset, len(r.Key))
	}
	typ := int16(binary.BigEndian.Uint16(r.Key[2:]))
	if typ != record.ControlAbort && typ != record.ControlCommit {
		return m, false, nil
	}
	ce, err := record.ParseEndTxnMarker(r.Value)
	if err != nil {
		return m, false, err
	}
	return endTxnMarker{abort: typ == record.ControlAbort, coordinatorEpoch: ce, timestamp: r.Timestamp}, true, nil
}

// observe updates the state with a batch of the log, as Kafka does for
// batches it replicates or loads (no validation), and returns the aborted
// transaction an ABORT marker completes (nil otherwise). Batches without a
// producer id leave it unchanged. A marker whose transaction began before
// what was observed completes none, as in Kafka: its records show.
func (ps *producerState) observe(b *record.Batch) *index.AbortedTxn {
	if b.ProducerID < 0 || b.Magic < 2 {
		return nil
	}
	pid := b.ProducerID
	if b.IsControl() {
		m, ok, err := markerOf(b)
		if err != nil || !ok {
			return nil
		}
		e := ps.entry(pid)
		first := e.txnFirst
		e.setEpoch(b.ProducerEpoch)
		ps.setTxn(pid, e, -1)
		e.coordinatorEpoch = m.coordinatorEpoch
		e.lastTimestamp = m.timestamp
		if first < 0 || !m.abort {
			return nil
		}
		last := b.LastOffset()
		return &index.AbortedTxn{ProducerID: pid, FirstOffset: first, LastOffset: last,
			LastStableOffset: min(ps.firstUnstable(), last+1)}
	}
	e := ps.entry(pid)
	e.setEpoch(b.ProducerEpoch)
	e.addBatch(batchMeta{lastSeq: b.LastSequence(), lastOffset: b.LastOffset(),
		offsetDelta: int32(b.LastOffset() - b.BaseOffset), timestamp: b.MaxTimestamp})
	e.lastTimestamp = b.MaxTimestamp
	if b.IsTransactional() && e.txnFirst < 0 {
		ps.setTxn(pid, e, b.BaseOffset)
	}
	return nil
}

// startsTxn reports whether b, once appended, opens a transaction: the
// last stable offset must not pass its first offset from then on.
func (ps *producerState) startsTxn(b *record.Batch) bool {
	if b.ProducerID < 0 || b.Magic < 2 || b.IsControl() || !b.IsTransactional() {
		return false
	}
	e := ps.producers[b.ProducerID]
	return e == nil || e.txnFirst < 0
}

// check applies Kafka's rules for a producer's batch (ProducerAppendInfo
// with a client origin; markers with a coordinator's) before it is
// appended: a retry of one of the producer's last batches is a duplicate
// (dup true: the caller answers with the offsets it got then and appends
// nothing); an epoch below the producer's fails with
// ErrInvalidProducerEpoch; a sequence that does not follow the producer's
// last one with ErrOutOfOrderSequence (a new epoch must start at 0); a
// plain batch while the producer's transaction is open with
// ErrInvalidTxnState; a marker of an older coordinator with
// ErrCoordinatorFenced. An unknown producer may start at any sequence, as
// in Kafka (its earlier batches may have left the log).
func (ps *producerState) check(b *record.Batch) (orig batchMeta, dup bool, err error) {
	if b.ProducerID < 0 || b.Magic < 2 {
		return orig, false, nil
	}
	e := ps.producers[b.ProducerID]
	if e == nil {
		e = newProducerEntry()
	}
	if b.IsControl() {
		return orig, false, e.checkMarker(b)
	}
	if m, ok := e.duplicateOf(b); ok {
		return m, true, nil
	}
	if b.ProducerEpoch < e.epoch {
		return orig, false, fmt.Errorf("%w: producer %d epoch %d at offset %d is below its epoch %d",
			ErrInvalidProducerEpoch, b.ProducerID, b.ProducerEpoch, b.BaseOffset, e.epoch)
	}
	if err := e.checkSequence(b); err != nil {
		return orig, false, err
	}
	if e.txnFirst >= 0 && !b.IsTransactional() {
		return orig, false, fmt.Errorf("%w: producer %d wrote a non-transactional batch while its transaction from offset %d is open",
			ErrInvalidTxnState, b.ProducerID, e.txnFirst)
	}
	return orig, false, nil
}

// checkSequence is Kafka's ProducerAppendInfo.checkSequence for b.
func (e *producerEntry) checkSequence(b *record.Batch) error {
	first := b.BaseSequence
	if b.ProducerEpoch != e.epoch {
		if first != 0 && e.epoch != -1 {
			return fmt.Errorf("%w: producer %d starts epoch %d at sequence %d, not 0 (its epoch was %d)",
				ErrOutOfOrderSequence, b.ProducerID, b.ProducerEpoch, first, e.epoch)
		}
		return nil
	}
	// The next sequence after the last (0 after none, and after MaxInt32).
	last := e.lastSeq()
	if e.epoch == -1 || first == record.IncrementSequence(last, 1) {
		return nil
	}
	return fmt.Errorf("%w: producer %d sent sequence %d, its last is %d",
		ErrOutOfOrderSequence, b.ProducerID, first, last)
}

// checkMarker is Kafka's check of an end-transaction marker: the
// producer's epoch and the coordinator's.
func (e *producerEntry) checkMarker(b *record.Batch) error {
	if !b.IsTransactional() {
		return nil
	}
	if b.ProducerEpoch < e.epoch {
		return fmt.Errorf("%w: marker of producer %d with epoch %d, below its epoch %d",
			ErrInvalidProducerEpoch, b.ProducerID, b.ProducerEpoch, e.epoch)
	}
	m, ok, err := markerOf(b)
	if err != nil || !ok {
		return err
	}
	if m.coordinatorEpoch < e.coordinatorEpoch {
		return fmt.Errorf("%w: marker of producer %d from coordinator epoch %d, below %d",
			ErrCoordinatorFenced, b.ProducerID, m.coordinatorEpoch, e.coordinatorEpoch)
	}
	return nil
}

// expire drops the producers without an open transaction whose last
// batch is producerExpirationMs older than nowMs (Kafka's
// removeExpiredProducers).
func (ps *producerState) expire(nowMs int64) {
	for pid, e := range ps.producers {
		if e.txnFirst < 0 && nowMs-e.lastTimestamp >= producerExpirationMs {
			delete(ps.producers, pid)
		}
	}
}

// publishLSOLocked makes the open transactions' first offset what
// readers see (Snapshot, LastStableOffset). Callers hold mu; a batch that
// opens a transaction calls holdLSOLocked before its bytes are published.
func (p *Partition) publishLSOLocked() {
	p.firstUnstable.Store(p.w.producers.firstUnstable())
}

// holdLSOLocked keeps the last stable offset at or below first before a
// batch opening a transaction there is published, so that no reader sees
// the batch below the last stable offset. Callers hold mu.
func (p *Partition) holdLSOLocked(first int64) {
	if first < p.firstUnstable.Load() {
		p.firstUnstable.Store(first)
	}
}

// LastStableOffset returns where a read_committed reader stops: the first
// offset of the oldest transaction that has records in the log but no
// COMMIT or ABORT marker yet, else the log end offset (never below the
// log start offset).
func (p *Partition) LastStableOffset() int64 {
	leo := p.logEnd.Load()
	return max(min(p.firstUnstable.Load(), leo), p.logStart.Load())
}

// SizeBelow returns the committed bytes of the segment's batches that
// hold only offsets below end: its size when nothing in it is at or past
// end, else the position of its first batch that is. A reader that stops
// at a last stable offset (a Snapshot's) reads the active segment up to
// it, however much was appended since.
func (s *Segment) SizeBelow(end int64) (int64, error) {
	if end <= s.base {
		return 0, nil
	}
	size, next := s.committed()
	if next < 0 && s.Sealed() {
		next = s.nextBound.Load() // not computed yet: the next segment's base bounds it
	}
	if next >= 0 && next <= end {
		return size, nil
	}
	return s.FindOffset(end)
}

// committed returns the committed size and the next offset as one append
// published them (next -1: not known yet).
func (s *Segment) committed() (size, next int64) {
	for {
		v := s.pubSeq.Load()
		if v&1 == 0 {
			size, next = s.size.Load(), s.next.Load()
			if s.pubSeq.Load() == v {
				return size, next
			}
		}
		runtime.Gosched() // an append is between its two stores
	}
}

// ProducerLastRecord is what the log cleaner must keep of an active
// producer (Kafka's LastRecord): the batch holding LastDataOffset, or,
// when it is -1 (the producer wrote only markers in its epoch), its last
// marker of epoch Epoch. Then the producer's sequence state survives in
// the log.
type ProducerLastRecord struct {
	LastDataOffset int64
	Epoch          int16
}

// LastRecordsOfActiveProducers returns, per producer id, the record the
// log cleaner keeps for it.
func (p *Partition) LastRecordsOfActiveProducers() map[int64]ProducerLastRecord {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := make(map[int64]ProducerLastRecord, len(p.w.producers.producers))
	for pid, e := range p.w.producers.producers {
		out[pid] = ProducerLastRecord{LastDataOffset: e.lastDataOffset(), Epoch: e.epoch}
	}
	return out
}

// Producers returns the partition's producer state as a snapshot file
// would hold it, sorted by producer id.
func (p *Partition) Producers() []ProducerEntry {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.w.producers.entries()
}
