// A Partition as a copy of another log: AppendAsFollower appends batches
// with the offsets they already have (Kafka's UnifiedLog.appendAsFollower),
// TruncateFullyAndStartAt empties the log and restarts it at any offset
// (Kafka's truncateFullyAndStartAt), and OpenTransactions tells what the
// transaction index still waits for. Cluster mode keeps its local copy of
// what it fetched from a Kafka cluster (cluster.Mirror) with them.

package engine

import (
	"encoding/binary"
	"fmt"
	"maps"
	"math"

	"github.com/topicfs/topicfs/engine/record"
)

// followerBatch is one batch of an AppendAsFollower call: where it lies in
// the caller's bytes (and, once copied, in the encode buffer).
type followerBatch struct {
	batchSpan
	producer bool // it has a producer id: the producer state observes it
	startTxn bool // it may open a transaction
}

// AppendAsFollower appends raw, one or more whole v2 record batches as
// another log holds them (a Kafka fetch response's records), keeping their
// offsets, timestamps, leader epochs and producer fields, as a follower
// replica appends what it fetched from the leader. Every batch is checked
// (lengths, structure, CRC) before anything is written; their base offsets
// must not go below the log end offset or below the previous batch's next
// offset (gaps are allowed: compaction leaves them), else the call fails
// with an error wrapping ErrOffsetOutOfRange and appends nothing. Legacy
// (magic 0/1) entries fail with record.ErrUnsupported. max.message.bytes and
// compression.type do not apply: what the other log accepted is kept byte
// for byte. Segments roll, and index entries are added, as for any append;
// an ABORT marker adds its transaction to its segment's .txnindex, with the
// first offset this partition saw of that producer's transaction. It returns
// the base offset of the first batch and the last offset of the last one; an
// empty raw appends nothing and returns (LogEndOffset, LogEndOffset-1, nil).
// flush.messages counts offsets (gaps included). A write error can leave the
// batches before it appended (first and last then say which, as for
// AppendEach); the producer state may then have seen batches that are not in
// the log, so callers that go on should TruncateFullyAndStartAt or reopen.
// raw is not modified.
func (p *Partition) AppendAsFollower(raw []byte) (first, last int64, err error) {
	base := int64(-1)
	first, last, err = p.appendWith(func(ap *appendParams) error {
		ap.verified = true // splitFollowerBatches verifies every batch before any is placed
		batches, err := splitFollowerBatches(raw, p.logEnd.Load())
		if err != nil || len(batches) == 0 {
			return err
		}
		base = batches[0].first
		p.w.encBuf = append(p.w.encBuf[:0], raw...)
		defer p.publishLSOLocked()
		for i := range batches {
			b := &batches[i]
			if b.startTxn {
				p.holdLSOLocked(b.first)
			}
			if err := p.placeLocked(b.batchSpan, ap); err != nil {
				return err
			}
			if b.producer {
				if err := p.observeFollowerLocked(raw[b.start:b.end]); err != nil {
					return err
				}
			}
		}
		return nil
	})
	if base >= 0 {
		first = base
	}
	return first, last, err
}

// observeFollowerLocked lets the producer state see a batch of a producer
// that was just placed; an ABORT marker's transaction goes to the txn index
// of the segment holding the marker, once the marker is written (an entry
// never points at bytes the log does not have). Callers hold mu.
func (p *Partition) observeFollowerLocked(raw []byte) error {
	b, err := record.Parse(raw)
	if err != nil {
		return err
	}
	t := p.w.producers.observe(&b)
	if t == nil {
		return nil
	}
	if err := p.writeRunLocked(); err != nil {
		return err
	}
	p.w.dirDirty = true // the segment's first entry creates its .txnindex
	return p.active().appendAbortedTxn(*t)
}

// splitFollowerBatches checks raw as AppendAsFollower takes it: whole v2
// batches, each verified, offsets from leo on, increasing.
func splitFollowerBatches(raw []byte, leo int64) ([]followerBatch, error) {
	var out []followerBatch
	next := leo
	for pos := 0; pos < len(raw); {
		if len(raw)-pos < record.LogOverhead {
			return nil, fmt.Errorf("%w: %d bytes after the last batch", ErrCorrupt, len(raw)-pos)
		}
		length := int32(binary.BigEndian.Uint32(raw[pos+8:]))
		if length < 0 || int64(length) > int64(len(raw)-pos-record.LogOverhead) {
			return nil, fmt.Errorf("%w: batch at byte %d: length %d, %d bytes left", ErrCorrupt, pos, length, len(raw)-pos-record.LogOverhead)
		}
		end := pos + record.LogOverhead + int(length)
		b, err := record.Parse(raw[pos:end])
		if err != nil {
			return nil, err
		}
		if b.Magic != 2 {
			return nil, fmt.Errorf("%w: magic %d batch (a follower appends v2 batches only)", record.ErrUnsupported, b.Magic)
		}
		if err := b.Verify(); err != nil {
			return nil, err
		}
		if b.LastOffsetDelta < 0 || b.RecordCount < 0 || b.BaseOffset < 0 ||
			b.BaseOffset > math.MaxInt64-int64(b.LastOffsetDelta)-1 {
			return nil, fmt.Errorf("%w: batch at byte %d: base offset %d, lastOffsetDelta %d, recordCount %d",
				ErrCorrupt, pos, b.BaseOffset, b.LastOffsetDelta, b.RecordCount)
		}
		if b.BaseOffset < next {
			return nil, fmt.Errorf("%w: batch base offset %d below %d (the log end or the previous batch's next offset)",
				ErrOffsetOutOfRange, b.BaseOffset, next)
		}
		out = append(out, followerBatch{
			batchSpan: batchSpan{start: pos, end: end, first: b.BaseOffset, last: b.LastOffset(),
				maxTs: b.MaxTimestamp, count: int(b.RecordCount)},
			producer: b.ProducerID >= 0,
			startTxn: b.IsTransactional() && !b.IsControl() && b.ProducerID >= 0,
		})
		next = b.NextOffset()
		pos = end
	}
	return out, nil
}

// TruncateFullyAndStartAt empties the log and restarts it at offset, as a
// Kafka follower does when its leader's log no longer holds what it has
// (or starts after it): every segment leaves the log (renamed .deleted and
// unlinked by PurgeDeleted after file.delete.delay.ms; open Snapshots keep
// reading theirs), one empty active segment starts at offset, and the log
// start and end offsets (and the recovery point) become offset. offset
// may be below the old log start or above the old end. Open transactions
// are forgotten. Like a roll or a retention delete, the change is durable
// after the next Flush (which fsyncs the directory); a crash before that
// reopens the old log, or a suffix of its segments (they are renamed
// oldest first, as retention deletes them) beside the new empty one. A
// failed rename leaves the log as it was, but with the segments renamed
// before it gone at the next open: reopen the partition.
func (p *Partition) TruncateFullyAndStartAt(offset int64) error {
	if p.opts.ReadOnly {
		return ErrReadOnly
	}
	if offset < 0 || offset == math.MaxInt64 {
		return fmt.Errorf("%w: cannot start the log at %d", ErrOffsetOutOfRange, offset)
	}
	p.mu.Lock()
	n, err := p.truncateFullyLocked(offset)
	p.mu.Unlock()
	if n > 0 {
		p.notify()
	}
	return err
}

// truncateFullyLocked is TruncateFullyAndStartAt under mu; it returns how
// many segments left the log. markDeleted and createSegment mark the
// directory for the next Flush.
func (p *Partition) truncateFullyLocked(offset int64) (int, error) {
	if p.closed.Load() {
		return 0, ErrClosed
	}
	old := p.list()
	now := p.now()
	p.releaseReserved(old[len(old)-1])
	for _, s := range old {
		if err := p.markDeleted(s, now); err != nil {
			return 0, err
		}
	}
	s, err := p.createSegment(offset, p.cfg.Load())
	if err != nil {
		return 0, err
	}
	p.publish([]*Segment{s})
	p.logStart.Store(offset)
	p.logEnd.Store(offset)
	p.recoveryPoint.Store(offset)
	if p.firstDirty.Load() >= 0 {
		p.firstDirty.Store(offset)
	}
	p.w.producers = newProducerState()
	p.publishLSOLocked()
	p.removeSnapshotsLocked(func(int64) bool { return true })
	p.w.unflushed = 0
	for _, o := range old {
		o.Release()
	}
	p.stats.segmentsDeleted.Add(int64(len(old)))
	p.logger.Debug("engine: truncated the log fully", "segments", len(old), "startOffset", offset)
	return len(old), nil
}

// SetOpenTransactions replaces what the producer state knows of open
// transactions (producer id -> first offset; the producers' other state
// stays), as a Kafka broker restores it from its producer-state snapshot:
// an owner that saved OpenTransactions at Close may give them back, so
// that a later ABORT marker hides the transaction from its true first
// offset. Every first offset must lie in
// [LogStartOffset, LogEndOffset), else ErrOffsetOutOfRange and nothing
// changes.
func (p *Partition) SetOpenTransactions(txns map[int64]int64) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	ls, le := p.logStart.Load(), p.logEnd.Load()
	for pid, first := range txns {
		if first < ls || first >= le {
			return fmt.Errorf("%w: open transaction of producer %d at %d, log [%d, %d)", ErrOffsetOutOfRange, pid, first, ls, le)
		}
	}
	ps := p.w.producers
	for pid := range ps.open {
		if _, ok := txns[pid]; !ok {
			ps.setTxn(pid, ps.producers[pid], -1)
		}
	}
	for pid, first := range txns {
		ps.setTxn(pid, ps.entry(pid), first)
	}
	p.publishLSOLocked()
	return nil
}

// OpenTransactions returns, for each producer whose transaction has records
// in the log but no COMMIT or ABORT marker yet, the first offset of that
// transaction: the records a reader cannot yet tell committed from aborted.
// After a reopen it knows them from the producer snapshot it started from
// and the batches after it.
func (p *Partition) OpenTransactions() map[int64]int64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	return maps.Clone(p.w.producers.open)
}
