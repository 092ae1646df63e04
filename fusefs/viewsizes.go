package fusefs

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/topicfs/topicfs/engine"
	"github.com/topicfs/topicfs/engine/vfs"
)

// ViewSizesFile, in the data directory, keeps the rendered length of every
// segment the mount measured, from one mount to the next: a view's size is
// the sum of its segments' rendered lengths, so without it the first stat
// of a view after mounting (ls -l, tail -n, wc -c) renders the whole
// partition. It is written when the mount ends (Server.Wait) and read
// lazily by the first view that needs a segment's length. An entry counts
// only while its segment's .log is the very file measured: same inode,
// size and modification time, and the same aborted transactions over its
// offsets; anything else (an append, a compaction, recovery's truncation,
// a file replaced behind the mount) makes the view measure the segment
// again. Kafka ignores the file (not a partition directory); deleting it
// costs one scan.
const ViewSizesFile = "topicfs-view-sizes"

// viewSizesFile is the JSON form of ViewSizesFile.
type viewSizesFile struct {
	Version  int                     `json:"version"`
	Segments map[string]savedSegment `json:"segments"` // .log path relative to the data dir
}

// savedSegment identifies one .log file and holds its rendered lengths.
type savedSegment struct {
	Size    int64       `json:"size"`
	Inode   uint64      `json:"inode"`
	MtimeNs int64       `json:"mtime_ns"`
	Views   []savedView `json:"views"`
}

// savedView is a segment's rendered length in one format.
type savedView struct {
	Format   string `json:"format"`
	Aborted  uint64 `json:"aborted"` // abortedSet.hashOver the segment's offsets when measured
	Rendered int64  `json:"rendered"`
}

// viewSizes is a mount's view of ViewSizesFile.
type viewSizes struct {
	dir      string
	readOnly bool

	load sync.Once
	save sync.Once
	mu   struct {
		sync.Mutex
		saved map[string]savedSegment // as read at the first lookup
	}
}

// newViewSizes is d's ViewSizesFile; none (never read or written) without
// a d (tests of handles alone).
func newViewSizes(d *engine.LogDir, readOnly bool) *viewSizes {
	if d == nil {
		v := &viewSizes{readOnly: true}
		v.load.Do(func() {})
		return v
	}
	return &viewSizes{dir: d.Path(), readOnly: readOnly || d.ReadOnly()}
}

// key is the format's identity in ViewSizesFile.
func (f viewFormat) key() string {
	if f.json {
		return "json"
	}
	return fmt.Sprintf("plain key=%t sep=%q null=%q", f.printKey, f.separator, f.nullMarker)
}

// fileID is what identifies a .log file's contents on disk.
type fileID struct {
	size, mtimeNs int64
	inode         uint64
}

func statID(path string) (fileID, bool) {
	var st syscall.Stat_t
	if err := syscall.Stat(path, &st); err != nil {
		return fileID{}, false
	}
	return fileID{size: st.Size, mtimeNs: st.Mtim.Nano(), inode: st.Ino}, true
}

// rel is seg's .log path relative to the data dir ("" if outside it).
func (v *viewSizes) rel(seg segmentReader) string {
	r, err := filepath.Rel(v.dir, seg.LogPath())
	if err != nil || r == ".." || strings.HasPrefix(r, "../") {
		return ""
	}
	return r
}

// lookup returns the saved rendered length of seg in format f, if seg's
// committed size is limit and the saved entry is for this very file.
func (v *viewSizes) lookup(f *fsys, seg segmentReader, format viewFormat, limit int64, ab *abortedSet) (int64, bool) {
	v.load.Do(func() { v.read(f) })
	v.mu.Lock()
	s, ok := v.mu.saved[v.rel(seg)]
	v.mu.Unlock()
	if !ok || s.Size != limit {
		return 0, false
	}
	if id, ok := statID(seg.LogPath()); !ok || id != (fileID{s.Size, s.MtimeNs, s.Inode}) {
		return 0, false
	}
	k, h := format.key(), ab.hashOver(seg)
	for _, sv := range s.Views {
		if sv.Format == k && sv.Aborted == h {
			return sv.Rendered, true
		}
	}
	return 0, false
}

// read loads ViewSizesFile; a missing file is an empty one, an unreadable
// one is logged and ignored (the views measure again).
func (v *viewSizes) read(f *fsys) {
	path := filepath.Join(v.dir, ViewSizesFile)
	data, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return
	}
	var file viewSizesFile
	if err == nil {
		if err = json.Unmarshal(data, &file); err == nil && file.Version != 1 {
			err = fmt.Errorf("version %d, want 1", file.Version)
		}
	}
	if err != nil {
		f.log.Warn("fusefs: ignoring the saved view sizes; views measure their segments again", "file", path, "err", err)
		return
	}
	v.mu.Lock()
	v.mu.saved = file.Segments
	v.mu.Unlock()
}

// write saves the measures of c (the mount's segment indexes and evicted
// measures) and the saved entries still valid, once, unless read-only.
func (v *viewSizes) write(f *fsys, c *indexCache) {
	if v.readOnly {
		return
	}
	v.save.Do(func() {
		start := time.Now()
		v.load.Do(func() { v.read(f) })
		out := map[string]savedSegment{}
		ids := map[string]fileID{}
		for _, m := range c.all() {
			rel := v.rel(m.key.seg)
			if rel == "" || m.bad != nil || m.scanned == 0 {
				continue
			}
			id, ok := ids[rel]
			if !ok {
				if id, ok = statID(m.key.seg.LogPath()); !ok {
					continue
				}
				ids[rel] = id
			}
			if id.size != m.scanned {
				continue // measured short of its end
			}
			s := out[rel]
			s.Size, s.MtimeNs, s.Inode = id.size, id.mtimeNs, id.inode
			s.Views = addView(s.Views, savedView{Format: m.key.format.key(), Aborted: m.abHash, Rendered: m.rlen})
			out[rel] = s
		}
		v.mu.Lock()
		saved := v.mu.saved
		v.mu.Unlock()
		for rel, s := range saved {
			id, ok := statID(filepath.Join(v.dir, rel))
			if !ok || id != (fileID{s.Size, s.MtimeNs, s.Inode}) {
				continue // gone or changed
			}
			cur, ok := out[rel]
			if !ok {
				out[rel] = s
				continue
			}
			for _, sv := range s.Views {
				cur.Views = addView(cur.Views, sv)
			}
			out[rel] = cur
		}
		if len(out) == 0 && len(saved) == 0 {
			return
		}
		data, err := json.Marshal(viewSizesFile{Version: 1, Segments: out})
		if err == nil {
			err = vfs.WriteFileAtomic(vfs.OS, filepath.Join(v.dir, ViewSizesFile), append(data, '\n'), 0o644)
		}
		if err != nil {
			f.log.Warn("fusefs: could not save view sizes; the next mount measures segments again", "err", err)
			return
		}
		f.log.Info("fusefs: saved view sizes", "segments", len(out), "took", time.Since(start).Round(time.Millisecond))
	})
}

// addView adds sv unless views has its format and aborted set already.
func addView(views []savedView, sv savedView) []savedView {
	for _, x := range views {
		if x.Format == sv.Format && x.Aborted == sv.Aborted {
			return views
		}
	}
	return append(views, sv)
}

// hashOver identifies the aborted transactions that overlap seg's offsets:
// the ones that hide records of seg. 0 when there are none; independent of
// map order. (seg's end is only asked for when there are some: it can cost
// a read.)
func (a *abortedSet) hashOver(seg segmentReader) uint64 {
	if a.empty() {
		return 0
	}
	lo, hi := seg.BaseOffset(), seg.NextOffset()
	var sum uint64
	var b [24]byte
	for producer, txns := range a.byProducer {
		for _, t := range txns {
			if t.LastOffset < lo || t.FirstOffset >= hi {
				continue
			}
			binary.LittleEndian.PutUint64(b[0:], uint64(producer))
			binary.LittleEndian.PutUint64(b[8:], uint64(t.FirstOffset))
			binary.LittleEndian.PutUint64(b[16:], uint64(t.LastOffset))
			h := fnv.New64a()
			h.Write(b[:])
			sum += h.Sum64()
		}
	}
	return sum
}
