package fusefs

import (
	"bytes"
	"context"
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
// the short count of those, and the writer (stdio, python, cat) sends the
// rest again in a new write(2), whose first WRITE starts with the same
// bytes as the refused one. So:
//
//   - A line that starts inside a WRITE and is too long: the complete lines
//     before it are taken with a short count; the write(2) that then starts
//     with the long line fails with EMSGSIZE. Its bytes are not taken.
//   - A line begun in earlier WRITEs (its start was taken) that becomes too
//     long: the taken start is dropped and the WRITE fails with EMSGSIZE.
//     Every later WRITE fails too, up to and including the first later one
//     that holds a newline; after it the next write starts a new line. The
//     WRITE that made the line too long never ends it, even when it holds
//     the newline: the writer's retry of those very bytes must not store
//     the line's end as a record of its own.
//
// Nothing of a too-long line is ever stored, whatever the WRITE sizes.

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
// earlier) and decides whether the writes after data still belong to it
// (skipping): yes when its start was taken by earlier writes (data may come
// again; see above) or when data does not hold its newline. The caller
// holds h.mu.
func (h *appendHandle) refuseLong(data []byte) {
	begun := len(h.split.partial)
	terminated := bytes.IndexByte(data, '\n') >= 0
	h.setTail(nil, nil)
	h.broken = false
	h.skipping = begun > 0 || !terminated
	h.fsys.log.Warn("fusefs: refused a line longer than max.message.bytes allows (EMSGSIZE); nothing of it is stored",
		"topic", h.topicName(), "file", h.fileName(), "max_message_bytes", h.maxMessage,
		"line_bytes_seen", begun+len(data), "rest_refused_up_to_its_newline", h.skipping)
}

// logRefused logs why a line was refused as malformed (EINVAL).
func (h *appendHandle) logRefused(err error, n int) {
	h.fsys.log.Warn("fusefs: refused a malformed line (EINVAL)",
		"topic", h.topicName(), "file", h.fileName(), "line_bytes", n, "err", err)
}

func (h *appendHandle) topicName() string {
	if h.topic == nil {
		return ""
	}
	return h.topic.Name()
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

// tailError is why the unterminated line, as it stands, could not become a
// record (nil if it could). The caller holds h.mu.
func (h *appendHandle) tailError() error {
	tail := h.split.partial
	if len(tail) == 0 || h.broken || h.skipping {
		return nil
	}
	r, err := h.parse(tail)
	if err != nil {
		return err
	}
	return h.check(r.Key, recordSize(&r), h.keyRequired())
}

// keepTail ends the hold of a FLUSH on the unterminated line: the handle
// is written to again, or released. The caller holds h.mu.
func (h *appendHandle) keepTail() {
	if h.tailHeld {
		h.tailHeld = false
		h.fsys.dropTail(h)
	}
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
	f.mu.tails[h] = tailHold{topic: topic, until: time.Now().Add(tailGrace)}
	f.tailsHeld.Add(1)
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
		for _, t := range f.mu.tails {
			if t.topic == topic && t.until.After(now) && t.until.After(until) {
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
