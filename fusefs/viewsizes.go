package fusefs

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"hash/fnv"
	"io"
	"io/fs"
	"log/slog"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/topicfs/topicfs/engine"
	"github.com/topicfs/topicfs/engine/index"
	"github.com/topicfs/topicfs/engine/vfs"
)

// ViewSizesFile, in the data directory, keeps what a mount measured of its
// views from one mount to the next: for each segment and format, the
// rendered length and the position index (segIndex checkpoints). A view's
// size is the sum of its segments' rendered lengths and a seek needs the
// index of one segment, so without it the first stat of a view after
// mounting (ls -l, wc -c) renders the whole partition and the first seek
// into a segment (tail -n, by-offset/N, less +G) renders that segment.
//
// A read-write mount writes it every viewSizesEvery while its views
// measure something new, and when it ends (Server.Wait); it is read
// lazily: its table of entries when a view first needs a segment it has
// not measured, an entry's index only when a seek needs it. An entry
// counts only while its segment's .log is the very file measured: same
// inode, size and modification time, and the same aborted transactions
// over its offsets; anything else (an append, a compaction, recovery's
// truncation, a file replaced behind the mount) makes the view measure
// the segment again.
// Kafka ignores the file (not a partition directory); deleting it costs
// one rendering of each segment when views next need it.
//
// Layout (little-endian): "TFVS", version u32, the index blobs, the table,
// and a footer: table offset u64, table length u32, entries u32, table
// CRC-32C u32, "TFVS", version u32. A table entry: path (u16 length +
// bytes, the .log relative to the data dir), format (u16 + bytes), .log
// size i64, inode u64, mtime ns i64, aborted-set hash u64, rendered length
// i64, checkpoints u32 (0: no index saved), blob offset i64, blob length
// u32, blob CRC-32C u32. A blob holds checkpoints 1.. as uvarint deltas
// (rendered position, file position) from the one before ({0, 0}).
// As a diagram (docs/FORMATS.md §8.4):
//
//	+--------+-------------+-----------+-----------+----------------------+
//	| "TFVS" | version u32 | blobs ... | table ... | footer (28 bytes)    |
//	+--------+-------------+-----------+-----------+----------------------+
//	footer: tableOffset u64 | tableLen u32 | entries u32 | tableCRC u32 |
//	        "TFVS" | version u32
//	entry:  pathLen u16 | path | formatLen u16 | format | logSize i64 |
//	        inode u64 | mtimeNs i64 | abortHash u64 | rendered i64 |
//	        checkpoints u32 | blobOffset i64 | blobLen u32 | blobCRC u32
//	blob:   { Δrendered uvarint | Δlog uvarint } × (checkpoints - 1)
const ViewSizesFile = "topicfs-view-sizes"

const (
	viewSizesMagic   = "TFVS"
	viewSizesVersion = 2
	viewSizesFooter  = 8 + 4 + 4 + 4 + 4 + 4
)

var crcTable = crc32.MakeTable(crc32.Castagnoli)

// savedEntry is one table entry: a segment's measure in one format.
type savedEntry struct {
	id       fileID
	format   string
	abHash   uint64
	rendered int64
	cps      uint32 // checkpoints in the blob + 1; 0 = no index
	blobOff  int64
	blobLen  uint32
	blobCRC  uint32
}

// viewSizes is a mount's view of ViewSizesFile.
type viewSizes struct {
	fs       vfs.FS // the data directory's
	dir      string
	readOnly bool
	log      *slog.Logger

	load   sync.Once
	saving sync.Mutex // one save at a time
	mu     struct {
		sync.Mutex
		saved map[string][]savedEntry // by .log path relative to dir, as read or last saved
		file  vfs.File                // the file saved holds the blobs of (nil: none)
	}
}

// newViewSizes is d's ViewSizesFile; none (never read or written) without
// a d (tests of handles alone).
func newViewSizes(d *engine.LogDir, readOnly bool, log *slog.Logger) *viewSizes {
	if d == nil {
		v := &viewSizes{readOnly: true, log: log}
		v.load.Do(func() {})
		return v
	}
	return &viewSizes{fs: d.FS(), dir: d.Path(), readOnly: readOnly || d.ReadOnly(), log: log}
}

func (v *viewSizes) path() string { return filepath.Join(v.dir, ViewSizesFile) }

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

func statID(fsys vfs.FS, path string) (fileID, bool) {
	fi, err := fsys.Stat(path)
	if err != nil {
		return fileID{}, false
	}
	id := fileID{size: fi.Size(), mtimeNs: fi.ModTime().UnixNano()}
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		id.inode = st.Ino
	}
	return id, true
}

// rel is seg's .log path relative to the data dir ("" if outside it).
func (v *viewSizes) rel(seg segmentReader) string {
	r, err := filepath.Rel(v.dir, seg.LogPath())
	if err != nil || r == ".." || strings.HasPrefix(r, "../") {
		return ""
	}
	return r
}

// find returns the saved entry of k's segment if the segment's committed
// size is limit and the entry is for this very file, format and aborted
// set.
func (v *viewSizes) find(k segKey, limit int64, ab *abortedSet) (savedEntry, bool) {
	v.load.Do(v.read)
	v.mu.Lock()
	es := v.mu.saved[v.rel(k.seg)]
	v.mu.Unlock()
	if len(es) == 0 || es[0].id.size != limit {
		return savedEntry{}, false
	}
	id, ok := statID(v.fs, k.seg.LogPath())
	if !ok || id != es[0].id {
		return savedEntry{}, false
	}
	f, h := k.format.key(), hashOver(ab, k.seg)
	for _, e := range es {
		if e.format == f && e.abHash == h && e.id == id {
			return e, true
		}
	}
	return savedEntry{}, false
}

// measure returns the saved measure of k's segment at size limit (see
// find), without its index.
func (v *viewSizes) measure(k segKey, limit int64, ab *abortedSet) (segMeasure, bool) {
	e, ok := v.find(k, limit, ab)
	return e.measure(k, limit), ok
}

// measure is e's measure of k's segment, which find matched at size limit.
func (e savedEntry) measure(k segKey, limit int64) segMeasure {
	return segMeasure{key: k, scanned: limit, rlen: e.rendered, abHash: e.abHash}
}

// index returns the saved measure and position index of k's segment (see
// find): its checkpoints, from {0, 0}. ok is false when there is none or
// it cannot be read back intact (then the segment is scanned).
func (v *viewSizes) index(k segKey, limit int64, ab *abortedSet) (segMeasure, []checkpoint, bool) {
	e, ok := v.find(k, limit, ab)
	if !ok || e.cps == 0 {
		return segMeasure{}, nil, false
	}
	cps, err := v.readIndex(k, e)
	if err != nil {
		v.log.Warn("fusefs: ignoring a saved view index; the segment is scanned", "file", v.path(), "segment", k.seg.LogPath(), "err", err)
		return segMeasure{}, nil, false
	}
	return e.measure(k, limit), cps, true
}

// readIndex reads and decodes e's blob, checking it. e must still be the
// entry saved for k's segment: a save in between replaces the file.
func (v *viewSizes) readIndex(k segKey, e savedEntry) ([]checkpoint, error) {
	v.mu.Lock()
	var blob []byte
	var err error
	switch {
	case v.mu.file == nil:
		err = errors.New("the saved file is not open")
	case !slices.Contains(v.mu.saved[v.rel(k.seg)], e):
		err = errors.New("saved again since")
	default:
		blob, err = readBlob(v.mu.file, e)
	}
	v.mu.Unlock()
	if err != nil {
		return nil, err
	}
	return decodeIndex(blob, e)
}

// decodeIndex decodes blob, e's index, into its checkpoints (from {0, 0}),
// checking every one against the entry: strictly increasing, rendered
// positions up to e.rendered, file positions below e.id.size, e.cps of
// them. The deltas are checked before they are added, so no sum wraps.
func decodeIndex(blob []byte, e savedEntry) ([]checkpoint, error) {
	if e.cps == 0 || e.rendered < 0 || e.id.size <= 0 {
		return nil, errors.New("no index")
	}
	// Every checkpoint after the first takes two bytes or more.
	if int64(e.cps)-1 > int64(len(blob)/2) {
		return nil, fmt.Errorf("%d checkpoints in %d bytes", e.cps, len(blob))
	}
	cps := make([]checkpoint, 1, e.cps)
	for p := 0; p < len(blob); {
		dr, n := binary.Uvarint(blob[p:])
		if n <= 0 {
			return nil, errors.New("bad varint")
		}
		p += n
		df, n := binary.Uvarint(blob[p:])
		if n <= 0 {
			return nil, errors.New("bad varint")
		}
		p += n
		last := cps[len(cps)-1]
		if len(cps) == int(e.cps) || dr == 0 || df == 0 || dr > uint64(e.rendered-last.rpos) || df >= uint64(e.id.size-last.fpos) {
			return nil, fmt.Errorf("checkpoint %d out of order or range", len(cps))
		}
		cps = append(cps, checkpoint{rpos: last.rpos + int64(dr), fpos: last.fpos + int64(df)})
	}
	if len(cps) != int(e.cps) {
		return nil, fmt.Errorf("%d checkpoints, want %d", len(cps), e.cps)
	}
	return cps, nil
}

// readBlob reads e's blob from f, a ViewSizesFile, and checks its CRC.
func readBlob(f io.ReaderAt, e savedEntry) ([]byte, error) {
	blob := make([]byte, e.blobLen)
	if _, err := f.ReadAt(blob, e.blobOff); err != nil {
		return nil, err
	}
	if crc32.Checksum(blob, crcTable) != e.blobCRC {
		return nil, errors.New("index CRC mismatch")
	}
	return blob, nil
}

// read loads ViewSizesFile's table; a missing file is an empty one, an
// unreadable one is logged and ignored (the views measure again).
// The file stays open: the entries' blobs are read from it.
func (v *viewSizes) read() {
	f, err := v.fs.OpenFile(v.path(), os.O_RDONLY, 0)
	if errors.Is(err, fs.ErrNotExist) {
		return
	}
	var saved map[string][]savedEntry
	if err == nil {
		if saved, err = readViewSizes(f); err != nil {
			f.Close()
		}
	}
	if err != nil {
		v.log.Warn("fusefs: ignoring the saved view sizes; views measure their segments again", "file", v.path(), "err", err)
		return
	}
	v.mu.Lock()
	v.mu.saved, v.mu.file = saved, f
	v.mu.Unlock()
}

// readViewSizes reads the table of f, a ViewSizesFile.
func readViewSizes(f vfs.File) (map[string][]savedEntry, error) {
	size, err := f.Size()
	if err != nil {
		return nil, err
	}
	return decodeViewSizes(f, size)
}

// decodeViewSizes reads the table of a ViewSizesFile of size bytes from f.
func decodeViewSizes(f io.ReaderAt, size int64) (map[string][]savedEntry, error) {
	if size < 8+viewSizesFooter {
		return nil, fmt.Errorf("%d bytes: too short", size)
	}
	var foot [viewSizesFooter]byte
	if _, err := f.ReadAt(foot[:], size-viewSizesFooter); err != nil {
		return nil, err
	}
	if string(foot[20:24]) != viewSizesMagic || binary.LittleEndian.Uint32(foot[24:]) != viewSizesVersion {
		return nil, fmt.Errorf("not a version %d view sizes file", viewSizesVersion)
	}
	tocOff, tocLen := int64(binary.LittleEndian.Uint64(foot[0:])), int64(binary.LittleEndian.Uint32(foot[8:]))
	count, tocCRC := binary.LittleEndian.Uint32(foot[12:]), binary.LittleEndian.Uint32(foot[16:])
	if tocOff < 8 || tocOff+tocLen != size-viewSizesFooter {
		return nil, errors.New("bad table position")
	}
	toc := make([]byte, tocLen)
	if _, err := f.ReadAt(toc, tocOff); err != nil {
		return nil, err
	}
	if crc32.Checksum(toc, crcTable) != tocCRC {
		return nil, errors.New("table CRC mismatch")
	}
	d := tocDecoder{b: toc}
	saved := map[string][]savedEntry{}
	for range count {
		path := d.str()
		e := savedEntry{format: d.str()}
		e.id.size, e.id.inode, e.id.mtimeNs = int64(d.u64()), d.u64(), int64(d.u64())
		e.abHash, e.rendered = d.u64(), int64(d.u64())
		e.cps, e.blobOff, e.blobLen, e.blobCRC = d.u32(), int64(d.u64()), d.u32(), d.u32()
		if d.err != nil {
			return nil, d.err
		}
		if err := e.check(tocOff); err != nil {
			return nil, fmt.Errorf("entry %q: %w", path, err)
		}
		saved[path] = append(saved[path], e)
	}
	if len(d.b) != 0 {
		return nil, errors.New("bytes after the table")
	}
	return saved, nil
}

// check checks the lengths and positions of e, an entry read from a
// file whose table starts at tocOff, before anything uses them: a damaged
// or hostile file is refused whole (the views measure their segments
// again), it never sizes an allocation or a view.
func (e savedEntry) check(tocOff int64) error {
	switch {
	case e.id.size < 0 || e.rendered < 0:
		return errors.New("negative size")
	case e.blobOff < 8 || e.blobOff > tocOff-int64(e.blobLen):
		return errors.New("blob outside the file")
	case e.cps == 0 && e.blobLen != 0:
		return errors.New("a blob without an index")
	case e.cps > 0 && (e.id.size == 0 || int64(e.cps)-1 > int64(e.blobLen/2)):
		return fmt.Errorf("%d checkpoints in %d bytes", e.cps, e.blobLen)
	}
	return nil
}

// tocDecoder reads table fields, remembering the first shortfall.
type tocDecoder struct {
	b   []byte
	err error
}

func (d *tocDecoder) take(n int) []byte {
	if d.err != nil || len(d.b) < n {
		d.err = errors.New("truncated table")
		return make([]byte, n)
	}
	p := d.b[:n]
	d.b = d.b[n:]
	return p
}
func (d *tocDecoder) u64() uint64 { return binary.LittleEndian.Uint64(d.take(8)) }
func (d *tocDecoder) u32() uint32 { return binary.LittleEndian.Uint32(d.take(4)) }
func (d *tocDecoder) str() string {
	return string(d.take(int(binary.LittleEndian.Uint16(d.take(2)))))
}

// write saves what c knows (the cached segment indexes, with their
// checkpoints, and the kept measures) and the saved entries still valid,
// unless read-only, and logs it at level. Indexes are written one at a
// time, straight to the file; the table of what was written is kept for
// later lookups (about 100 bytes an entry).
func (v *viewSizes) write(c *indexCache, level slog.Level) {
	if v.readOnly {
		return
	}
	v.saving.Lock()
	defer v.saving.Unlock()
	start := time.Now()
	v.load.Do(v.read)
	n, err := v.writeFile(c)
	if err != nil {
		v.log.Warn("fusefs: could not save view sizes; the next mount measures segments again", "file", v.path(), "err", err)
		return
	}
	if n > 0 {
		v.log.Log(context.Background(), level, "fusefs: saved view sizes", "entries", n, "took", time.Since(start).Round(time.Millisecond))
	}
}

// close closes the file the saved entries' blobs are read from (the mount
// has stopped serving).
func (v *viewSizes) close() {
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.mu.file != nil {
		v.mu.file.Close()
	}
	v.mu.saved, v.mu.file = nil, nil
}

// viewSizesWriter streams a new ViewSizesFile: blobs as they come, then
// the table and the footer.
type viewSizesWriter struct {
	w     *bufio.Writer
	off   int64
	toc   []byte
	count uint32
	seen  map[string]bool // path + "\x00" + format + hash: one entry each
	buf   []byte
	saved map[string][]savedEntry // what the new file holds
}

// newViewSizesWriter returns an empty writer; begin starts its file.
func newViewSizesWriter() *viewSizesWriter {
	return &viewSizesWriter{seen: map[string]bool{}, saved: map[string][]savedEntry{}}
}

// begin writes the file's header to out.
func (w *viewSizesWriter) begin(out io.Writer) {
	w.w = bufio.NewWriterSize(out, 256<<10)
	w.write([]byte(viewSizesMagic))
	w.write(binary.LittleEndian.AppendUint32(nil, viewSizesVersion))
}

// finish writes the table and the footer after the blobs and flushes.
func (w *viewSizesWriter) finish() error {
	foot := binary.LittleEndian.AppendUint64(nil, uint64(w.off))
	foot = binary.LittleEndian.AppendUint32(foot, uint32(len(w.toc)))
	foot = binary.LittleEndian.AppendUint32(foot, w.count)
	foot = binary.LittleEndian.AppendUint32(foot, crc32.Checksum(w.toc, crcTable))
	foot = append(foot, viewSizesMagic...)
	foot = binary.LittleEndian.AppendUint32(foot, viewSizesVersion)
	w.write(w.toc)
	w.write(foot)
	return w.w.Flush()
}

func (w *viewSizesWriter) write(p []byte) {
	n, _ := w.w.Write(p) // the error is bufio's, reported by Flush
	w.off += int64(n)
}

// add writes an entry and its blob (nil: no index).
func (w *viewSizesWriter) add(path string, e savedEntry, blob []byte) {
	key := fmt.Sprintf("%s\x00%s\x00%x", path, e.format, e.abHash)
	if w.seen[key] || len(path) > math.MaxUint16 || len(e.format) > math.MaxUint16 {
		return // (a name the table's u16 lengths cannot hold is not saved)
	}
	w.seen[key] = true
	e.blobOff, e.blobLen, e.blobCRC = w.off, uint32(len(blob)), crc32.Checksum(blob, crcTable)
	w.write(blob)
	t := w.toc
	t = binary.LittleEndian.AppendUint16(t, uint16(len(path)))
	t = append(t, path...)
	t = binary.LittleEndian.AppendUint16(t, uint16(len(e.format)))
	t = append(t, e.format...)
	for _, x := range []uint64{uint64(e.id.size), e.id.inode, uint64(e.id.mtimeNs), e.abHash, uint64(e.rendered)} {
		t = binary.LittleEndian.AppendUint64(t, x)
	}
	t = binary.LittleEndian.AppendUint32(t, e.cps)
	t = binary.LittleEndian.AppendUint64(t, uint64(e.blobOff))
	t = binary.LittleEndian.AppendUint32(t, e.blobLen)
	t = binary.LittleEndian.AppendUint32(t, e.blobCRC)
	w.toc = t
	w.count++
	w.saved[path] = append(w.saved[path], e)
}

// encodeIndex encodes cps[1:] as a blob into buf.
func encodeIndex(buf []byte, cps []checkpoint) []byte {
	buf = buf[:0]
	for i := 1; i < len(cps); i++ {
		buf = binary.AppendUvarint(buf, uint64(cps[i].rpos-cps[i-1].rpos))
		buf = binary.AppendUvarint(buf, uint64(cps[i].fpos-cps[i-1].fpos))
	}
	return buf
}

// errNothingToSave ends a writeFile that would write an empty file where
// there was none.
var errNothingToSave = errors.New("nothing to save")

// writeFile saves the mount's measures and indexes, and the saved entries of
// segments still there unchanged, to a new ViewSizesFile that later lookups
// read from. It returns the number of entries written (0: nothing to save).
func (v *viewSizes) writeFile(c *indexCache) (int, error) {
	v.mu.Lock()
	saved, old := v.mu.saved, v.mu.file // old is closed by saves only, which take turns
	v.mu.Unlock()
	w := newViewSizesWriter()
	err := vfs.WriteAtomic(v.fs, v.path(), 0o644, func(out io.Writer) error {
		return v.writeEntries(w, out, c, saved, old)
	})
	if errors.Is(err, errNothingToSave) {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	// Later lookups and saves read the new file's blobs.
	f, ferr := v.fs.OpenFile(v.path(), os.O_RDONLY, 0)
	v.mu.Lock()
	v.mu.saved, v.mu.file = w.saved, f
	if ferr != nil {
		v.mu.saved, v.mu.file = nil, nil
	}
	v.mu.Unlock()
	if old != nil {
		old.Close()
	}
	return int(w.count), ferr
}

// writeEntries writes the file's content to out through w: one entry per
// segment, format and aborted set, the first that comes: the mount's
// indexes, then the saved entries (read from old) of segments still there
// unchanged (their indexes), then the mount's measures without index.
func (v *viewSizes) writeEntries(w *viewSizesWriter, out io.Writer, c *indexCache, saved map[string][]savedEntry, old vfs.File) error {
	w.begin(out)
	ids := map[string]fileID{}
	idOf := func(rel, path string) (fileID, bool) {
		id, ok := ids[rel]
		if !ok {
			if id, ok = statID(v.fs, path); !ok {
				return id, false
			}
			ids[rel] = id
		}
		return id, true
	}
	mine := func(m segMeasure, cps []checkpoint) {
		rel := v.rel(m.key.seg)
		if rel == "" || m.bad != nil || m.scanned == 0 {
			return
		}
		id, ok := idOf(rel, m.key.seg.LogPath())
		if !ok || id.size != m.scanned {
			return // gone, or measured short of its end
		}
		e := savedEntry{id: id, format: m.key.format.key(), abHash: m.abHash, rendered: m.rlen}
		var blob []byte
		if len(cps) > 0 {
			w.buf = encodeIndex(w.buf, cps)
			blob, e.cps = w.buf, uint32(len(cps))
		}
		w.add(rel, e, blob)
	}
	c.eachIndex(mine)
	for rel, es := range saved {
		if id, ok := idOf(rel, filepath.Join(v.dir, rel)); !ok || id != es[0].id {
			continue
		}
		for _, e := range es {
			var blob []byte
			if e.cps > 0 && old != nil {
				blob, _ = readBlob(old, e)
			}
			if blob == nil {
				e.cps = 0 // keep the length, drop the index
			}
			w.add(rel, e, blob)
		}
	}
	for _, m := range c.keptMeasures() {
		mine(m, nil)
	}
	if w.count == 0 && len(saved) == 0 {
		return errNothingToSave
	}
	return w.finish()
}

// hashOver identifies the aborted transactions that overlap seg's offsets:
// the ones that hide records of seg. 0 when there are none; independent of
// map order. (seg's end is only asked for when there are some: it can cost
// a read.)
func hashOver(a *abortedSet, seg segmentReader) uint64 {
	if a.Empty() {
		return 0
	}
	lo, hi := seg.BaseOffset(), seg.NextOffset()
	var sum uint64
	var b [24]byte
	a.Each(func(t index.AbortedTxn) {
		if t.LastOffset < lo || t.FirstOffset >= hi {
			return
		}
		binary.LittleEndian.PutUint64(b[0:], uint64(t.ProducerID))
		binary.LittleEndian.PutUint64(b[8:], uint64(t.FirstOffset))
		binary.LittleEndian.PutUint64(b[16:], uint64(t.LastOffset))
		h := fnv.New64a()
		h.Write(b[:])
		sum += h.Sum64()
	})
	return sum
}
