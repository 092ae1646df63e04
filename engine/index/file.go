package index

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"runtime/debug"
	"sync/atomic"

	"github.com/topicfs/topicfs/engine/vfs"
)

// entryFile is the storage shared by OffsetIndex and TimeIndex: fixed-size
// entries in a byte view that is either an mmap of the file or a heap buffer.
//
// The writer goroutine owns f, mm, fileSize, capacity and closed; readers only
// load n and view. view always holds at least n entries: the writer publishes
// a grown view before it stores a larger n.
//
// A read-only index on a file system that can map (the OS) is a read-only
// MAP_SHARED mapping of the entries validated at open; the file is closed
// at once (the mapping keeps the inode). Index files are written only by
// topicfs, a sealed one only after its mapping is gone (a rebuild closes
// the index before it unlinks the file and writes a new one), so mapped
// bytes below n never change. A file cut short behind topicfs's back would
// make a read of its mapping fault: reads of a read-only mapping, or of a
// writable one once trimmed (a sealed segment's, rolled in this process),
// are guarded (read, endGuard), which turns the fault into "no entry"
// answers (always a safe lower bound: the caller scans from the segment's
// start) and marks the index faulted (Faulted), so that its owner drops it
// and rebuilds. The active index is not guarded: its appends store into
// the mapping, and would fault anyway.
type entryFile struct {
	fs        vfs.FS
	path      string
	base      int64
	entrySize int
	writable  bool

	f        vfs.File           // nil for read-only indexes (closed once read or mapped)
	unmap    func([]byte) error // non-nil when mm is a mapping
	guarded  bool               // mm is a read-only mapping: reads go through read
	faulted  atomic.Bool        // a read of the mapping faulted (guarded only)
	mm       []byte             // the mapping (len == capacity*entrySize)
	capacity int                // max entries the file may hold
	fileSize int64              // current file length (writer-owned)
	reserved int64              // mmap mode: bytes [0, reserved) have disk blocks (vfs.Allocate)
	openLen  int64              // file length when opened, for SanityCheck
	openErr  error              // an out-of-order entry found while opening
	closed   bool
	dirty    bool // heap mode: the file still holds entries past n (after truncateEntries)

	n    atomic.Int64
	view atomic.Pointer[[]byte]
}

// scanFunc reports whether entry i (with previous entry prev, nil for i == 0)
// ends the valid entries; bad says it is out of order rather than a zero tail.
type scanFunc func(i int, prev, cur []byte) (end bool, bad error)

const scanChunk = 64 << 10

// open opens path and finds the valid entries.
func (x *entryFile) open(maxBytes int, scan scanFunc) error {
	if !x.writable {
		return x.openReadOnly(scan)
	}
	f, err := x.fs.OpenFile(x.path, os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return fmt.Errorf("index: open %s: %w", x.path, err)
	}
	x.f = f
	if err := x.openWritable(maxBytes, scan); err != nil {
		_ = x.closeMapping()
		_ = f.Close()
		x.f = nil
		return err
	}
	return nil
}

func (x *entryFile) openReadOnly(scan scanFunc) error {
	f, err := x.fs.OpenFile(x.path, os.O_RDONLY, 0)
	if err != nil {
		return fmt.Errorf("index: open %s: %w", x.path, err)
	}
	defer f.Close()
	size, err := f.Size()
	if err != nil {
		return fmt.Errorf("index: stat %s: %w", x.path, err)
	}
	x.openLen = size
	if m, ok := f.(vfs.ReadMmapper); ok {
		if mapped, err := x.mapReadOnly(m, size, scan); mapped || err != nil {
			return err
		}
	}
	buf, n, err := x.readEntries(f, size, scan)
	if err != nil {
		return err
	}
	buf = buf[: n*x.entrySize : n*x.entrySize]
	x.capacity = n
	x.fileSize = size
	x.view.Store(&buf)
	x.n.Store(int64(n))
	return nil
}

// maxReadOnlyMap bounds a read-only mapping: the most entries an index can
// hold (relative offsets are int32, strictly increasing) times the entry size
// is below it.
const maxReadOnlyMap = 1 << 36

// mapReadOnly maps the whole entries of the file's size (the length stat
// gave at open: nothing past it is ever read) and finds the valid ones in
// the mapping. mapped is false when the file cannot be mapped (no entry,
// no address space): the caller reads it into the heap instead.
func (x *entryFile) mapReadOnly(m vfs.ReadMmapper, size int64, scan scanFunc) (mapped bool, err error) {
	es := int64(x.entrySize)
	length := size / es * es
	if length == 0 || length > maxReadOnlyMap {
		return false, nil
	}
	mm, err := m.MmapReadOnly(int(length))
	if err != nil {
		return false, nil
	}
	n := 0
	if !ReadGuarded(func() { n = x.scanView(mm, scan) }) {
		// Cut short between stat and scan: not an index to trust.
		_ = m.Munmap(mm)
		return true, fmt.Errorf("%w: %s: shorter than its %d bytes while opening", ErrCorruptIndex, x.path, size)
	}
	view := mm[: n*x.entrySize : n*x.entrySize]
	x.unmap, x.mm, x.guarded = m.Munmap, mm, true
	x.capacity = n
	x.fileSize = size
	x.view.Store(&view)
	x.n.Store(int64(n))
	mappedCount.Add(1)
	mappedBytes.Add(int64(len(mm)))
	return true, nil
}

// scanView returns how many entries of view are valid (scan), recording an
// out-of-order entry in openErr.
func (x *entryFile) scanView(view []byte, scan scanFunc) int {
	es := x.entrySize
	total := len(view) / es
	for n := 0; n < total; n++ {
		var prev []byte
		if n > 0 {
			prev = view[(n-1)*es : n*es]
		}
		end, bad := scan(n, prev, view[n*es:(n+1)*es])
		if end {
			if bad != nil {
				x.openErr = fmt.Errorf("%w: %s: %v", ErrCorruptIndex, x.path, bad)
			}
			return n
		}
	}
	return total
}

// Live mappings of index files in this process, for tests and stats.
var mappedCount, mappedBytes atomic.Int64

// Mapped returns how many index files this process has mapped now and the
// bytes those mappings span (read-only mappings of sealed indexes and
// read-write ones of writable indexes).
func Mapped() (files, bytes int64) { return mappedCount.Load(), mappedBytes.Load() }

// ReadGuarded calls fn, which reads a mapping, and reports false when a
// read faulted (the file was cut short under the mapping) instead of
// letting the fault kill the process.
func ReadGuarded(fn func()) (ok bool) {
	old := debug.SetPanicOnFault(true)
	defer func() {
		debug.SetPanicOnFault(old)
		if v := recover(); v != nil {
			if _, fault := v.(interface{ Addr() uintptr }); !fault {
				panic(v)
			}
			ok = false
		}
	}()
	fn()
	return true
}

// endGuard, deferred by a lookup that reads a mapping after
// debug.SetPanicOnFault(true) returned old, restores old and turns a fault
// while reading into Faulted (the lookup returns what its results held:
// set them to the empty index's answer before reading). Lookups, the hot
// path, use it instead of read to spare read's closures.
func (x *entryFile) endGuard(old bool) {
	debug.SetPanicOnFault(old)
	if v := recover(); v != nil {
		if _, fault := v.(interface{ Addr() uintptr }); !fault {
			panic(v)
		}
		x.faulted.Store(true)
	}
}

// read calls fn with the entry count and a view holding them. On a
// guarded mapping fn runs guarded: after a fault (now or before) read
// reports false, the index is Faulted, and the caller answers as for an
// empty index.
func (x *entryFile) read(fn func(n int, view []byte)) bool {
	n, view := x.snapshot()
	if !x.guarded {
		fn(n, view)
		return true
	}
	if x.faulted.Load() {
		return false
	}
	if ReadGuarded(func() { fn(n, view) }) {
		return true
	}
	x.faulted.Store(true)
	return false
}

// readEntries reads f chunk by chunk until the end of the valid entries, so
// memory follows the entries, not a preallocated file's length.
func (x *entryFile) readEntries(f vfs.File, size int64, scan scanFunc) ([]byte, int, error) {
	es := x.entrySize
	total := int(size / int64(es))
	var buf []byte
	chunk := make([]byte, (scanChunk/es)*es)
	n := 0
	for n < total {
		want := min(len(chunk), (total-n)*es)
		got, err := f.ReadAt(chunk[:want], int64(n*es))
		if got < want {
			if err == nil || errors.Is(err, io.EOF) {
				err = io.ErrUnexpectedEOF
			}
			return nil, 0, fmt.Errorf("index: read %s: %w", x.path, err)
		}
		stop := false
		for off := 0; off < want; off += es {
			var prev []byte
			if n > 0 {
				if off >= es {
					prev = chunk[off-es : off]
				} else {
					prev = buf[(n-1)*es : n*es]
				}
			}
			end, bad := scan(n, prev, chunk[off:off+es])
			if end {
				if bad != nil {
					x.openErr = fmt.Errorf("%w: %s: %v", ErrCorruptIndex, x.path, bad)
				}
				stop = true
				break
			}
			buf = append(buf, chunk[off:off+es]...)
			n++
		}
		if stop {
			break
		}
	}
	return buf, n, nil
}

func (x *entryFile) openWritable(maxBytes int, scan scanFunc) error {
	es := x.entrySize
	size, err := x.f.Size()
	if err != nil {
		return fmt.Errorf("index: stat %s: %w", x.path, err)
	}
	x.openLen = size
	capacity := max(maxBytes, 0) / es
	capacity = max(capacity, int(size/int64(es)))
	x.capacity = capacity
	mapper, _ := x.f.(vfs.Mmapper)
	if mapper == nil || capacity == 0 {
		buf, n, err := x.readEntries(x.f, size, scan)
		if err != nil {
			return err
		}
		// Drop whatever follows the valid entries so it cannot resurface.
		if size != int64(n*es) {
			if err := x.f.Truncate(int64(n * es)); err != nil {
				return fmt.Errorf("index: truncate %s: %w", x.path, err)
			}
		}
		x.fileSize = int64(n * es)
		x.view.Store(&buf)
		x.n.Store(int64(n))
		return nil
	}
	want := int64(capacity * es)
	if size != want {
		if err := x.f.Truncate(want); err != nil {
			return fmt.Errorf("index: preallocate %s: %w", x.path, err)
		}
	}
	x.fileSize = want
	mm, err := mapper.Mmap(capacity * es)
	if err != nil {
		return fmt.Errorf("index: %w", err)
	}
	x.unmap, x.mm = mapper.Munmap, mm
	mappedCount.Add(1)
	mappedBytes.Add(int64(len(mm)))
	// Only the old file's bytes can hold entries or garbage: past them the
	// Truncate above left holes that read as zeros. Scanning or comparing
	// those would fault in every page of a new 10 MiB index (~20 MiB per
	// roll for the two indexes), so both stop at the old size.
	oldLen := int(min(size, int64(len(mm))))
	scanned := min(capacity, (oldLen+es-1)/es) // a torn last entry is scanned too
	n := x.scanView(mm[:scanned*es], scan)
	// Zero any garbage after the valid entries so a later append cannot make
	// it look valid. Untouched preallocated pages stay clean.
	zero := make([]byte, 4096)
	for off := n * es; off < oldLen; off += len(zero) {
		end := min(off+len(zero), oldLen)
		if !bytes.Equal(mm[off:end], zero[:end-off]) {
			clear(mm[off:end])
		}
	}
	x.reserved = int64(n * es)
	x.view.Store(&mm)
	x.n.Store(int64(n))
	return nil
}

// reserveChunk is how much disk a mapped index reserves at a time.
const reserveChunk = 64 << 10

// reserve makes sure the blocks under [0, end) exist before a store through
// the mapping touches them: a store into a hole on a full disk is a SIGBUS,
// a failed fallocate is an ENOSPC error.
func (x *entryFile) reserve(end int64) error {
	if end <= x.reserved {
		return nil
	}
	upto := min((end+reserveChunk-1)/reserveChunk*reserveChunk, x.fileSize)
	if err := vfs.Allocate(x.f, x.reserved, upto-x.reserved); err != nil {
		return fmt.Errorf("index: reserve %s: %w", x.path, err)
	}
	x.reserved = upto
	return nil
}

// entry returns entry i of a view (caller checked i < n).
func (x *entryFile) entry(view []byte, i int) []byte {
	return view[i*x.entrySize : (i+1)*x.entrySize]
}

// snapshot returns the entry count and a view holding at least that many.
func (x *entryFile) snapshot() (int, []byte) {
	n := int(x.n.Load())
	return n, *x.view.Load()
}

func (x *entryFile) checkWritable() error {
	if x.closed {
		return ErrClosed
	}
	if !x.writable {
		return fmt.Errorf("%w: %s", ErrReadOnly, x.path)
	}
	return nil
}

// put appends one encoded entry; the caller has checked order and capacity.
func (x *entryFile) put(e []byte) error {
	es := x.entrySize
	n := int(x.n.Load())
	if n >= x.capacity {
		return fmt.Errorf("%w: %s holds %d entries", ErrFull, x.path, n)
	}
	if err := x.flushTruncate(); err != nil {
		return err
	}
	if x.mm != nil {
		if x.fileSize < int64((n+1)*es) { // re-expand after Trim
			if err := x.f.Truncate(int64(x.capacity * es)); err != nil {
				return fmt.Errorf("index: expand %s: %w", x.path, err)
			}
			x.fileSize = int64(x.capacity * es)
		}
		if err := x.reserve(int64((n + 1) * es)); err != nil {
			return err
		}
		copy(x.mm[n*es:], e)
		x.n.Store(int64(n + 1))
		return nil
	}
	if _, err := x.f.WriteAt(e, int64(n*es)); err != nil {
		return fmt.Errorf("index: write %s: %w", x.path, err)
	}
	x.fileSize = max(x.fileSize, int64((n+1)*es))
	view := *x.view.Load()
	if len(view) < (n+1)*es {
		grown := make([]byte, min(max(2*len(view), 64*es), x.capacity*es))
		copy(grown, view[:n*es])
		copy(grown[n*es:], e)
		x.view.Store(&grown)
	} else {
		copy(view[n*es:], e)
	}
	x.n.Store(int64(n + 1))
	return nil
}

// truncateEntries keeps the first keep entries. In heap mode the file is
// cut lazily (dirty is set) by the next put, trim, sync or close, so that
// TruncateTo needs no error result; the stale bytes are zeroed in memory.
func (x *entryFile) truncateEntries(keep int) {
	if x.closed || !x.writable {
		return
	}
	es := x.entrySize
	n := int(x.n.Load())
	if keep >= n {
		return
	}
	x.n.Store(int64(keep))
	if x.mm != nil {
		clear(x.mm[keep*es : n*es])
		return
	}
	view := *x.view.Load()
	clear(view[keep*es : n*es])
	x.dirty = true
}

// flushTruncate cuts the file after a heap-mode truncateEntries.
func (x *entryFile) flushTruncate() error {
	if !x.dirty {
		return nil
	}
	want := x.n.Load() * int64(x.entrySize)
	if err := x.f.Truncate(want); err != nil {
		return fmt.Errorf("index: truncate %s: %w", x.path, err)
	}
	x.fileSize = want
	x.dirty = false
	return nil
}

// trim shrinks the file to the valid entries. A mapping stays in place (only
// its first entries*entrySize bytes are ever read); a later append re-expands.
func (x *entryFile) trim() error {
	if x.closed {
		return ErrClosed
	}
	if !x.writable {
		return nil
	}
	if err := x.flushTruncate(); err != nil {
		return err
	}
	if x.mm != nil {
		// Trimmed on seal: the index is read, no longer appended to, so
		// its reads are guarded as a read-only mapping's. (The active
		// index's are not: a file cut under it would fault on the next
		// append anyway.)
		x.guarded = true
	}
	want := x.n.Load() * int64(x.entrySize)
	if x.fileSize == want {
		return nil
	}
	if err := x.f.Truncate(want); err != nil {
		return fmt.Errorf("index: trim %s: %w", x.path, err)
	}
	x.fileSize = want
	x.reserved = min(x.reserved, want)
	return nil
}

func (x *entryFile) sync() error {
	if x.closed {
		return ErrClosed
	}
	if !x.writable {
		return nil
	}
	if err := x.flushTruncate(); err != nil {
		return err
	}
	if err := x.f.Sync(); err != nil {
		return fmt.Errorf("index: sync %s: %w", x.path, err)
	}
	return nil
}

func (x *entryFile) closeMapping() error {
	if x.mm == nil {
		return nil
	}
	mm := x.mm
	x.mm = nil
	empty := []byte{}
	x.view.Store(&empty)
	mappedCount.Add(-1)
	mappedBytes.Add(-int64(len(mm)))
	return x.unmap(mm)
}

// close trims a writable index and releases the file.
func (x *entryFile) close() error {
	if x.closed {
		return ErrClosed
	}
	var err error
	if x.writable {
		err = x.trim()
	}
	x.closed = true
	if e := x.closeMapping(); err == nil {
		err = e
	}
	if x.f != nil {
		if e := x.f.Close(); err == nil {
			err = e
		}
		x.f = nil
	}
	x.n.Store(0)
	empty := []byte{}
	x.view.Store(&empty)
	return err
}

// sanityLength reports a file length that is not a multiple of the entry size.
func (x *entryFile) sanityLength() error {
	if x.openErr != nil {
		return x.openErr
	}
	if x.openLen%int64(x.entrySize) != 0 {
		return fmt.Errorf("%w: %s: length %d is not a multiple of %d", ErrCorruptIndex, x.path, x.openLen, x.entrySize)
	}
	return nil
}

// reset drops every entry.
func (x *entryFile) reset() error {
	if err := x.checkWritable(); err != nil {
		return err
	}
	x.truncateEntries(0)
	return x.flushTruncate()
}
