package cluster

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/topicfs/topicfs/backend"
	"github.com/twmb/franz-go/pkg/kgo"
)

// pendingProduce is one call's records handed to the producer: it collects
// their outcomes (backend.Pending).
type pendingProduce struct {
	p      *Partition
	ctx    context.Context // the caller's, for the error it maps
	pctx   context.Context // the delivery budget the records carry
	cancel context.CancelFunc
	stop   func() bool // ends the deadline's watch of pctx
	recs   []kgo.Record
	buf    []byte // the bytes recs alias

	left  atomic.Int64
	over  chan struct{} // closed when every record finished or the deadline passed
	shut  sync.Once
	mu    sync.Mutex
	fails map[*kgo.Record]error

	once        sync.Once // the result, taken once
	first, last int64
	err         error
}

var _ backend.Pending = (*pendingProduce)(nil)

// enqueue hands recs to the producer and returns at once. The records do
// not carry the caller's context: the client fails every record buffered
// behind a canceled one in the partition (it keeps a partition's records
// gapless), so one writer's cancellation would fail the others'. They
// carry the delivery budget (deliveryBudget) instead.
func (p *Partition) enqueue(ctx context.Context, recs []kgo.Record, buf []byte) (*pendingProduce, error) {
	op := "append to " + p.name()
	w := &pendingProduce{p: p, ctx: ctx, recs: recs, buf: buf, over: make(chan struct{}), fails: map[*kgo.Record]error{}}
	if len(recs) == 0 {
		w.cancel, w.stop = func() {}, func() bool { return false }
		w.end()
		return w, nil
	}
	if err := p.c.usable(); err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("cluster: %s: %w", op, err) // the caller's: as it is
	}
	pr := p.c.currentProducer()
	if err := p.awaitProducerKnows(ctx, pr); err != nil {
		return nil, err
	}
	w.pctx, w.cancel = context.WithTimeout(context.WithoutCancel(ctx), deliveryBudget(p.c.opts.DeliveryTimeout))
	w.stop = context.AfterFunc(w.pctx, w.end)
	w.left.Store(int64(len(recs)))
	p.hold(len(recs))
	for i := range recs {
		pr.cl.Produce(w.pctx, &recs[i], w.finish)
	}
	return w, nil
}

// finish is every record's promise.
func (w *pendingProduce) finish(r *kgo.Record, err error) {
	if err != nil {
		w.mu.Lock()
		w.fails[r] = err
		w.mu.Unlock()
	}
	w.p.settle(1)
	if w.left.Add(-1) == 0 {
		w.stop()
		w.end()
		w.cancel() // nothing left to send: release the deadline's timer
	}
}

func (w *pendingProduce) end() { w.shut.Do(func() { close(w.over) }) }

// Done is closed when every record finished or the delivery deadline
// passed.
func (w *pendingProduce) Done() <-chan struct{} { return w.over }

// Wait returns the outcome, by the delivery deadline at the latest.
func (w *pendingProduce) Wait() (first, last int64, err error) {
	return w.wait(context.WithoutCancel(w.ctx))
}

// wait is Wait for a caller that may give up (ctx): it then gets its
// context's error at once, and its records go on, to their
// acknowledgement or the delivery deadline.
func (w *pendingProduce) wait(ctx context.Context) (first, last int64, err error) {
	select {
	case <-w.over:
	case <-ctx.Done():
		return 0, -1, fmt.Errorf("cluster: append to %s: %w", w.p.name(), ctx.Err())
	}
	w.once.Do(w.result)
	return w.first, w.last, w.err
}

// result sets the outcome once over is closed.
func (w *pendingProduce) result() {
	defer w.cancel() // all finished, or the deadline passed: fails what was not sent
	p := w.p
	w.first, w.last = 0, -1
	if len(w.recs) == 0 {
		return
	}
	if w.left.Load() == 0 {
		// The client is done with every record: their memory serves the
		// next call.
		defer w.recycle()
	} else {
		w.err = p.produceErr(w.ctx, fmt.Errorf("%w: records not acknowledged within delivery.timeout.ms (%s)",
			backend.ErrTimedOut, p.c.opts.DeliveryTimeout))
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	for i := range w.recs {
		if ferr, failed := w.fails[&w.recs[i]]; failed {
			if i > 0 {
				w.first, w.last = w.recs[0].Offset, w.recs[i-1].Offset
			}
			w.err = p.produceErr(w.ctx, ferr)
			p.staleOn(w.err)
			return
		}
	}
	p.c.notify(partKey{p.topic, p.id})
	w.first, w.last = w.recs[0].Offset, w.recs[len(w.recs)-1].Offset
}

// Enqueued records and the bytes they alias are reused from one call to
// the next: fresh megabytes per WRITE cost page faults and zeroing, and
// the runtime hands them back to the kernel between calls.
var (
	recsPool sync.Pool // *[]kgo.Record
	bufPool  sync.Pool // *[]byte
)

// maxPooled bounds the slices kept for reuse (bytes, or bytes of records).
const maxPooled = 8 << 20

func getRecs(n int) []kgo.Record {
	if v, ok := recsPool.Get().(*[]kgo.Record); ok && cap(*v) >= n {
		return (*v)[:0]
	}
	return make([]kgo.Record, 0, n)
}

func getBuf(n int) []byte {
	if v, ok := bufPool.Get().(*[]byte); ok && cap(*v) >= n {
		return (*v)[:0]
	}
	return make([]byte, 0, n)
}

// recycle returns the call's records and bytes for reuse; the client holds
// none of them any more.
func (w *pendingProduce) recycle() {
	if cap(w.recs)*int(unsafe.Sizeof(kgo.Record{})) <= maxPooled {
		recs := w.recs[:cap(w.recs)]
		clear(recs)
		recsPool.Put(&recs)
	}
	if cap(w.buf) <= maxPooled {
		buf := w.buf[:0]
		bufPool.Put(&buf)
	}
	w.recs, w.buf = w.recs[:0:0], nil
}

// awaitProducerKnows makes sure the producer's metadata has the partition
// before records are handed to it: one added since the producer loaded
// the topic (CreatePartitions, by this mount or another client) would
// otherwise fail every record at once ("invalid record partitioning
// choice"), as the client rereads metadata only every few minutes. It
// asks for a refresh and waits for it, at most the request timeout.
func (p *Partition) awaitProducerKnows(ctx context.Context, pr *producer) error {
	if !inMetadata(pr.cl, p.topic, 0) {
		return nil // the topic is not loaded yet: the first produce loads it whole
	}
	if inMetadata(pr.cl, p.topic, p.id) {
		return nil
	}
	rctx, cancel := p.c.reqCtx(ctx)
	defer cancel()
	for wait := 5 * time.Millisecond; ; wait = min(2*wait, 200*time.Millisecond) {
		pr.cl.ForceMetadataRefresh()
		select {
		case <-rctx.Done():
			return mapErr("append to "+p.name(), fmt.Errorf("%w: the producer's metadata does not list the partition", backend.ErrUnknownPartition))
		case <-time.After(wait):
		}
		if inMetadata(pr.cl, p.topic, p.id) {
			return nil
		}
	}
}

// inMetadata reports whether the client's metadata lists partition id of
// topic, with a leader or without one: a partition electing a leader has
// a negative leader but a load error, and the client retries its records
// within the delivery timeout, so only a missing partition is waited for.
func inMetadata(cl *kgo.Client, topic string, id int32) bool {
	leader, epoch, err := cl.PartitionLeader(topic, id)
	return leader >= 0 || epoch >= 0 || err != nil
}
