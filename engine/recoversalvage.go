package engine

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/topicfs/topicfs/engine/vfs"
)

// When recovery finds damage in a segment (rebuildLocked stops before its
// end), it salvages the segment the way check --repair does, with the same
// scanner (salvage.go): every intact batch before and after the damage
// stays at its position in the offset order, each damaged byte range is
// moved aside to <segment>.log.damaged-<pos>-<end> (ApplySegmentPlan), and
// no other segment is touched. A damaged tail is cut the same way: its
// bytes are kept aside too. A range of zeros only (space a file system
// extended but never wrote after a crash: nothing to keep) is dropped
// instead, as check --repair drops it (decideDamaged). Offsets are not
// renumbered, so a damaged range leaves a gap that readers skip as they skip
// compacted offsets; the segment's next offset stays after its highest kept
// offset. A read-only partition changes no file: it reads the segment
// through a view of its intact byte ranges instead.

// recoverSegment rebuilds s's indexes from its .log and salvages the .log
// when it is damaged, until the scan finds no damage. prod is the
// transaction state before s; it is left as after s.
func (p *Partition) recoverSegment(s *Segment, active bool, lim ScanLimits, prod *producerState) (scanResult, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	before := prod.clone()
	for attempt := 0; ; attempt++ {
		res, err := s.rebuildLocked(active, prod)
		if err != nil || res.valid >= res.end {
			return res, err
		}
		*prod = *before.clone() // the next pass observes the segment again
		var plan SegmentPlan
		if attempt == 0 {
			// From byte 0, not res.valid: the rebuild checks less than the
			// scanner (no record decoding, no bound at the next segment's
			// base), and a batch after the damage may displace one before it
			// (a damaged base offset), so [0, res.valid) is not final.
			if plan, err = PlanSegment(s.log, res.end, lim); err != nil {
				return res, fmt.Errorf("scan for intact batches: %w", err)
			}
			if len(plan.Damaged) == 0 {
				continue // the scanner found no damage: a read failed once? Scan again.
			}
		}
		if len(plan.Damaged) == 0 {
			// The rebuild still refuses what the scanner keeps (their
			// checks differ in detail): cut at the first byte the rebuild
			// refused, which the next pass then accepts.
			plan = tailPlan(s.next.Load(), res, lim)
		}
		plan.Path, plan.Base = s.mu.files.log, s.base
		if err := p.salvageLocked(s, &plan, res); err != nil {
			return res, err
		}
	}
}

// tailPlan cuts the .log at res.valid: the plan of a damaged tail.
func tailPlan(next int64, res scanResult, lim ScanLimits) SegmentPlan {
	nextBase := int64(-1)
	if lim.HasNext {
		nextBase = lim.Limit
	}
	plan := SegmentPlan{Size: res.end,
		Damaged: []DamagedRange{{Pos: res.valid, End: res.end, PrevLast: next - 1, NextBase: nextBase}}}
	if res.valid > 0 {
		plan.Kept = []Span{{0, res.valid}}
	}
	return plan
}

// salvageLocked carries out plan on s: moves the damaged ranges aside and
// leaves the .log with its intact batches (a read-only partition reads
// through a view of them instead). Callers hold s.mu.
func (p *Partition) salvageLocked(s *Segment, plan *SegmentPlan, res scanResult) error {
	if err := decideDamaged(p.fs, s.log, plan); err != nil {
		return fmt.Errorf("engine: salvage %s: %w", plan.Path, err)
	}
	size := int64(0)
	for _, k := range plan.Kept {
		size += k.End - k.Pos
	}
	ro := p.opts.ReadOnly
	p.logSalvage(plan, res, ro)
	if ro {
		s.log = &keptView{File: s.log, kept: plan.Kept, size: size}
		s.size.Store(size)
		return nil
	}
	if err := s.closeIndexesLocked(); err != nil {
		s.logger.Warn("engine: closing index", "segment", plan.Path, "err", err)
	}
	if err := ApplySegmentPlan(p.fs, *plan); err != nil {
		return fmt.Errorf("engine: salvage %s: %w", plan.Path, err)
	}
	if plan.Truncates() { // through another handle of the same file
		s.w.reserved = min(s.w.reserved, size)
	} else { // a new file replaced the .log
		f, err := openLogFile(p.fs, plan.Path, false, false)
		if err != nil {
			return fmt.Errorf("engine: reopen salvaged %s: %w", plan.Path, err)
		}
		old := s.log
		s.log, s.w.reserved = f, 0
		if err := old.Close(); err != nil {
			s.logger.Warn("engine: closing the replaced .log", "segment", plan.Path, "err", err)
		}
	}
	s.size.Store(size)
	return nil
}

// logSalvage says, for each damaged range, what happens to it and which
// offsets it held.
func (p *Partition) logSalvage(plan *SegmentPlan, res scanResult, ro bool) {
	action := "rewrite the segment with its intact batches"
	if plan.Truncates() {
		action = "truncate the segment"
	}
	for _, r := range plan.Damaged {
		msg, args := "engine: moving damaged bytes of a segment aside", []any{"aside", filepath.Base(r.Aside)}
		switch {
		case ro:
			msg, args = "engine: reading around damaged bytes of a segment (read-only: no file changes)", nil
		case r.Discard:
			msg, args = "engine: dropping zero-filled bytes of a segment (never written: nothing to keep)", nil
		}
		args = append(args, "segment", plan.Path, "bytes", fmt.Sprintf("%d..%d", r.Pos, r.End),
			"size", r.End-r.Pos, "lost", r.LostOffsets())
		if !ro {
			args = append(args, "action", action)
		}
		if res.cause != nil && r.Pos <= res.valid && res.valid < r.End {
			args = append(args, "reason", res.cause)
		}
		p.logger.Warn(msg, args...)
		for _, d := range r.Dropped {
			p.logger.Warn("engine: with it a batch whose CRC verifies but whose offsets conflict with another batch's (the base offset field is outside the CRC)",
				"segment", plan.Path, "position", d.Pos, "offsets", fmt.Sprintf("%d..%d", d.Base, d.Last), "conflictsWith", d.ConflictPos)
		}
	}
}

// keptView is a read-only .log as a salvage would leave it: the kept byte
// ranges of the file, back to back. A read-only partition reads a damaged
// segment through it.
type keptView struct {
	vfs.File
	kept []Span
	size int64
}

func (v *keptView) ReadAt(b []byte, off int64) (int, error) {
	n := 0
	at := int64(0) // position of the current span in the view
	for _, k := range v.kept {
		l := k.End - k.Pos
		if off < at+l && n < len(b) {
			from := k.Pos + (off - at)
			want := min(int64(len(b)-n), k.End-from)
			m, err := v.File.ReadAt(b[n:n+int(want)], from)
			n += m
			off += int64(m)
			if int64(m) < want {
				if err == nil || errors.Is(err, io.EOF) {
					err = io.EOF
				}
				return n, err
			}
		}
		at += l
	}
	if n < len(b) {
		return n, io.EOF
	}
	return n, nil
}

func (v *keptView) Size() (int64, error) { return v.size, nil }

func (v *keptView) WriteAt([]byte, int64) (int, error) { return 0, v.readOnly() }
func (v *keptView) Write([]byte) (int, error)          { return 0, v.readOnly() }
func (v *keptView) Truncate(int64) error               { return v.readOnly() }
func (v *keptView) Sync() error                        { return nil }

func (v *keptView) readOnly() error {
	return &os.PathError{Op: "write", Path: v.Name(), Err: ErrReadOnly}
}
