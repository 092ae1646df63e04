package fusefs

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"math"
	"strconv"
	"syscall"
	"time"

	"github.com/topicfs/topicfs/engine/record"
)

// Lines too long for max.message.bytes, and the final unterminated line of
// an append file.
//
// A write(2) larger than the mount's largest WRITE reaches the file as
// several WRITEs; when one fails after others succeeded, write(2) returns
// the short count of those and the error is not seen. Writers that retry
// (Go, python, cat) then send the rest again, starting with the same bytes
// as the refused WRITE; python sends a refused buffer yet again at its
// next flush or close. glibc's stdio instead drops what failed and goes on
// with the bytes after it. So, for a line that grows past maxLine:
//
//   - If it starts inside a WRITE after complete lines, those are taken
//     with a short count, so the writer's next write(2) starts with it.
//   - The WRITE that makes it too long fails with EMSGSIZE; the start of
//     the line taken by earlier WRITEs is dropped.
//   - A retry of a refused WRITE (the same first bytes) is refused once
//     more: of two refusals in a row at least one reached the writer as an
//     error, not hidden in a short count. Further retries are taken and
//     dropped up to the line's newline (python's write at close); the
//     bytes after the newline are lines as usual.
//   - A WRITE with new bytes after a refused one that held the line's
//     newline means the writer went on past the line (glibc): it starts a
//     new line.
//   - A WRITE with new bytes after a refused one without the newline
//     continues the line: it is refused, and its newline, if any, ends the
//     line (glibc's "\n" after its refused bulk; or a writer that gave up
//     on the line and writes the next one, which it can write again).
//
// Nothing of a too-long line is ever stored, however the kernel or the
// writer cut it, and the lines after it are stored once the writer gets
// past it.

// longLine is the state of a line refused as too long.
type longLine struct {
	active   bool
	dropping bool   // bytes of the line are taken and dropped up to its newline
	refusals int    // WRITEs refused since the line became too long
	head     []byte // the first bytes of the last refused WRITE
	newline  bool   // the last refused WRITE held the line's newline
}

// retryHead is how many first bytes of a refused WRITE are kept to tell a
// retry of it from new bytes.
const retryHead = 4 << 10

// refuse refuses data, a WRITE inside the long line.
func (l *longLine) refuse(data []byte) (uint32, syscall.Errno) {
	l.active = true
	l.refusals++
	l.head = append(l.head[:0], data[:min(len(data), retryHead)]...)
	l.newline = bytes.IndexByte(data, '\n') >= 0
	return 0, syscall.EMSGSIZE
}

// retry reports whether data starts with the bytes of the last refused
// WRITE (as far as both go).
func (l *longLine) retry(data []byte) bool {
	k := min(len(data), len(l.head))
	return k > 0 && bytes.Equal(data[:k], l.head[:k])
}

// end forgets the long line; its head buffer is kept for the next one.
func (l *longLine) end() { *l = longLine{head: l.head[:0]} }

// writeInLong is write while a line refused as too long may still arrive
// (see above). The caller holds h.mu.
func (h *appendHandle) writeInLong(data []byte) (uint32, syscall.Errno) {
	l := &h.long
	if !l.dropping {
		switch retry := l.retry(data); {
		case retry && l.refusals < 2:
			return l.refuse(data)
		case retry:
			l.dropping = true
		case l.newline:
			l.end() // the writer went on past the line
			return h.writeFramed(data)
		default:
			n, errno := l.refuse(data)
			if l.newline {
				l.end() // the line ends at this refused newline
			}
			return n, errno
		}
	}
	i := bytes.IndexByte(data, '\n')
	if i < 0 {
		return uint32(len(data)), 0 // taken and dropped
	}
	l.end()
	n, errno := h.writeFramed(data[i+1:])
	if errno != 0 {
		// The dropped end of the line was taken: a short count, and the
		// writer's next write(2) starts with the refused rest.
		return uint32(i + 1), 0
	}
	return uint32(i+1) + n, 0
}

// writeFramed is write's framing of data, outside a long line. The caller
// holds h.mu.
func (h *appendHandle) writeFramed(data []byte) (uint32, syscall.Errno) {
	if len(data) == 0 {
		return 0, 0
	}
	if at, found := h.overlong(len(h.split.partial), data); found {
		return h.tooLongAt(data, at)
	}
	return h.writeLines(data)
}

// valueOnly reports whether each plain line is one bare value (no key to
// split off).
func (h *appendHandle) valueOnly() bool {
	return !h.jsonl && (!h.lc.parseKey || h.lc.separator == "")
}

// maxLine is the longest line that can become a record within
// max.message.bytes: exactly for bare values stored uncompressed (a record
// of the line alone), else the line's byte count (a key split off, a JSON
// value decoded or a compressed batch is checked exactly once the line is
// complete, where it can be).
func (h *appendHandle) maxLine() int {
	m := int(min(h.maxMessage, math.MaxInt32))
	if !h.checkSize || !h.valueOnly() {
		return m
	}
	// valueRecordSize(n) is at least n plus the batch header and 7 bytes.
	n := m - record.HeaderSize - 7
	for n > 0 && valueRecordSize(n) > h.maxMessage {
		n--
	}
	return n
}

// overlong finds the first line of partial (the length of a begun line) +
// data longer than maxLine. at is where it starts in data: 0 for the begun
// line.
func (h *appendHandle) overlong(partial int, data []byte) (at int, found bool) {
	limit := h.maxLine()
	first := bytes.IndexByte(data, '\n')
	if first < 0 {
		return 0, partial+len(data) > limit
	}
	if partial+first > limit {
		return 0, true
	}
	rest := data[first+1:]
	n := len(rest)
	if n <= limit {
		return 0, false
	}
	// A line of rest longer than limit covers rest[n-limit:limit]: a
	// newline there rules one out without a scan.
	if lo := n - limit; lo < limit && bytes.IndexByte(rest[lo:limit], '\n') >= 0 {
		return 0, false
	}
	for s := 0; s < n; {
		i := bytes.IndexByte(rest[s:], '\n')
		if i < 0 {
			i = n - s // the unterminated end
		}
		if i > limit {
			return first + 1 + s, true
		}
		s += i + 1
	}
	return 0, false
}

// tooLongAt answers a write whose line starting at data[at:] is too long
// (at <= 0: the line begun by earlier writes, or the one data starts
// with): the complete lines before it are taken, with a short count, so
// the writer's next write(2) starts with the long line and fails. The
// caller holds h.mu.
func (h *appendHandle) tooLongAt(data []byte, at int) (uint32, syscall.Errno) {
	if at > 0 {
		return h.writeLines(data[:at])
	}
	h.refuseLong(data)
	return 0, syscall.EMSGSIZE
}

// refuseLong drops a too-long line that begins the write data (or was begun
// earlier) and refuses data. The caller holds h.mu.
func (h *appendHandle) refuseLong(data []byte) {
	begun := len(h.split.partial)
	h.setTail(nil, nil)
	h.broken = false
	h.long.end()
	h.long.refuse(data)
	h.fsys.log.Warn("fusefs: refused a line longer than max.message.bytes allows (EMSGSIZE); nothing of it is stored",
		"topic", h.topicName(), "file", h.fileName(), "max_message_bytes", h.maxMessage, "line_bytes_seen", begun+len(data))
}

// logRefused logs why a line was refused as malformed (EINVAL).
func (h *appendHandle) logRefused(err error, n int) {
	h.fsys.log.Warn("fusefs: refused a malformed line (EINVAL)",
		"topic", h.topicName(), "file", h.fileName(), "line_bytes", n, "err", err)
}

// fileName is the handle's file as the tree names it below the topic.
func (h *appendHandle) fileName() string {
	file := "append"
	if h.jsonl {
		file = "append.jsonl"
	}
	if h.fixed >= 0 {
		file = strconv.Itoa(h.fixed) + "/" + file
	}
	return file
}

// tailPending reports whether an unterminated line is waiting for more
// bytes or for RELEASE (not one being refused or torn by a failed write).
// The caller holds h.mu.
func (h *appendHandle) tailPending() bool {
	return len(h.split.partial) > 0 && !h.broken && !h.long.active
}

// tailError is why the unterminated line, as it stands, could not become a
// record (nil if it could). The caller holds h.mu.
func (h *appendHandle) tailError() error {
	if !h.tailPending() {
		return nil
	}
	tail := h.split.partial
	r, err := h.parse(tail)
	if err != nil {
		if h.mayStillComplete(tail) {
			return nil
		}
		return err
	}
	return h.check(r.Key, recordSize(&r), h.keyRequired())
}

// mayStillComplete reports whether more bytes could still make the
// unterminated line tail a record: a JSON object cut short, or a keyed
// plain line that has no separator yet. Such a tail is not an error at a
// FLUSH, which may come from one of several descriptors sharing the file
// (`(printf '{"value":'; echo '"x"}') > append.jsonl`); RELEASE judges it.
func (h *appendHandle) mayStillComplete(tail []byte) bool {
	if h.jsonl {
		var v any
		err := json.NewDecoder(bytes.NewReader(tail)).Decode(&v)
		return err == io.EOF || errors.Is(err, io.ErrUnexpectedEOF)
	}
	return h.lc.parseKey && h.lc.separator != "" && !bytes.Contains(tail, []byte(h.lc.separator))
}

// keepTail ends the hold of a FLUSH on the unterminated line: the handle
// is written to again, or released. The caller holds h.mu.
func (h *appendHandle) keepTail() {
	if h.tailHeld {
		h.tailHeld = false
		h.fsys.dropTail(h)
	}
}

// flush appends every buffered batch (every complete line written so far):
// close(2) returns only after those records are visible. An unterminated
// final line stays: every close(2) of a shared descriptor sends a FLUSH
// (`(cat part; echo rest) > append` flushes between the two), so it
// becomes a record at RELEASE (release); readers of the topic wait briefly
// for that (holdTail).
func (h *appendHandle) flush() syscall.Errno {
	h.mu.Lock()
	defer h.mu.Unlock()
	// A final line that could not be a record as it stands is reported
	// here, where close(2) sees it (a later write may still complete it;
	// else RELEASE drops it).
	errno := h.finish(h.tailError())
	if h.tailPending() && h.topic != nil {
		// Held anew at each FLUSH: readers wait tailGrace from the last.
		h.tailHeld = true
		h.fsys.holdTail(h, h.topic.Name())
	}
	return errno
}

// release commits a final unterminated line as a record and appends
// everything buffered: the last descriptor of the open file is gone.
func (h *appendHandle) release() syscall.Errno {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.long = longLine{}
	var err error
	if tail := h.split.take(); h.broken {
		// The rest of this line was in a write that failed: a torn line
		// is not a record.
		h.broken = false
		h.fsys.log.Warn("fusefs: dropping an incomplete line after a failed write", "bytes", len(tail))
	} else if len(tail) > 0 {
		err = h.commitLine(tail)
	}
	errno := h.finish(err)
	h.keepTail()
	return errno
}

// commitLine parses and routes one final line (a copy the handle owns).
// The caller holds h.mu.
func (h *appendHandle) commitLine(tail []byte) error {
	r, err := h.parse(tail)
	size := recordSize(&r)
	if err != nil {
		h.logRefused(err, len(tail))
		return err
	}
	if err := h.check(r.Key, size, h.keyRequired()); err != nil {
		return err
	}
	n, err := h.resolve()
	if err != nil {
		return err
	}
	recs := []record.Record{r}
	if h.fixed >= 0 {
		pb := h.parts[h.fixed]
		pb.recs = append(pb.recs, r)
		recs = pb.recs[len(pb.recs)-1:]
	}
	h.route(recs, []int64{size}, n)
	for _, id := range h.dirty {
		pb := h.parts[id]
		pb.dirty = false
		pb.stable = len(pb.recs) // parse copied the line
	}
	h.dirty = h.dirty[:0]
	return nil
}

// finish appends every buffered batch, waits until the views know, and
// returns the errno of err or of the first failure. The caller holds h.mu.
func (h *appendHandle) finish(err error) syscall.Errno {
	if aerr := h.appendAll(); err == nil {
		err = aerr
	}
	if serr := h.takeErr(); err == nil {
		err = serr
	}
	// Nothing is in flight or pending now: an idle open handle keeps no
	// WRITE-sized buffers.
	h.bulk = [maxJobs + 1][]byte{}
	h.arena = nil
	h.awaitNotified()
	return h.fsys.errno("flush", err)
}

// tailGrace bounds how long a reader waits for the RELEASE of a handle whose
// close left an unterminated line: as rmdir waits for a closed handle
// (releaseGrace), since the kernel sends RELEASE after close(2) returns.
// A descriptor really kept open past its FLUSH delays readers of its topic
// at most this long once.
const tailGrace = releaseGrace

// holdTail notes that h's last FLUSH left an unterminated line, which
// becomes a record at RELEASE: `printf x > append; cat records` waits for it.
func (f *fsys) holdTail(h *appendHandle, topic string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if _, ok := f.mu.tails[h]; !ok {
		f.tailsHeld.Add(1)
	}
	f.mu.tails[h] = tailHold{topic: topic, until: time.Now().Add(tailGrace)}
}

// dropTail ends h's hold and wakes waiting readers.
func (f *fsys) dropTail(h *appendHandle) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if _, ok := f.mu.tails[h]; ok {
		delete(f.mu.tails, h)
		f.tailsHeld.Add(-1)
		close(f.mu.released)
		f.mu.released = make(chan struct{})
	}
}

// awaitTails waits until no append handle of topic holds an unterminated
// line from a FLUSH younger than tailGrace (each wait bounded by it).
func (f *fsys) awaitTails(ctx context.Context, topic string) {
	if f.tailsHeld.Load() == 0 {
		return
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	for {
		now := time.Now()
		var until time.Time
		for h, t := range f.mu.tails {
			if !t.until.After(now) {
				// Expired: forget it, so that readers of every topic
				// skip the lock again (a handle left open after a FLUSH
				// would otherwise keep them taking it).
				delete(f.mu.tails, h)
				f.tailsHeld.Add(-1)
				continue
			}
			if t.topic == topic && t.until.After(until) {
				until = t.until
			}
		}
		if until.IsZero() {
			return
		}
		released := f.mu.released
		f.mu.Unlock()
		timer := time.NewTimer(until.Sub(now))
		select {
		case <-released:
		case <-timer.C:
		case <-ctx.Done():
		}
		timer.Stop()
		f.mu.Lock()
		if ctx.Err() != nil {
			return
		}
	}
}

// tailHold is a FLUSH's unterminated line awaiting RELEASE.
type tailHold struct {
	topic string
	until time.Time
}
