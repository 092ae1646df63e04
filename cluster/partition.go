package cluster

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"sync"
	"time"

	"github.com/topicfs/topicfs/backend"
	"github.com/topicfs/topicfs/engine/record"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Partition is one partition of a topic in the cluster. Appends are
// produces with acks=all from the cluster's idempotent producer; offsets
// are ListOffsets answers of the partition's leader.
type Partition struct {
	c     *Cluster
	t     *Topic
	topic string
	id    int32

	mu      sync.Mutex
	pending int           // records produced and not yet acknowledged or failed
	idle    chan struct{} // closed when pending drops to 0; nil while it is 0
}

var (
	_ backend.Partition = (*Partition)(nil)
	_ backend.Streamer  = (*Partition)(nil)
)

func (p *Partition) Topic() string { return p.topic }
func (p *Partition) ID() int       { return int(p.id) }

func (p *Partition) name() string { return fmt.Sprintf("%s/%d", p.topic, p.id) }

// AppendEach produces every record of groups, in order, and returns once
// each is acknowledged by all in-sync replicas (or has failed). The client
// cuts batches itself (at most max.message.bytes), so a group is not
// necessarily one batch. On failure the error is that of the first failed
// record, and first..last are the records before it (first > last if
// none); records after a failed one may still have been appended, as
// with any Kafka producer once a batch fails. If delivery.timeout.ms
// passes first, AppendEach returns ErrTimedOut while records in flight
// finish in the background (their outcome unknown to the caller, as in
// Kafka).
func (p *Partition) AppendEach(ctx context.Context, groups [][]record.Record) (first, last int64, err error) {
	w, err := p.EnqueueEach(ctx, groups)
	if err != nil {
		return 0, -1, err
	}
	return w.(*pendingProduce).wait(ctx)
}

// AppendLines produces each '\n'-terminated line of lines as a value-only
// record, as AppendEach does. The client cuts the batches, so batchBytes
// is not used.
func (p *Partition) AppendLines(ctx context.Context, lines []byte, _ int) (first, last int64, err error) {
	w, err := p.EnqueueLines(ctx, lines)
	if err != nil {
		return 0, -1, err
	}
	return w.(*pendingProduce).wait(ctx)
}

// EnqueueEach hands every record of groups to the producer, in order, and
// returns without waiting for their acknowledgement (backend.Enqueuer).
func (p *Partition) EnqueueEach(ctx context.Context, groups [][]record.Record) (backend.Pending, error) {
	n, size := 0, 0
	for _, g := range groups {
		for i := range g {
			n++
			size += len(g[i].Key) + len(g[i].Value)
			for _, h := range g[i].Headers {
				size += len(h.Value)
			}
		}
	}
	// The client keeps the records until they are acknowledged, which may
	// be after the caller reused its buffers: it gets a copy.
	arena := getBuf(size)
	keep := func(b []byte) []byte {
		if b == nil {
			return nil
		}
		arena = append(arena, b...)
		return arena[len(arena)-len(b) : len(arena) : len(arena)]
	}
	recs := getRecs(n)
	for _, g := range groups {
		for i := range g {
			r := &g[i]
			kr := kgo.Record{Topic: p.topic, Partition: p.id, Key: keep(r.Key), Value: keep(r.Value)}
			if r.Timestamp >= 0 {
				kr.Timestamp = time.UnixMilli(r.Timestamp)
			}
			for _, h := range r.Headers {
				kr.Headers = append(kr.Headers, kgo.RecordHeader{Key: h.Key, Value: keep(h.Value)})
			}
			recs = append(recs, kr)
		}
	}
	return p.enqueue(ctx, recs, arena)
}

// EnqueueLines hands each '\n'-terminated line of lines to the producer
// as a value-only record and returns without waiting (backend.Enqueuer).
func (p *Partition) EnqueueLines(ctx context.Context, lines []byte) (backend.Pending, error) {
	if len(lines) == 0 || lines[len(lines)-1] != '\n' {
		return nil, fmt.Errorf("cluster: append to %s: lines must end with a newline", p.name())
	}
	own := append(getBuf(len(lines)), lines...) // kept by the client, as in EnqueueEach
	recs := getRecs(bytes.Count(own, []byte{'\n'}))
	for rest := own; len(rest) > 0; {
		end := bytes.IndexByte(rest, '\n')
		recs = append(recs, kgo.Record{Topic: p.topic, Partition: p.id, Value: rest[:end:end]})
		rest = rest[end+1:]
	}
	return p.enqueue(ctx, recs, own)
}

// hold counts n records in flight; settle counts n of them done.
func (p *Partition) hold(n int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.pending == 0 {
		p.idle = make(chan struct{})
	}
	p.pending += n
}

func (p *Partition) settle(n int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.pending -= n
	if p.pending == 0 {
		close(p.idle)
		p.idle = nil
	}
}

// produceErr maps a produce failure. A timeout or a refusal for too few
// in-sync replicas is explained, if the partition's ISR is below
// min.insync.replicas, by ErrNotEnoughReplicas and a warning naming both:
// the client retries NOT_ENOUGH_REPLICAS until the delivery timeout, so
// the timeout is what it reports. A refused batch has the topic read
// again (renewProducer).
func (p *Partition) produceErr(ctx context.Context, err error) error {
	op := "append to " + p.name()
	// The rest of delivery.timeout.ms (deliveryBudget) bounds the look.
	dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), p.c.opts.DeliveryTimeout/10)
	defer cancel()
	switch s := sentinelOf(err); {
	case s == backend.ErrUnknownTopic || strings.Contains(err.Error(), kgoPurged):
		// The topic was deleted (and maybe made again) while the records
		// were buffered or in flight: like any Kafka producer's, they
		// fail; none is written to a topic made again.
		p.c.log.Warn("cluster: append failed: the topic was deleted while its records were in flight",
			"topic", p.topic, "partition", p.id, "err", err)
		return fmt.Errorf("cluster: %s: %w (%v)", op, backend.ErrUnknownTopic, err)
	case s == backend.ErrRecordTooLarge:
		// max.message.bytes may have been lowered by another client: read
		// it, which renews the producer if its batches are now too large.
		if rerr := p.t.refresh(dctx); rerr != nil {
			p.c.log.Debug("cluster: reading the topic after a refused batch", "topic", p.topic, "err", rerr)
		}
	case errors.Is(err, backend.ErrTimedOut), s == backend.ErrTimedOut, s == backend.ErrNotEnoughReplicas:
		st, serr := p.replication(dctx)
		if errors.Is(serr, backend.ErrUnknownTopic) { // deleted while the client waited for it
			return fmt.Errorf("cluster: %s: %w (%v)", op, backend.ErrUnknownTopic, err)
		}
		if serr == nil && p.warnISR(st, err) || s == backend.ErrNotEnoughReplicas {
			return fmt.Errorf("cluster: %s: %w (%v)", op, backend.ErrNotEnoughReplicas, err)
		}
	}
	err = mapErr(op, err)
	if errors.Is(err, backend.ErrTimedOut) || errors.Is(err, backend.ErrUnavailable) {
		// The writer sees only an errno, often from close(2), which shells
		// do not report: the log says what was lost and why.
		p.c.log.Warn("cluster: append failed: records not acknowledged within delivery.timeout.ms",
			"topic", p.topic, "partition", p.id, "delivery.timeout.ms", p.c.opts.DeliveryTimeout.Milliseconds(), "err", err)
	}
	return err
}

// kgoPurged is the text of the error kgo fails buffered records with when
// their topic is purged from the client (it does not export it).
const kgoPurged = "topic purged while buffered"

// warnISR logs, and reports, a partition whose in-sync replicas are fewer
// than min.insync.replicas, or a refusal that says so (err).
func (p *Partition) warnISR(st replicationState, err error) bool {
	below := len(st.ISR) < st.MinISR
	if below || sentinelOf(err) == backend.ErrNotEnoughReplicas {
		p.c.log.Warn("cluster: append refused: fewer in-sync replicas than min.insync.replicas (acks=all needs that many)",
			"topic", p.topic, "partition", p.id, "min.insync.replicas", st.MinISR,
			"isr", st.ISR, "replicas", st.Replicas, "leader", st.Leader, "err", err)
	}
	return below
}

// Sync returns once every record appended to the partition before it is
// acknowledged or failed, or after delivery.timeout.ms (ErrTimedOut).
// Only this partition's records are waited for, not the client's whole
// buffer (kgo's Flush would wait for every partition).
func (p *Partition) Sync(ctx context.Context) error {
	p.mu.Lock()
	idle := p.idle
	p.mu.Unlock()
	if idle == nil {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, p.c.opts.DeliveryTimeout)
	defer cancel()
	select {
	case <-idle:
		return nil
	case <-ctx.Done():
		return mapErr("sync "+p.name(), ctx.Err())
	}
}

// Special timestamps of ListOffsets.
const (
	latestTS   = -1 // the high watermark (or the last stable offset, read_committed)
	earliestTS = -2 // the log start offset
)

// Offsets returns the log start offset and the high watermark (two
// ListOffsets, sent together).
func (p *Partition) Offsets(ctx context.Context) (backend.Offsets, error) {
	return p.bounds(ctx, false)
}

// bounds lists the log start offset and the end: the high watermark, or
// with readCommitted the last stable offset.
func (p *Partition) bounds(ctx context.Context, readCommitted bool) (backend.Offsets, error) {
	var start, end int64
	var serr, err error
	together(
		func() { start, serr = p.listOffset(ctx, earliestTS, false) },
		func() { end, err = p.listOffset(ctx, latestTS, readCommitted) })
	if err = cmp.Or(serr, err); err != nil {
		return backend.Offsets{}, err
	}
	return backend.Offsets{LogStart: start, End: end}, nil
}

// together runs fns at once and returns when all have: requests that do
// not depend on each other cost the time of the slowest.
func together(fns ...func()) {
	var wg sync.WaitGroup
	for _, fn := range fns[1:] {
		wg.Go(fn)
	}
	fns[0]()
	wg.Wait()
}

// LastStable returns the last stable offset: where read_committed readers
// stop (the first offset of the oldest open transaction, else the high
// watermark).
func (p *Partition) LastStable(ctx context.Context) (int64, error) {
	return p.listOffset(ctx, latestTS, true)
}

// OffsetForTime returns the first offset whose timestamp is at least ts,
// or the high watermark if there is none.
func (p *Partition) OffsetForTime(ctx context.Context, ts int64) (int64, error) {
	off, err := p.listOffset(ctx, max(ts, 0), false)
	if err != nil {
		return 0, err
	}
	if off < 0 {
		return p.listOffset(ctx, latestTS, false)
	}
	return off, nil
}

// listOffset asks the partition's leader for the offset of ts.
func (p *Partition) listOffset(ctx context.Context, ts int64, readCommitted bool) (int64, error) {
	offs, errs := p.c.listOffsets(ctx, p.topic, []int32{p.id}, ts, readCommitted)
	if err := errs[p.id]; err != nil {
		err = mapErr("list offsets of "+p.name(), err)
		p.staleOn(err)
		return 0, err
	}
	return offs[p.id], nil
}

// listOffsets asks the leaders of partitions ids of topic for the offsets
// of ts (one request, which the client splits by leader), asking again for
// the partitions whose answer a leader change explains, within the request
// timeout. It returns the offset or the error of each partition.
func (c *Cluster) listOffsets(ctx context.Context, topic string, ids []int32, ts int64, readCommitted bool) (map[int32]int64, map[int32]error) {
	offs, errs := map[int32]int64{}, map[int32]error{}
	if err := c.usable(); err != nil {
		for _, id := range ids {
			errs[id] = err
		}
		return offs, errs
	}
	rctx, cancel := c.reqCtx(ctx)
	defer cancel()
	for wait := 20 * time.Millisecond; ; wait = min(2*wait, time.Second) {
		c.listOffsetsOnce(rctx, topic, ids, ts, readCommitted, offs, errs)
		var retry []int32
		for id, err := range errs {
			if leaderMoving(err) {
				retry = append(retry, id)
			} else if brokerGone(err) {
				// The leader the client knew left the cluster: learn the
				// new one.
				c.client.ForceMetadataRefresh()
				retry = append(retry, id)
			}
		}
		if len(retry) == 0 {
			return offs, errs
		}
		select {
		case <-rctx.Done():
			return offs, errs
		case <-time.After(wait):
		}
		ids = retry
	}
}

// staleOn has the topic read again at its next lookup if err says it
// changed (deleted, or fewer partitions than it had).
func (p *Partition) staleOn(err error) {
	if errors.Is(err, backend.ErrUnknownTopic) || errors.Is(err, backend.ErrUnknownPartition) {
		p.t.stale()
	}
}

// brokerGone reports a request that could not reach the broker the
// client's metadata names (removed, or restarting on another address).
func brokerGone(err error) bool {
	var op *net.OpError
	return errors.As(err, &op) && op.Op == "dial"
}

// leaderMoving reports the answers of a partition whose leadership is
// changing hands, which a new request to the new leader resolves.
func leaderMoving(err error) bool {
	for _, e := range []error{kerr.NotLeaderForPartition, kerr.LeaderNotAvailable, kerr.FencedLeaderEpoch,
		kerr.UnknownLeaderEpoch, kerr.ReplicaNotAvailable, kerr.BrokerNotAvailable, kerr.OffsetNotAvailable} {
		if errors.Is(err, e) {
			return true
		}
	}
	return false
}

// listOffsetsOnce sends one ListOffsets for ids and records each answer.
func (c *Cluster) listOffsetsOnce(ctx context.Context, topic string, ids []int32, ts int64, readCommitted bool,
	offs map[int32]int64, errs map[int32]error) {
	req := kmsg.NewPtrListOffsetsRequest()
	req.ReplicaID = -1
	if readCommitted {
		req.IsolationLevel = 1
	}
	rt := kmsg.NewListOffsetsRequestTopic()
	rt.Topic = topic
	for _, id := range ids {
		rp := kmsg.NewListOffsetsRequestTopicPartition()
		rp.Partition = id
		rp.Timestamp = ts
		rt.Partitions = append(rt.Partitions, rp)
	}
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(ctx, c.client)
	for _, id := range ids {
		errs[id] = err
		if err == nil {
			errs[id] = fmt.Errorf("the broker did not answer for %s/%d", topic, id)
		}
	}
	if err != nil {
		return
	}
	for _, t := range resp.Topics {
		for _, rp := range t.Partitions {
			if _, asked := errs[rp.Partition]; !asked || t.Topic != topic {
				continue
			}
			offs[rp.Partition], errs[rp.Partition] = rp.Offset, codeErr(rp.ErrorCode, nil)
			if errs[rp.Partition] == nil {
				delete(errs, rp.Partition)
			}
		}
	}
}

// Snapshot is the read-through mirror's (cluster/mirror.go): the segments
// of a local copy of what the cluster holds from offset from on.
// It ends at the high watermark asked for now (the last stable offset
// with Options.ReadCommitted), fetching only what the copy lacks.
func (p *Partition) Snapshot(ctx context.Context, from int64) (*backend.Snapshot, error) {
	var end int64
	if err := p.t.verifying(ctx, func() (err error) {
		end, err = p.listOffset(ctx, latestTS, p.c.opts.ReadCommitted)
		return err
	}); err != nil {
		return nil, err
	}
	return p.snapshot(ctx, from, end)
}

// SnapshotLast is Snapshot of the last n records (fewer if the log holds
// fewer): the bounds and the end are listed together, once.
func (p *Partition) SnapshotLast(ctx context.Context, n int64) (*backend.Snapshot, error) {
	var offs backend.Offsets
	if err := p.t.verifying(ctx, func() (err error) {
		offs, err = p.bounds(ctx, p.c.opts.ReadCommitted)
		return err
	}); err != nil {
		return nil, err
	}
	return p.snapshot(ctx, max(offs.End-n, offs.LogStart), offs.End)
}

// snapshot brings the local copy up to end and takes its segments from
// from on.
func (p *Partition) snapshot(ctx context.Context, from, end int64) (snap *backend.Snapshot, err error) {
	err = p.onCopy(func(mp *MirrorPartition) error {
		snap, err = mp.Snapshot(ctx, p.c.fetcher.Partition(p.topic, p.id), from, end)
		return err
	})
	return snap, err
}

// SnapshotStream is Snapshot returning as soon as the local copy holds
// records from from on; the rest of the fill runs in the background and
// stream hands it out (backend.Streamer). A view read end to end by cat
// then gets its first bytes while the partition is still being fetched.
func (p *Partition) SnapshotStream(ctx context.Context, from int64) (snap *backend.Snapshot, stream backend.Stream, err error) {
	var end int64
	if err := p.t.verifying(ctx, func() (err error) {
		end, err = p.listOffset(ctx, latestTS, p.c.opts.ReadCommitted)
		return err
	}); err != nil {
		return nil, nil, err
	}
	err = p.onCopy(func(mp *MirrorPartition) error {
		snap, stream, err = mp.Stream(ctx, p.c.fetcher.Partition(p.topic, p.id), from, end)
		return err
	})
	return snap, stream, err
}

// onCopy calls fn with the partition's local copy, kept open meanwhile.
func (p *Partition) onCopy(fn func(mp *MirrorPartition) error) error {
	var opened bool
	err := p.c.mirror.Use(p.c.clusterID, p.topic, p.id, func(mp *MirrorPartition) error {
		opened = true
		mp.Expect(p.t.topicID())
		return fn(mp)
	})
	if err != nil && !opened {
		return fmt.Errorf("cluster: local copy of %s: %w", p.name(), err)
	}
	return err
}
