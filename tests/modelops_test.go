package tests

// TestModel's operations that write lines above the limit or invalid ones,
// close descriptors, append through a shell and crash the mount (see
// model_test.go).

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// long writes one line of op.N bytes (plain) or with an op.N-byte value
// (append.jsonl) in op.Cuts pieces, then a short line. A line whose record
// is above max.message.bytes must store nothing of itself: the write that
// ends it fails with EMSGSIZE (earlier ones may too). With op.Flag the
// writer goes on after a failed write, else it closes the file, as cat does.
func (r *modelRun) long(op modelOp) error {
	w := r.w
	if w == nil || len(w.partial) > 0 || len(w.owed) > 0 || w.lc.ParseKey && !w.lc.JSONL {
		return nil
	}
	rng := rand.New(rand.NewSource(op.Seed))
	var line []byte
	rec := mrec{HasValue: true, Headers: "{}"}
	if w.lc.JSONL {
		rec.Value = genBytes(rng, op.N, "")
		line, _ = json.Marshal(map[string]string{"value": base64.StdEncoding.EncodeToString(rec.Value), "value_encoding": "base64"})
	} else {
		rec.Value = genBytes(rng, op.N, "")
		line = rec.Value
	}
	fits := rec.recordSize() <= r.cfg.maxRecord()
	if fits && len(line) > modelMaxMessage {
		return nil // a JSON text longer than its record: not what this op tests
	}
	data := append(append([]byte{}, line...), '\n')
	cuts := make([]int, len(op.Cuts))
	for i, c := range op.Cuts {
		cuts[i] = min(c, 512<<10) // one FUSE WRITE per write(2)
	}
	parts := chunks(data, cuts)
	for i, c := range parts {
		err := writeAll(w.fds[i%len(w.fds)], c)
		last := i == len(parts)-1
		switch {
		case fits && err != nil:
			return fmt.Errorf("write(2) #%d (%d bytes) of a %d-byte line that fits: %w", i, len(c), len(line), err)
		case !fits && err != nil && !errors.Is(err, unix.EMSGSIZE):
			return fmt.Errorf("write(2) #%d of a %d-byte line above min(max.message.bytes, segment.bytes) = %d: %w, want EMSGSIZE", i, len(line), r.cfg.maxRecord(), err)
		case !fits && err == nil && last:
			return fmt.Errorf("the write(2) ending a line whose record of %d bytes is above min(max.message.bytes, segment.bytes) = %d succeeded, want EMSGSIZE", rec.recordSize(), r.cfg.maxRecord())
		}
		if err != nil {
			if !op.Flag && !last {
				// Give up and close, as cat does after a failed write.
				return r.closeWriter()
			}
		}
	}
	if fits {
		r.accept(rec)
	}
	return r.after(op.Seed)
}

// after writes one short valid line on its own: it must be stored.
func (r *modelRun) after(seed int64) error {
	w := r.w
	var line []byte
	var rec mrec
	if w.lc.JSONL {
		line, rec = genJSONLine(rand.New(rand.NewSource(seed+1)), 10)
	} else {
		line = []byte(fmt.Sprintf("after-%d", seed))
		rec, _ = w.lc.parse(line)
		if w.lc.ParseKey {
			line = []byte("k" + w.lc.Sep + string(line))
			rec, _ = w.lc.parse(line)
		}
	}
	if err := writeAll(w.fds[0], append(line, '\n')); err != nil {
		return fmt.Errorf("the line after: %w", err)
	}
	r.accept(rec)
	return nil
}

// bad writes one invalid line on its own: EINVAL, nothing stored, and the
// file takes the next line.
func (r *modelRun) bad(op modelOp) error {
	w := r.w
	if w == nil || len(w.partial) > 0 || len(w.owed) > 0 || !w.lc.JSONL && !w.lc.ParseKey {
		return nil
	}
	var line string
	if w.lc.JSONL {
		line = []string{`{"key":"k"}`, `{"key":"k","value":`, `{"value":"x","vaule":1}`, `[1]`, `{"headers":{}}`, `{}`}[op.N%6]
	} else {
		line = "no separator here"
		if strings.Contains(line, w.lc.Sep) {
			return nil
		}
	}
	err := writeAll(w.fds[0], []byte(line+"\n"))
	if !errors.Is(err, unix.EINVAL) {
		return fmt.Errorf("write of invalid line %q: %v, want EINVAL", line, err)
	}
	return r.after(op.Seed)
}

func (r *modelRun) fsync() error {
	if r.w == nil {
		return nil
	}
	if err := unix.Fsync(r.w.fds[0]); err != nil {
		return fmt.Errorf("fsync: %w", err)
	}
	r.settle()
	return nil
}

// closeFd closes descriptor i of the open file. Its pending complete lines
// are visible once close returned; the final unterminated line becomes a
// record only when the last descriptor goes.
func (r *modelRun) closeFd(i int) error {
	w := r.w
	if w == nil {
		return nil
	}
	i %= len(w.fds)
	fd := w.fds[i]
	w.fds = append(w.fds[:i], w.fds[i+1:]...)
	err := unix.Close(fd)
	if len(w.fds) > 0 {
		if err != nil {
			return fmt.Errorf("close of a shared descriptor: %w", err)
		}
		r.settle()
		return nil
	}
	r.w = nil
	r.settle()
	if len(w.partial) == 0 {
		return nil
	}
	rec, ok := w.lc.parse(w.partial)
	if !ok || rec.recordSize() > r.cfg.maxRecord() {
		return nil // refused: close may report it
	}
	r.logBytes += len(rec.Value) + 60
	// RELEASE (after the last close) reaches the mount asynchronously:
	// wait until the record is there.
	return r.await(rec)
}

// await waits until rec follows the committed records, then commits it.
func (r *modelRun) await(rec mrec) error {
	want := r.cfg.view().renderAll(r.committed)
	end := time.Now().Add(harnessDeadline)
	for {
		got, err := os.ReadFile(r.path("0", "records"))
		if err != nil {
			return err
		}
		n, err := matchPlain(got, want, r.cfg.view(), []mrec{rec})
		if err != nil {
			return fmt.Errorf("waiting for the final line %q after the last close: %w", clip(rec.Value), err)
		}
		if n == 1 {
			r.committed = append(r.committed, rec)
			return nil
		}
		if time.Now().After(end) {
			return fmt.Errorf("the final unterminated line %q never became a record after the last close", clip(rec.Value))
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func (r *modelRun) closeWriter() error {
	for r.w != nil {
		if err := r.closeFd(0); err != nil {
			return err
		}
	}
	return nil
}

// shell appends through a shell whose children share the descriptor:
// sh -c 'cat A; cat B' >> FILE. A line may span A and B; each cat's exit
// closes its copy (FLUSH), the final unterminated line is a record after
// the shell's own close.
func (r *modelRun) shell(op modelOp) error {
	if err := r.closeWriter(); err != nil {
		return err
	}
	w := &modelWriter{lc: lineCfg{ParseKey: r.cfg.ParseKey, Sep: r.cfg.Sep, Null: r.cfg.Null}}
	data, _ := genWriteData(op, w)
	cut := 0
	if len(data) > 0 {
		cut = rand.New(rand.NewSource(op.Seed + 7)).Intn(len(data) + 1)
	}
	lines, rest := splitLines(data)
	var recs []mrec
	for _, l := range lines {
		rec, ok := w.lc.parse(l)
		if !ok || rec.recordSize() > r.cfg.maxRecord() {
			return nil
		}
		recs = append(recs, rec)
	}
	dir := r.t.TempDir()
	a, b := filepath.Join(dir, "a"), filepath.Join(dir, "b")
	if err := os.WriteFile(a, data[:cut], 0o644); err != nil {
		return err
	}
	if err := os.WriteFile(b, data[cut:], 0o644); err != nil {
		return err
	}
	cmd := exec.Command("sh", "-c", `{ cat "$1"; cat "$2"; } >> "$3"`, "sh", a, b, r.path(op.F))
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("sh -c 'cat A; cat B' >> %s (A %d bytes, B %d bytes): %v: %s", op.F, cut, len(data)-cut, err, out)
	}
	r.committed = append(r.committed, recs...)
	r.logBytes += len(data) + 60*len(recs)
	if len(rest) == 0 {
		return nil
	}
	rec, ok := w.lc.parse(rest)
	if !ok || rec.recordSize() > r.cfg.maxRecord() {
		return nil
	}
	return r.await(rec)
}

// kill SIGKILLs the mount and mounts again: every committed record must be
// there, and of the open file's records some prefix.
func (r *modelRun) kill() error {
	r.dropReaders()
	r.m.Kill()
	if r.w != nil {
		for _, fd := range r.w.fds {
			_ = unix.Close(fd)
		}
		r.w = nil
	}
	r.m.start(topicfsBinary(r.t))
	got, err := os.ReadFile(r.path("0", "records"))
	if err != nil {
		return err
	}
	n, err := matchPlain(got, r.cfg.view().renderAll(r.committed), r.cfg.view(), r.floating)
	if err != nil {
		return fmt.Errorf("after kill -9 and a new mount, records: %w", err)
	}
	r.committed = append(r.committed, r.floating[:n]...)
	r.floating = nil
	return nil
}
