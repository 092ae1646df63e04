// One partition's copy in a Mirror: Snapshot fetches what the copy lacks of
// a reader's range and hands out its segments; the cap deletes the oldest
// segments no reader holds.

package cluster

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"sync"
	"sync/atomic"
	"time"

	"github.com/topicfs/topicfs/backend"
	"github.com/topicfs/topicfs/engine"
	"github.com/topicfs/topicfs/engine/index"
	"github.com/topicfs/topicfs/engine/record"
)

// Source is where a MirrorPartition fetches from: one cluster partition,
// read_uncommitted (PartitionFetcher). Fetch returns whole batches from
// the one holding offset on, about maxBytes of them (0: as many as the
// source's default; at least one batch); LogStartOffset the cluster's log
// start.
type Source interface {
	Fetch(ctx context.Context, offset int64, maxBytes int32) (*FetchResult, error)
	LogStartOffset(ctx context.Context) (int64, error)
}

// fetchRamp are the sizes the first fetches of a fill ask for, before the
// source's default: a reader of the last few records (by-offset/-N) gets
// them with one small fetch, and a long fill pays a round trip or two.
var fetchRamp = [...]int32{64 << 10, 256 << 10}

// MirrorStats are a partition copy's counters since it was opened.
type MirrorStats struct {
	Fetches         int64 // fetches that returned
	FetchedBytes    int64 // bytes of batches appended to the copy
	Restarts        int64 // times the copy was emptied to restart at another offset
	SegmentsDeleted int64 // segments the cap deleted
}

// MirrorPartition is the copy of one cluster partition: an engine
// partition holding the batches fetched, one contiguous offset range
// [Range) of the cluster's log. Safe for concurrent use; Snapshot calls
// run one at a time.
type MirrorPartition struct {
	m   *Mirror
	key mirrorKey
	dir string
	p   *engine.Partition

	// sem is held by the Snapshot call that fills the copy, by the cap
	// and by close; it guards the fields below it.
	sem     chan struct{}
	topicID [16]byte
	floor   int64 // a Snapshot in progress needs the segments holding offsets >= floor
	broken  bool  // an append failed: the copy restarts before the next fill
	closed  bool

	hmu   sync.Mutex
	holds map[*engine.Segment]int // retained mirrorSegments per segment

	filling atomic.Pointer[mirrorStream] // a Stream's fill in the background

	// want is the topic id the cluster's metadata gives now (Expect): a
	// copy of another id (a topic deleted and made again under the same
	// name) starts over at the next fill, and no reader joins its fill.
	want atomic.Pointer[[16]byte]

	used int64        // Mirror.clock when last asked for (guarded by Mirror.mu)
	pins atomic.Int32 // Mirror.Use calls in progress: not to be evicted

	fetches, fetchedBytes, restarts, deleted atomic.Int64
}

func newMirrorPartition(m *Mirror, key mirrorKey, dir string, p *engine.Partition) *MirrorPartition {
	return &MirrorPartition{m: m, key: key, dir: dir, p: p, sem: make(chan struct{}, 1),
		floor: math.MaxInt64, holds: map[*engine.Segment]int{}}
}

// Range returns the offsets the copy holds: [start, end).
func (mp *MirrorPartition) Range() (start, end int64) {
	return mp.p.LogStartOffset(), mp.p.LogEndOffset()
}

// SizeBytes returns the bytes of the copy's segments.
func (mp *MirrorPartition) SizeBytes() int64 {
	var n int64
	for _, s := range mp.p.Segments() {
		n += s.Size
	}
	return n
}

// Stats returns the copy's counters.
func (mp *MirrorPartition) Stats() MirrorStats {
	return MirrorStats{Fetches: mp.fetches.Load(), FetchedBytes: mp.fetchedBytes.Load(),
		Restarts: mp.restarts.Load(), SegmentsDeleted: mp.deleted.Load()}
}

func (mp *MirrorPartition) acquire(ctx context.Context) error {
	select {
	case mp.sem <- struct{}{}:
		return nil
	case <-ctx.Done():
		return context.Cause(ctx)
	}
}

func (mp *MirrorPartition) tryAcquire() bool {
	select {
	case mp.sem <- struct{}{}:
		return true
	default:
		return false
	}
}

func (mp *MirrorPartition) release() { <-mp.sem }

// Snapshot makes sure the copy holds the cluster partition's records from
// from (backend.FromStart: the cluster's log start) to end (the high
// watermark or last stable offset the reader got when it opened), fetching
// through src only what the copy lacks, and returns the copy's segments
// from the one holding from, cut at end: Offsets{LogStart: from, End}.
// End is less than end only if the cluster no longer had the records up to
// end. A copy that does not reach back to from restarts at from (readers
// holding its older segments keep them); one that ends before from is
// filled up to it when the gap is small (MirrorOptions.FillGapBytes),
// else restarts too. For read_committed readers (end a last stable
// offset), the copy goes on past end, up to the high watermark, until
// every transaction open below end has its marker: the segments' aborted
// transactions (AbortedTxns) then hide every aborted record below end.
// Errors: backend.ErrOffsetOutOfRange (from below the cluster's log
// start, or end below from), the fetch's errors, ctx's.
func (mp *MirrorPartition) Snapshot(ctx context.Context, src Source, from, end int64) (*backend.Snapshot, error) {
	// A fill in the background, which the next caller of an overlapping
	// range joins instead of queueing behind it (each fetch of a fill is
	// bounded by the request timeout, a queue of fills is not).
	r, snap, err := mp.reader(ctx, src, from, end)
	if r == nil {
		return snap, err
	}
	defer r.Close()
	snap, _, err = r.next(ctx, r.from, true)
	return snap, err
}

// beginLocked starts a fill of [from, end) (Snapshot, Stream): it
// resolves backend.FromStart, checks the range, keeps the cap from the
// segments holding from on (floor, which the caller resets when the fill
// ends) and restarts the copy at from if it must.
func (mp *MirrorPartition) beginLocked(ctx context.Context, src Source, from, end int64) (int64, error) {
	if mp.closed {
		return 0, fmt.Errorf("cluster: mirror %s: %w", mp.dir, backend.ErrClosed)
	}
	if from == backend.FromStart {
		start, err := src.LogStartOffset(ctx)
		if err != nil {
			return 0, err
		}
		from = start
	}
	if from < 0 || end < from {
		return 0, fmt.Errorf("%w: records [%d, %d) of %s-%d", backend.ErrOffsetOutOfRange, from, end, mp.key.topic, mp.key.partition)
	}
	if err := mp.adoptWantedLocked(); err != nil {
		return 0, err
	}
	if err := mp.prepareLocked(from); err != nil {
		return 0, err
	}
	mp.floor = from
	return from, nil
}

// Expect tells the copy the topic id the cluster's metadata gives now
// (zero: not known, as from a broker before Kafka 2.8).
func (mp *MirrorPartition) Expect(id [16]byte) {
	if id != ([16]byte{}) {
		mp.want.Store(&id)
	}
}

// wanted reports whether a copy made of topic id is of the topic the
// metadata names now (an unknown id on either side counts as the same).
func (mp *MirrorPartition) wanted(id [16]byte) bool {
	w := mp.want.Load()
	return w == nil || id == ([16]byte{}) || *w == id
}

// adoptWantedLocked marks a copy of another topic id than Expect's for a
// restart (prepareLocked) and takes the new id as the copy's.
func (mp *MirrorPartition) adoptWantedLocked() error {
	if mp.wanted(mp.topicID) {
		return nil
	}
	id := *mp.want.Load()
	mp.m.logger.Info("cluster: the topic was deleted and made again: its local copy starts over",
		"topic", mp.key.topic, "partition", mp.key.partition)
	mp.broken = true
	if err := mp.m.writeTopicID(mp.dir, id); err != nil {
		return fmt.Errorf("cluster: mirror %s: %w", mp.dir, err)
	}
	mp.topicID = id
	return nil
}

// prepareLocked restarts the copy at from unless it holds from, or ends
// shortly before it.
func (mp *MirrorPartition) prepareLocked(from int64) error {
	start, end := mp.Range()
	switch {
	case mp.broken:
	case from >= start && from <= end:
		return nil
	case from > end && end > start && mp.gapSmall(start, end, from):
		return nil
	}
	return mp.restartLocked(from)
}

// gapSmall says whether fetching [end, from) costs at most FillGapBytes,
// by the copy's own bytes per offset.
func (mp *MirrorPartition) gapSmall(start, end, from int64) bool {
	limit := mp.m.opts.FillGapBytes
	if limit < 0 {
		return false
	}
	perOffset := max(mp.SizeBytes()/(end-start), 1)
	return from-end <= limit/perOffset
}

// restartLocked empties the copy and starts it at offset.
func (mp *MirrorPartition) restartLocked(offset int64) error {
	if err := mp.p.TruncateFullyAndStartAt(offset); err != nil {
		return fmt.Errorf("cluster: mirror %s: %w", mp.dir, err)
	}
	mp.broken = false
	mp.restarts.Add(1)
	mp.purge()
	return nil
}

// purge unlinks the files of segments that left the copy (readers that
// hold them keep their open files).
func (mp *MirrorPartition) purge() {
	if err := mp.p.PurgeDeleted(time.Now()); err != nil {
		mp.m.logger.Warn("cluster: removing deleted mirror segments", "dir", mp.dir, "err", err)
	}
}

// errDiverged reports fetched batches that overlap what the copy holds:
// the cluster's log is no longer the one the copy was made from.
var errDiverged = errors.New("the cluster's log diverged from the mirror")

// fillLocked runs fill s: it fetches from the copy's end until it
// reaches the end of s (the largest end of the readers that joined it,
// mirrorStream.target) and knows the outcome of every transaction open
// below it, or the cluster has no more. The markers of the transactions
// a read_committed end (a last stable offset) leaves open lie below the
// high watermark of that moment: the first high watermark seen after the
// end last moved bounds the extra fetching. It hands what arrived to the
// waiting readers after each append; once it has handed anything out it
// cannot restart the copy, and fails instead.
func (mp *MirrorPartition) fillLocked(ctx context.Context, src Source, s *mirrorStream) error {
	from, end := s.from, int64(-1)
	bound := int64(-1)
	restarted := false
	fetches0 := mp.fetches.Load()
	var ahead *prefetch
	defer func() { ahead.drop() }()
	for {
		le := mp.p.LogEndOffset()
		if s.target(le, &end, &bound) {
			return nil
		}
		res, err := ahead.take(le, s)
		ahead = nil
		if res == nil && err == nil {
			// A fetch of its own, so that readers asking for more while
			// it travels are answered (take).
			res, err = startPrefetch(ctx, src, le, mp.fetchSize(fetches0)).take(le, s)
		}
		if err != nil {
			return err
		}
		mp.fetches.Add(1)
		if bound < 0 {
			bound = res.HighWatermark
		}
		if next := res.NextOffset; len(res.Batches) > 0 && (next < end || next < bound) {
			// The next answer travels while this one is written.
			ahead = startPrefetch(ctx, src, next, mp.fetchSize(fetches0))
		}
		changed, err := mp.checkTopicIDLocked(res.TopicID)
		if err == nil && !changed && len(res.Batches) > 0 {
			err = mp.appendFetchedLocked(res.Batches)
		}
		switch {
		case (changed || errors.Is(err, errDiverged)) && s.handedOut():
			return fmt.Errorf("%w: %s-%d: the topic was recreated or its log replaced while it was being read",
				backend.ErrUnavailable, mp.key.topic, mp.key.partition)
		case (changed || errors.Is(err, errDiverged)) && !restarted:
			// Another topic of the same name, or another log: start over.
			restarted, bound = true, -1
			if err := mp.restartLocked(from); err != nil {
				return err
			}
			continue
		case err != nil:
			return fmt.Errorf("cluster: mirror %s-%d: %w", mp.key.topic, mp.key.partition, err)
		case len(res.Batches) == 0 && res.HighWatermark > le:
			return fmt.Errorf("%w: %s-%d: a fetch at %d returned no records below the high watermark %d",
				backend.ErrUnavailable, mp.key.topic, mp.key.partition, le, res.HighWatermark)
		case len(res.Batches) == 0:
			return nil // the cluster has no more (end was past its high watermark)
		}
		mp.enforceLocked()
		s.progress()
	}
}

// fetchSize is the size the next fetch of a fill that began when the
// copy had made fetches0 fetches asks for (0: the source's default).
func (mp *MirrorPartition) fetchSize(fetches0 int64) int32 {
	if n := int(mp.fetches.Load() - fetches0); n >= 0 && n < len(fetchRamp) {
		return fetchRamp[n]
	}
	return 0
}

// prefetch is a fetch sent before the answer before it was written.
type prefetch struct {
	at   int64
	done chan struct{}
	res  *FetchResult
	err  error
}

func startPrefetch(ctx context.Context, src Source, at int64, size int32) *prefetch {
	pf := &prefetch{at: at, done: make(chan struct{})}
	go func() {
		defer close(pf.done)
		pf.res, pf.err = src.Fetch(ctx, at, size)
	}()
	return pf
}

// take returns the prefetched answer if it was fetched at le (nil, nil if
// there is none or it is of another offset: the copy restarted or was cut
// since). While it waits, it answers the readers of a streaming fill s
// that ask for more (mirrorStream.progress).
func (pf *prefetch) take(le int64, s *mirrorStream) (*FetchResult, error) {
	if pf == nil {
		return nil, nil
	}
	for waiting := true; waiting; {
		select {
		case <-pf.done:
			waiting = false
		case <-s.ask:
			s.progress()
		}
	}
	if pf.at != le {
		return nil, nil
	}
	return pf.res, pf.err
}

// drop waits for a prefetch nobody will take: a fill returns with no
// fetch of its left running.
func (pf *prefetch) drop() {
	if pf != nil {
		<-pf.done
	}
}

// reachedAt says whether a fill of the copy, now ending at le, has all
// of it up to end: le is past end, and every transaction open below end
// has its marker, or the copy reached bound (the high watermark when the
// fill began, past which no such marker can lie).
func (mp *MirrorPartition) reachedAt(le, end, bound int64) bool {
	return le >= end && (!mp.openBelow(end) || (bound >= 0 && le >= bound))
}

// reached is reachedAt for the copy's end now.
func (mp *MirrorPartition) reached(end, bound int64) bool {
	return mp.reachedAt(mp.p.LogEndOffset(), end, bound)
}

// openBelow says whether a transaction with records below end has no
// marker in the copy yet.
func (mp *MirrorPartition) openBelow(end int64) bool {
	for _, first := range mp.p.OpenTransactions() {
		if first < end {
			return true
		}
	}
	return false
}

// checkTopicIDLocked records the topic id a fetch was routed by; it says
// whether it differs from the id the copy was made of.
func (mp *MirrorPartition) checkTopicIDLocked(id [16]byte) (changed bool, err error) {
	if id == ([16]byte{}) || id == mp.topicID {
		return false, nil
	}
	changed = mp.topicID != [16]byte{}
	if err := mp.m.writeTopicID(mp.dir, id); err != nil {
		return changed, err
	}
	mp.topicID = id
	return changed, nil
}

// appendFetchedLocked appends a fetch's batches to the copy. An empty copy
// whose first batch begins before the copy's start (a fetch from an offset
// inside a batch) restarts at that batch, as a Kafka follower does.
func (mp *MirrorPartition) appendFetchedLocked(raw []byte) error {
	if len(raw) < record.LogOverhead {
		return fmt.Errorf("%w: %d bytes of batches", backend.ErrCorrupt, len(raw))
	}
	start, end := mp.Range()
	if base := int64(binary.BigEndian.Uint64(raw)); base < end {
		if start != end {
			return fmt.Errorf("%w: batch at %d, copy up to %d", errDiverged, base, end)
		}
		if err := mp.p.TruncateFullyAndStartAt(base); err != nil {
			return err
		}
		mp.purge()
	}
	if _, _, err := mp.p.AppendAsFollower(raw); err != nil {
		mp.broken = true
		return err
	}
	mp.fetchedBytes.Add(int64(len(raw)))
	return nil
}

// snapshotLocked returns the copy's segments from the one holding from,
// cut at end.
func (mp *MirrorPartition) snapshotLocked(from, end int64) (*backend.Snapshot, error) {
	es := mp.p.Snapshot()
	defer es.Release()
	if len(es.Segments) == 0 {
		return nil, fmt.Errorf("cluster: mirror %s: %w", mp.dir, backend.ErrClosed)
	}
	end = min(end, es.LogEndOffset)
	if from < es.LogStartOffset || from > end {
		return nil, fmt.Errorf("%w: %s-%d: the copy holds [%d, %d), asked from %d",
			backend.ErrOffsetOutOfRange, mp.key.topic, mp.key.partition, es.LogStartOffset, end, from)
	}
	k := es.SegmentFor(from)
	n := 1
	for k+n < len(es.Segments) && es.Segments[k+n].BaseOffset() < end {
		n++
	}
	var later []index.AbortedTxn // markers past end: they still hide records below it
	for _, s := range es.Segments[k+n:] {
		later = append(later, s.AbortedTxns()...)
	}
	out := make([]backend.Segment, 0, n)
	releaseAll := func() {
		for _, s := range out {
			s.Release()
		}
	}
	for i, s := range es.Segments[k : k+n] {
		ms := &mirrorSegment{seg: s, mp: mp, size: s.Size(), next: s.NextOffset(), aborted: s.AbortedTxns()}
		if ms.next > end {
			if err := ms.cut(end); err != nil {
				releaseAll()
				return nil, err
			}
		}
		if i == n-1 {
			ms.aborted = append(ms.aborted, later...)
		}
		ms.Retain()
		out = append(out, ms)
	}
	return backend.NewSnapshot(out, backend.Offsets{LogStart: from, End: end}, releaseAll), nil
}

// enforceLocked deletes the oldest segments past the cap that no reader
// holds and that lie wholly below a Snapshot in progress.
func (mp *MirrorPartition) enforceLocked() {
	limit := mp.m.opts.RetentionBytes
	if limit < 0 || mp.closed {
		return
	}
	es := mp.p.Snapshot()
	var total int64
	for _, s := range es.Segments {
		total += s.Size()
	}
	n := 0
	for _, s := range es.Segments[:max(len(es.Segments)-1, 0)] {
		if total <= limit || s.NextOffset() > mp.floor || mp.held(s) {
			break
		}
		total -= s.Size()
		n++
	}
	es.Release()
	if n == 0 {
		return
	}
	if _, err := mp.p.DeleteOldestSegments(n, "mirror retention bytes"); err != nil {
		mp.m.logger.Warn("cluster: deleting mirror segments", "dir", mp.dir, "err", err)
		return
	}
	mp.deleted.Add(int64(n))
	mp.purge()
}

func (mp *MirrorPartition) held(s *engine.Segment) bool {
	mp.hmu.Lock()
	defer mp.hmu.Unlock()
	return mp.holds[s] > 0
}

// hold counts a reader's reference to s; when the last one goes, the cap
// runs (unless a Snapshot is filling the copy: it runs the cap itself).
func (mp *MirrorPartition) hold(s *engine.Segment, delta int) {
	mp.hmu.Lock()
	n := mp.holds[s] + delta
	if n > 0 {
		mp.holds[s] = n
	} else {
		delete(mp.holds, s)
	}
	mp.hmu.Unlock()
	if n == 0 && mp.tryAcquire() {
		mp.enforceLocked()
		mp.release()
	}
}

// close closes the copy; clean marks it closed cleanly, with the
// transactions still open, so that the next open trusts it. It waits for
// a Snapshot in progress (bounded by that call's context and the fetch
// timeout) and stops a Stream's fill.
func (mp *MirrorPartition) close(clean bool) error {
	if s := mp.filling.Load(); s != nil {
		s.cancel() // its reader gets an error; the copy keeps what arrived
	}
	mp.sem <- struct{}{}
	defer mp.release()
	return mp.closeLocked(clean)
}

// closeLocked is close for a caller holding sem.
func (mp *MirrorPartition) closeLocked(clean bool) error {
	if mp.closed {
		return nil
	}
	mp.closed = true
	open := mp.p.OpenTransactions()
	if err := mp.p.Close(); err != nil {
		return fmt.Errorf("cluster: mirror %s: %w", mp.dir, err)
	}
	if clean && !mp.broken {
		return mp.m.writeClean(mp.dir, open)
	}
	return nil
}

// idle reports that no reader holds a segment of the copy, and no Use
// call has it.
func (mp *MirrorPartition) idle() bool {
	mp.hmu.Lock()
	defer mp.hmu.Unlock()
	return len(mp.holds) == 0 && mp.pins.Load() == 0
}
