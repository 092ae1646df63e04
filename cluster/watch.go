package cluster

import (
	"context"
	"sync"
	"time"
)

// pollInterval is how often a watched partition's high watermark is asked
// for: one ListOffsets per watched partition per interval, so that a
// record produced by any client shows in a growing view within it.
const pollInterval = 250 * time.Millisecond

// partKey names a partition of the cluster.
type partKey struct {
	topic string
	part  int32
}

// watcher polls one partition's high watermark while it has subscribers
// (guarded by Cluster.mu) and signals them when it changes.
type watcher struct {
	subs   map[chan struct{}]struct{}
	cancel context.CancelFunc
	done   chan struct{}
}

// Subscribe returns a channel that receives a value (never blocking; it
// holds one) after the partition grows: when an append of this backend is
// acknowledged, and when a poll (every pollInterval, while someone is
// subscribed) finds the high watermark moved. The first poll signals too:
// records may have come between the subscription and that poll. The
// returned function ends the subscription; the last one stops the polls.
func (p *Partition) Subscribe() (<-chan struct{}, func()) {
	c, key := p.c, partKey{p.topic, p.id}
	ch := make(chan struct{}, 1)
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return ch, func() {}
	}
	w := c.watchers[key]
	if w == nil {
		ctx, cancel := context.WithCancel(context.Background())
		w = &watcher{subs: map[chan struct{}]struct{}{}, cancel: cancel, done: make(chan struct{})}
		c.watchers[key] = w
		go p.poll(ctx, w)
	}
	w.subs[ch] = struct{}{}
	var once sync.Once
	return ch, func() {
		once.Do(func() {
			c.mu.Lock()
			defer c.mu.Unlock()
			delete(w.subs, ch)
			if len(w.subs) == 0 && c.watchers[key] == w {
				delete(c.watchers, key)
				w.cancel()
			}
		})
	}
}

// poll asks for the high watermark every pollInterval until ctx ends. A
// failed poll is retried at the next tick: the cluster may come back.
func (p *Partition) poll(ctx context.Context, w *watcher) {
	defer close(w.done)
	key := partKey{p.topic, p.id}
	tick := time.NewTicker(pollInterval)
	defer tick.Stop()
	last, first := int64(-1), true
	for {
		hw, err := p.listOffset(ctx, latestTS, false)
		if err == nil && (first || hw != last) {
			last, first = hw, false
			p.c.notify(key)
		}
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}

// stop ends the polls and waits for the poller (bounded by the request
// timeout its request runs under).
func (w *watcher) stop() {
	w.cancel()
	<-w.done
}

// notify signals the subscribers of key.
func (c *Cluster) notify(key partKey) {
	c.mu.Lock()
	defer c.mu.Unlock()
	w := c.watchers[key]
	if w == nil {
		return
	}
	for ch := range w.subs {
		select {
		case ch <- struct{}{}:
		default:
		}
	}
}
