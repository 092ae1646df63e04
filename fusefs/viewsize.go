package fusefs

import (
	"context"
	"time"

	"github.com/topicfs/topicfs/backend"
)

// What stat(2) of a view reports where its exact size is not at hand
// without fetching (cluster mode):
//
//   - A view whose records are still arriving (viewstream.go) reports 0
//     at once, as /proc files do: its size is not known yet. Tools that
//     trust a size (tail -n reads backwards from st_size and
//     lseek(SEEK_END), wc -c seeks near it) read a 0-sized file to its end
//     instead, and reads wait for the records. Waiting for them in stat
//     made cat's own fstat wait for the whole fetch; answering with what
//     had arrived made tail print lines from the middle (the kernel keeps
//     even a 1 ms attribute until its next clock tick).
//   - A view nobody has open reports its size when it was last open on
//     this mount, as long as the partition still has the offsets it was
//     measured at (its end, and for records its log start); else 0, the
//     size a tool treats as "read it to find out" (tail reads it all).

// viewEnds are the offsets a view's size was measured at: the end the
// view showed, and for a view from the log start that start (-1 for
// others, whose start does not move with the log's).
type viewEnds struct{ start, end int64 }

// noteSize records the size of st, a state being released, as the size
// the view shows while closed (cluster mode), if st holds every record of
// its range; the kernel's cached attributes are dropped if it changed.
func (v *viewNode) noteSize(st *viewState) {
	if v.fsys.local != nil {
		return // a closed local view is measured on stat
	}
	size, end, complete := st.extent()
	if !complete {
		return
	}
	at := viewEnds{start: -1, end: end}
	if v.kind == viewRecords {
		at.start = st.from
	}
	v.mu.Lock()
	changed := !v.mu.seen || v.mu.seenSize != size
	if changed {
		v.mu.mtime = time.Now()
	}
	v.mu.seen, v.mu.seenSize, v.mu.seenAt = true, size, at
	v.mu.Unlock()
	if changed {
		go v.NotifyContent(-1, 0) // outside the handler (docs/FUSE.md §5)
	}
}

// closedSize is the size of a cluster view nobody has open: the size
// noted when it was last open if the partition's offsets are still those
// it was measured at (asked at most once a second per partition), else
// 0 and known false.
func (v *viewNode) closedSize(ctx context.Context) (size int64, known bool) {
	v.mu.Lock()
	size, at, seen := v.mu.seenSize, v.mu.seenAt, v.mu.seen
	v.mu.Unlock()
	if !seen || at.end < 0 || v.kind == viewByTime && v.tspec.relative {
		return 0, false
	}
	_, ps, err := v.fsys.partition(ctx, v.loc)
	if err != nil {
		return 0, false
	}
	offs, err := ps.offsets(ctx)
	if err != nil {
		return size, true // the cluster cannot say now: what was last seen
	}
	if offs.End != at.end || at.start >= 0 && offs.LogStart != at.start {
		return 0, false
	}
	return size, true
}

// offsetsMaxAge is how long a partition's offsets, as the notifier or a
// stat last asked for them, stand for the partition's offsets now.
const offsetsMaxAge = time.Second

// offsets returns the partition's offsets, asking the backend only if
// nobody did in the last offsetsMaxAge.
func (ps *partState) offsets(ctx context.Context) (backend.Offsets, error) {
	ps.mu.Lock()
	offs, at := ps.mu.offs, ps.mu.offsAt
	ps.mu.Unlock()
	if !at.IsZero() && time.Since(at) < offsetsMaxAge {
		return offs, nil
	}
	offs, err := ps.p.Offsets(ctx)
	if err == nil {
		ps.noteOffsets(offs)
	}
	return offs, err
}

func (ps *partState) noteOffsets(offs backend.Offsets) {
	ps.mu.Lock()
	ps.mu.offs, ps.mu.offsAt = offs, time.Now()
	ps.mu.Unlock()
}
