package fusefs

import (
	"bytes"
	"context"
	"os"
	"strconv"
	"time"

	"github.com/hanwen/go-fuse/v2/fuse"

	"github.com/topicfs/topicfs/backend"
)

// What stat(2) of a view reports where its exact size is not at hand
// without fetching (cluster mode):
//
//   - A view whose records are still arriving (viewstream.go) reports the
//     exact size to a process that has it open, waiting for them: tail -n
//     reads backwards from st_size and lseek(SEEK_END). Every other
//     process (ls -l, stat) is told at once what has arrived so far, with
//     attributes the kernel keeps for a millisecond only, so that the
//     process reading it never sees that size from the cache.
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

// callerHolds reports whether the process asking (ctx's caller) has a
// handle of the view open, itself or through an ancestor whose open file
// it inherited (a shell opening `< records` for a command it runs).
func (v *viewNode) callerHolds(ctx context.Context) bool {
	c, ok := fuse.FromContext(ctx)
	if !ok || c.Pid == 0 {
		return true // not known: the exact answer is the safe one
	}
	v.mu.Lock()
	defer v.mu.Unlock()
	pid := int(c.Pid)
	for range maxAncestors {
		tgid, ppid, ok := procOf(pid)
		if !ok {
			return false
		}
		if v.mu.openers[tgid] > 0 {
			return true
		}
		if ppid <= 1 {
			return false
		}
		pid = ppid
	}
	return false
}

// maxAncestors bounds how far up its ancestry a caller's open handles are
// looked for.
const maxAncestors = 8

// openerOf is the process (thread group) that asks in ctx, or 0.
func openerOf(ctx context.Context) int {
	c, ok := fuse.FromContext(ctx)
	if !ok || c.Pid == 0 {
		return 0
	}
	tgid, _, _ := procOf(int(c.Pid))
	return tgid
}

// procOf reads the thread group and parent of task pid (a FUSE request
// names the calling thread) from /proc.
func procOf(pid int) (tgid, ppid int, ok bool) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		return 0, 0, false
	}
	tgid, ppid = -1, -1
	for line := range bytes.Lines(b) {
		name, val, found := bytes.Cut(line, []byte(":"))
		if !found {
			continue
		}
		switch string(name) {
		case "Tgid":
			tgid, _ = strconv.Atoi(string(bytes.TrimSpace(val)))
		case "PPid":
			ppid, _ = strconv.Atoi(string(bytes.TrimSpace(val)))
		}
		if tgid >= 0 && ppid >= 0 {
			return tgid, ppid, true
		}
	}
	return 0, 0, false
}
