package engine

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/topicfs/topicfs/engine/vfs"
)

// Carrying out a salvage plan (crash recovery and check --repair alike)
// never throws intact data away: every damaged byte range holding a
// non-zero byte is copied to <segment>.log.damaged-<pos>-<end> beside the
// segment, byte for byte (positions are those of the original file), and
// durably, before the .log changes (a range of zeros only is space never
// written, and is dropped: decideDamaged); then the .log is truncated (the damage is a tail) or rewritten
// with its intact batches only, unchanged and in order, through
// <segment>.log.repairing, which is renamed over the .log once durable.
// Offsets are kept, so a damaged range leaves a gap, as compaction does.
// Kafka's loader and topicfs only load names ending in
// .log/.index/.timeindex/.txnindex (and .deleted/.cleaned/.swap), so both
// ignore these files; a partition's open removes a leftover .repairing.

// Names of the files a salvage writes beside a segment.
const (
	DamagedInfix    = ".damaged-"  // <base>.log.damaged-<pos>-<end>
	RepairingSuffix = ".repairing" // <base>.log.repairing while it is written
)

// PlanLogFile scans the .log at path (PlanSegment) and decides what
// happens to each damaged range (decideDamaged).
func PlanLogFile(fsys vfs.FS, path string, lim ScanLimits) (SegmentPlan, error) {
	f, err := fsys.OpenFile(path, os.O_RDONLY, 0)
	if err != nil {
		return SegmentPlan{}, err
	}
	defer f.Close()
	size, err := f.Size()
	if err != nil {
		return SegmentPlan{}, err
	}
	sp, err := PlanSegment(f, size, lim)
	if err != nil {
		return sp, fmt.Errorf("%s: %w", path, err)
	}
	sp.Path = path
	return sp, decideDamaged(fsys, f, &sp)
}

// decideDamaged decides, for crash recovery and check --repair alike, what
// a salvage does with each damaged range of sp, whose .log src holds: a
// range of zeros only is space a file system extended or preallocated but
// never wrote (typically the tail after a crash), so it is dropped
// (Discard) and nothing is lost; a range holding any non-zero byte is kept
// aside, in the file ChooseAside picks (Aside).
func decideDamaged(fsys vfs.FS, src io.ReaderAt, sp *SegmentPlan) error {
	for i := range sp.Damaged {
		r := &sp.Damaged[i]
		zero, err := allZero(src, r.Pos, r.End)
		if err != nil {
			return err
		}
		r.Discard, r.Aside = zero, ""
		if !zero {
			if r.Aside, err = ChooseAside(fsys, src, sp.Path, *r); err != nil {
				return err
			}
		}
	}
	return nil
}

// allZero reports whether bytes [pos, end) of r are all zero.
func allZero(r io.ReaderAt, pos, end int64) (bool, error) {
	buf := make([]byte, min(end-pos, 1<<20))
	for pos < end {
		n := min(int64(len(buf)), end-pos)
		if _, err := r.ReadAt(buf[:n], pos); err != nil && !errors.Is(err, io.EOF) {
			return false, err
		}
		for _, c := range buf[:n] {
			if c != 0 {
				return false, nil
			}
		}
		pos += n
	}
	return true, nil
}

// AsidePath names the file a damaged range of log moves to: the plan's
// choice, or <log>.damaged-<pos>-<end> when there is none.
func AsidePath(log string, r DamagedRange) string {
	if r.Aside != "" {
		return r.Aside
	}
	return fmt.Sprintf("%s%s%d-%d", log, DamagedInfix, r.Pos, r.End)
}

// ChooseAside picks the aside file of a damaged range of src (the .log at
// log): the plain name, unless a file of that name holds other bytes (from an
// earlier salvage of the rewritten segment), then the first free one of
// name.2, name.3, ... A file already holding exactly these bytes is reused,
// so a salvage run again after an interruption writes the same files.
func ChooseAside(fsys vfs.FS, src io.ReaderAt, log string, r DamagedRange) (string, error) {
	plain := AsidePath(log, DamagedRange{Pos: r.Pos, End: r.End})
	var want []byte
	for i := 1; ; i++ {
		name := plain
		if i > 1 {
			name = fmt.Sprintf("%s.%d", plain, i)
		}
		have, err := vfs.ReadFile(fsys, name)
		if errors.Is(err, os.ErrNotExist) {
			return name, nil
		}
		if err != nil {
			return "", err
		}
		if int64(len(have)) != r.End-r.Pos {
			continue
		}
		if want == nil {
			want = make([]byte, r.End-r.Pos)
			if _, err := src.ReadAt(want, r.Pos); err != nil && !errors.Is(err, io.EOF) {
				return "", err
			}
		}
		if bytes.Equal(have, want) {
			return name, nil
		}
	}
}

// LostOffsets says which offsets a damaged range held.
func (r DamagedRange) LostOffsets() string {
	switch {
	case r.NextBase < 0:
		return fmt.Sprintf("the log ends after intact offset %d (the bytes held no intact batch)", r.PrevLast)
	case r.NextBase == r.PrevLast+1:
		return fmt.Sprintf("no offset lost (intact offsets %d and %d are consecutive)", r.PrevLast, r.NextBase)
	case r.NextBase == r.PrevLast+2:
		return fmt.Sprintf("offset %d lost, between intact offsets %d and %d", r.PrevLast+1, r.PrevLast, r.NextBase)
	}
	return fmt.Sprintf("offsets %d..%d lost, between intact offsets %d and %d", r.PrevLast+1, r.NextBase-1, r.PrevLast, r.NextBase)
}

// ApplySegmentPlan moves the damaged ranges of a .log aside (except those
// marked Discard) and leaves the .log with its intact batches only. Each
// step is durable before the next, so an interrupted salvage leaves the
// original .log (and aside files identical to the ones a second run
// writes) or the finished one. A rewritten .log is a new file: handles
// open on the old one still read the old bytes.
func ApplySegmentPlan(fsys vfs.FS, sp SegmentPlan) error {
	src, err := fsys.OpenFile(sp.Path, os.O_RDWR, 0)
	if err != nil {
		return err
	}
	defer src.Close()
	dir := filepath.Dir(sp.Path)
	for _, r := range sp.Damaged {
		if r.Discard {
			continue
		}
		if err := copySpans(fsys, src, AsidePath(sp.Path, r), []Span{{r.Pos, r.End}}); err != nil {
			return err
		}
	}
	if err := fsys.SyncDir(dir); err != nil {
		return err
	}
	if sp.Truncates() {
		if err := src.Truncate(sp.Damaged[0].Pos); err != nil {
			return err
		}
		return src.Sync()
	}
	tmp := sp.Path + RepairingSuffix
	if err := copySpans(fsys, src, tmp, sp.Kept); err != nil {
		return err
	}
	if err := fsys.Rename(tmp, sp.Path); err != nil {
		return err
	}
	return fsys.SyncDir(dir)
}

// copySpans writes the spans of src, in order, to a new file dst and syncs it.
func copySpans(fsys vfs.FS, src io.ReaderAt, dst string, spans []Span) error {
	out, err := fsys.OpenFile(dst, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o644)
	if err != nil {
		return err
	}
	buf := make([]byte, 1<<20)
	for _, s := range spans {
		for pos := s.Pos; pos < s.End; {
			n := int(min(int64(len(buf)), s.End-pos))
			if _, err := src.ReadAt(buf[:n], pos); err != nil && !errors.Is(err, io.EOF) {
				out.Close()
				return err
			}
			if _, err := out.Write(buf[:n]); err != nil {
				out.Close()
				return err
			}
			pos += int64(n)
		}
	}
	if err := out.Sync(); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}
