package fusefs

import "sync"

// workAhead runs a goroutine that produces the items a sequential
// consumer will ask for next (a view handle's rendered chunks; .log chunks
// are loaded ahead by the engine's SegmentReader), in order, each at a
// position: up to len(ring) of them wait. The goroutine goes on from one
// item to the next while there is room, so it never waits to be asked: a
// goroutine started, or woken, per item starts only when the scheduler
// gets to it, a delay every item would pay on top of its own time
// (docs/PERFORMANCE.md, "Mount read"). The consumer takes items by
// position; asking for another position (a seek) drops what waits and
// stops the goroutine after the item it is making.
type workAhead[T any] struct {
	mu      sync.Mutex
	ring    []T // items made and not taken: count of them from head, in order (aheadDepth long once started)
	head    int
	count   int
	running bool
	next    int64 // position of the item the goroutine makes next; -1: stop
	closed  bool  // close was called: start no more
	ended   bool  // the last item made said not to go on: resume only afresh (count 0)
	waiting bool  // take waits on ready for the item being made
	ready   chan struct{}
	wg      sync.WaitGroup
	// failed is set after produce panicked: the goroutine never starts
	// again, and the consumer makes its items itself (recover.go).
	failed  bool
	onPanic func(v any, stack []byte) // reports such a panic; set before the first start
}

// aheadDepth is how many items a workAhead makes ahead of its consumer.
const aheadDepth = 2

// produceFunc makes the item at pos and returns it, the position of the
// item after it and whether to go on to that one.
type produceFunc[T any] func(pos int64) (item T, next int64, more bool)

// take returns the waiting item for which at is true, dropping the ones
// before it, and waits for the item being made if it is at pos (where the
// goroutine works). ok is false if there is none; the goroutine then stops
// after its item.
func (w *workAhead[T]) take(pos int64, at func(*T) bool, drop func(T)) (item T, ok bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for {
		if w.count == 0 {
			if !w.running || w.next != pos || w.waiting {
				w.next = -1
				return item, false
			}
			w.waiting = true
			w.mu.Unlock()
			<-w.ready
			w.mu.Lock()
			continue
		}
		var zero T
		it := w.ring[w.head]
		w.ring[w.head] = zero
		w.head = (w.head + 1) % len(w.ring)
		w.count--
		if at(&it) {
			return it, true
		}
		drop(it)
	}
}

// idle reports whether start would start the goroutine now (not closed,
// not running, room in the ring): callers check it before they build the
// produce closure, which would otherwise be allocated per READ.
func (w *workAhead[T]) idle() bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.idleLocked()
}

func (w *workAhead[T]) idleLocked() bool {
	return !w.closed && !w.failed && !w.running && w.count < aheadDepth && (w.count == 0 || !w.ended)
}

// start makes sure the goroutine runs: from pos if nothing waits, else
// after the last item waiting (unless that item said not to go on: the
// caller vouches for pos only). Nothing happens after close or while the
// ring is full.
func (w *workAhead[T]) start(pos int64, produce produceFunc[T], drop func(T)) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if !w.idleLocked() {
		return
	}
	if w.ring == nil {
		w.ring = make([]T, aheadDepth)
	}
	if w.count == 0 {
		w.next, w.ended = pos, false
	}
	if w.ready == nil {
		w.ready = make(chan struct{}, 1)
	}
	w.running = true
	w.wg.Go(func() { w.run(produce, drop) })
}

// run makes items while there is room, the position was not abandoned and
// produce says to go on.
func (w *workAhead[T]) run(produce produceFunc[T], drop func(T)) {
	w.mu.Lock()
	for w.next >= 0 && w.count < len(w.ring) {
		pos := w.next
		w.mu.Unlock()
		it, next, more, ok := w.produceGuarded(produce, pos)
		w.mu.Lock()
		if !ok {
			w.failed, w.next = true, -1
			break
		}
		if w.next != pos {
			drop(it) // a seek, a stop or a close meanwhile
			break
		}
		w.ring[(w.head+w.count)%len(w.ring)] = it
		w.count++
		w.next = next
		w.wake()
		if !more {
			w.ended = true
			break
		}
	}
	w.running = false
	w.wake() // a take may wait for an item this goroutine no longer makes
	w.mu.Unlock()
}

// wake lets a waiting take go on. Callers hold mu.
func (w *workAhead[T]) wake() {
	if w.waiting {
		w.waiting = false
		w.ready <- struct{}{}
	}
}

// stop stops the goroutine, waits for it and drops the items waiting; a
// later start begins afresh.
func (w *workAhead[T]) stop(drop func(T)) {
	w.mu.Lock()
	w.next = -1
	w.mu.Unlock()
	w.wg.Wait()
	w.mu.Lock()
	defer w.mu.Unlock()
	var zero T
	for ; w.count > 0; w.count-- {
		drop(w.ring[w.head])
		w.ring[w.head] = zero
		w.head = (w.head + 1) % len(w.ring)
	}
}

// close is stop for good: start does nothing afterwards.
func (w *workAhead[T]) close(drop func(T)) {
	w.mu.Lock()
	w.closed = true
	w.mu.Unlock()
	w.stop(drop)
}
