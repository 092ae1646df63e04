package keyindex

import (
	"context"
	"errors"

	"github.com/topicfs/topicfs/backend"
	"github.com/topicfs/topicfs/engine/record"
)

// Entry is a key's latest live record.
type Entry struct {
	Key       []byte
	Value     []byte
	Offset    int64
	Timestamp int64
}

// listChunk is how many slots List copies per hold of the lock.
const listChunk = 4096

// ready waits for the first build, then catches up with what was appended
// since, so a reader sees every record appended before its call.
func (x *Index) ready(ctx context.Context) error {
	select {
	case <-x.built:
	case <-ctx.Done():
		return ctx.Err()
	}
	x.mu.Lock()
	defer x.mu.Unlock()
	if x.closed {
		return backend.ErrClosed
	}
	return x.catchUp(ctx)
}

// Lookup returns the latest live record of the key r names, or an error
// wrapping ErrNotFound. It costs one table probe and one read of the
// record it points at; only if that record holds another key (two keys
// whose hashes collide, a chance of about n²/2⁶⁵ with n keys) does it
// fall back to scanning the partition.
func (x *Index) Lookup(ctx context.Context, r Ref) (Entry, error) {
	if err := x.ready(ctx); err != nil {
		return Entry{}, err
	}
	h := x.refHash(r)
	x.mu.Lock()
	word, ok := x.t.get(h)
	x.mu.Unlock()
	if !ok {
		return Entry{}, ErrNotFound
	}
	off := int64(word &^ tombBit)
	e, found, err := x.readAt(ctx, off)
	switch {
	case err != nil:
		return Entry{}, err
	case !found:
		// Retention deleted the record (cleaning keeps each key's latest
		// record): the key is gone.
		x.drop(h, word)
		return Entry{}, ErrNotFound
	case !r.matches(e.Key):
		if !x.warned.Swap(true) {
			x.log.Warn("key index: two keys share a hash; answering by a scan of the partition", "key", r.String())
		}
		return x.scanFor(ctx, r)
	case e.Value == nil:
		return Entry{}, ErrNotFound
	}
	return e, nil
}

// drop removes hash h if it still holds word.
func (x *Index) drop(h, word uint64) {
	x.mu.Lock()
	defer x.mu.Unlock()
	if x.t == nil {
		return
	}
	if w, ok := x.t.get(h); ok && w == word {
		x.t.remove(h)
		x.noteCounts()
	}
}

// readAt reads the record at exactly offset off; found is false when no
// record has that offset any more. The point read of a RecordReader
// answers when it finds the record or a later one; when it finds none
// (the log end, or a list of segments changing under it) the answer comes
// from a Snapshot, which is consistent.
func (x *Index) readAt(ctx context.Context, off int64) (e Entry, found bool, err error) {
	got := int64(-1)
	take := func(b *record.Batch, r *record.Record) error {
		got = r.Offset
		if r.Offset != off || b.IsControl() {
			return nil
		}
		found = true
		e = Entry{Key: clone(r.Key), Value: clone(r.Value), Offset: r.Offset, Timestamp: r.Timestamp}
		return nil
	}
	if rr, ok := x.p.(backend.RecordReader); ok {
		err = rr.ReadRecord(ctx, off, take)
		if err == nil && got >= off {
			return e, found, nil
		}
		if err != nil && !errors.Is(err, backend.ErrOffsetOutOfRange) {
			return e, false, err
		}
	}
	var sc scanner
	_, err = sc.scan(ctx, x.p, off, func(r *record.Record) error {
		_ = take(&record.Batch{}, r)
		return errStop
	})
	if errors.Is(err, errStop) {
		err = nil
	}
	return e, found, err
}

// clone copies b, keeping nil nil and empty empty.
func clone(b []byte) []byte {
	if b == nil {
		return nil
	}
	return append(make([]byte, 0, len(b)), b...)
}

// scanFor finds r's latest record by reading the whole partition: the
// answer when r's hash slot holds another key.
func (x *Index) scanFor(ctx context.Context, r Ref) (Entry, error) {
	var e Entry
	var found bool
	var sc scanner
	_, err := sc.scan(ctx, x.p, 0, func(rec *record.Record) error {
		if r.matches(rec.Key) {
			found = true
			e = Entry{Key: clone(rec.Key), Value: clone(rec.Value), Offset: rec.Offset, Timestamp: rec.Timestamp}
		}
		return nil
	})
	switch {
	case err != nil:
		return Entry{}, err
	case !found || e.Value == nil:
		return Entry{}, ErrNotFound
	}
	return e, nil
}

// List calls fn with every live key, in no particular order, until fn
// returns an error (returned as is). Each key costs one read of its
// record. A key whose hash another key took later is missed (see
// Lookup); a key appended during the walk may be missed or, if the table
// grows meanwhile, given twice.
func (x *Index) List(ctx context.Context, fn func(key []byte) error) error {
	if err := x.ready(ctx); err != nil {
		return err
	}
	for slot := 0; ; {
		next, err := x.ListChunk(ctx, slot, fn)
		if err != nil || next < 0 {
			return err
		}
		slot = next
	}
}

// ListChunk is one step of List without the catch-up: the live keys of
// the table's slots from slot on, a few thousand slots at a time. It
// returns the slot to go on from, or -1 at the end.
func (x *Index) ListChunk(ctx context.Context, slot int, fn func(key []byte) error) (int, error) {
	x.mu.Lock()
	if x.t == nil || slot >= x.t.slots() {
		x.mu.Unlock()
		return -1, nil
	}
	end := min(slot+listChunk, x.t.slots())
	chunk := append([]uint64(nil), x.t.w[2*slot:2*end]...)
	x.mu.Unlock()
	for i := 0; i < len(chunk); i += 2 {
		h, word := chunk[i], chunk[i+1]
		if h == 0 || word&tombBit != 0 {
			continue
		}
		e, found, err := x.readAt(ctx, int64(word))
		if err != nil {
			return -1, err
		}
		if !found || e.Value == nil || x.hash(e.Key) != h {
			continue // deleted by retention, or a key whose hash another took
		}
		if err := fn(e.Key); err != nil {
			return -1, err
		}
	}
	return end, nil
}

// Ready waits for the index's first build and catches up with the
// partition (List does this itself; ListChunk does not).
func (x *Index) Ready(ctx context.Context) error { return x.ready(ctx) }
