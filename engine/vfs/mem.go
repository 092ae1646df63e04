package vfs

import (
	"io"
	"io/fs"
	"math"
	"os"
	"path"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"
)

// MemFS is an in-memory FS that models what survives a crash, like pebble's
// crashable memfs:
//
//   - a file's bytes (and size: Truncate included) become durable only when
//     that file is Synced; Crash keeps the bytes of the last Sync;
//   - a directory entry (a file or directory created, renamed in or out, or
//     removed) becomes durable only when its parent directory is SyncDir'd;
//     Crash rolls back entries changed since. MkdirAll's new directories are
//     entries too: SyncDir their parents to keep them.
//
// A node is shared between the live tree and the durable view, so a file
// renamed after its last Sync keeps its synced bytes under whichever name the
// durable directory listing holds. MemFS is safe for concurrent use (one
// mutex); its Files do not implement Mmapper.
type MemFS struct {
	mu    sync.Mutex
	root  *memNode
	now   func() time.Time
	locks map[*memNode]bool // held Locks; not durable
}

type memNode struct {
	dir   bool
	mode  os.FileMode
	mtime time.Time

	// Files.
	data      []byte // live bytes
	synced    []byte // bytes as of the last Sync (nil and never synced = empty)
	dirtyFrom int64  // lowest offset changed (written or truncated) since the last Sync

	// Directories.
	children map[string]*memNode // live entries
	durable  map[string]*memNode // entries as of the last SyncDir
}

func newDirNode(mode os.FileMode, now time.Time) *memNode {
	return &memNode{dir: true, mode: mode | os.ModeDir, mtime: now,
		children: map[string]*memNode{}, durable: map[string]*memNode{}}
}

// NewMem returns an empty in-memory file system whose root "/" (also ".")
// exists and is durable.
func NewMem() *MemFS {
	return &MemFS{root: newDirNode(0o755, time.Now()), now: time.Now}
}

var _ FS = (*MemFS)(nil)

// Crash returns a new MemFS holding only the durable state of m: the entries
// each directory had at its last SyncDir, and the bytes each file had at its
// last Sync. m itself is unchanged and still usable.
func (m *MemFS) Crash() *MemFS {
	m.mu.Lock()
	defer m.mu.Unlock()
	return &MemFS{root: crashCopy(m.root), now: m.now}
}

func crashCopy(n *memNode) *memNode {
	if !n.dir {
		return &memNode{mode: n.mode, mtime: n.mtime, data: slices.Clone(n.synced),
			synced: slices.Clone(n.synced), dirtyFrom: math.MaxInt64}
	}
	c := newDirNode(n.mode, n.mtime)
	for name, child := range n.durable {
		cc := crashCopy(child)
		c.children[name] = cc
		c.durable[name] = cc
	}
	return c
}

// split cleans p and returns its components ("" and "/" and "." are the root).
func split(p string) []string {
	p = path.Clean("/" + p)
	if p == "/" {
		return nil
	}
	return strings.Split(p[1:], "/")
}

func pathErr(op, name string, err error) error {
	return &os.PathError{Op: op, Path: name, Err: err}
}

// lookup walks to the node at p; mu must be held.
func (m *MemFS) lookup(p string) (*memNode, error) {
	n := m.root
	for _, c := range split(p) {
		if !n.dir {
			return nil, syscall.ENOTDIR
		}
		child, ok := n.children[c]
		if !ok {
			return nil, syscall.ENOENT
		}
		n = child
	}
	return n, nil
}

// parent returns the parent directory node of p and p's last component.
func (m *MemFS) parent(p string) (*memNode, string, error) {
	parts := split(p)
	if len(parts) == 0 {
		return nil, "", syscall.EINVAL // the root has no parent
	}
	dir, err := m.lookup(strings.Join(parts[:len(parts)-1], "/"))
	if err != nil {
		return nil, "", err
	}
	if !dir.dir {
		return nil, "", syscall.ENOTDIR
	}
	return dir, parts[len(parts)-1], nil
}

// OpenFile opens or creates a file.
func (m *MemFS) OpenFile(name string, flag int, perm os.FileMode) (File, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	dir, base, err := m.parent(name)
	if err != nil {
		if err == syscall.EINVAL {
			err = syscall.EISDIR
		}
		return nil, pathErr("open", name, err)
	}
	n, ok := dir.children[base]
	switch {
	case ok && flag&os.O_CREATE != 0 && flag&os.O_EXCL != 0:
		return nil, pathErr("open", name, syscall.EEXIST)
	case ok && n.dir:
		return nil, pathErr("open", name, syscall.EISDIR)
	case !ok && flag&os.O_CREATE == 0:
		return nil, pathErr("open", name, syscall.ENOENT)
	case !ok:
		n = &memNode{mode: perm & os.ModePerm, mtime: m.now(), dirtyFrom: math.MaxInt64}
		dir.children[base] = n
		dir.mtime = m.now()
	}
	acc := flag & (os.O_RDONLY | os.O_WRONLY | os.O_RDWR)
	if flag&os.O_TRUNC != 0 && acc != os.O_RDONLY {
		n.data = n.data[:0:0]
		n.dirtyFrom = 0
		n.mtime = m.now()
	}
	return &memFile{fs: m, n: n, name: name, flag: flag,
		read: acc != os.O_WRONLY, write: acc != os.O_RDONLY}, nil
}

// Remove removes a file or an empty directory.
func (m *MemFS) Remove(name string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	dir, base, err := m.parent(name)
	if err != nil {
		return pathErr("remove", name, err)
	}
	n, ok := dir.children[base]
	if !ok {
		return pathErr("remove", name, syscall.ENOENT)
	}
	if n.dir && len(n.children) > 0 {
		return pathErr("remove", name, syscall.ENOTEMPTY)
	}
	delete(dir.children, base)
	dir.mtime = m.now()
	return nil
}

// RemoveAll removes name and everything below it.
func (m *MemFS) RemoveAll(name string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	dir, base, err := m.parent(name)
	if err != nil {
		if err == syscall.ENOENT {
			return nil
		}
		return pathErr("removeall", name, err)
	}
	if _, ok := dir.children[base]; ok {
		delete(dir.children, base)
		dir.mtime = m.now()
	}
	return nil
}

// Rename moves oldname to newname, replacing a file or an empty directory there.
func (m *MemFS) Rename(oldname, newname string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	odir, obase, err := m.parent(oldname)
	if err != nil {
		return &os.LinkError{Op: "rename", Old: oldname, New: newname, Err: err}
	}
	n, ok := odir.children[obase]
	if !ok {
		return &os.LinkError{Op: "rename", Old: oldname, New: newname, Err: syscall.ENOENT}
	}
	ndir, nbase, err := m.parent(newname)
	if err != nil {
		return &os.LinkError{Op: "rename", Old: oldname, New: newname, Err: err}
	}
	if n.dir && strings.HasPrefix(path.Clean("/"+newname)+"/", path.Clean("/"+oldname)+"/") {
		if path.Clean("/"+newname) == path.Clean("/"+oldname) {
			return nil
		}
		return &os.LinkError{Op: "rename", Old: oldname, New: newname, Err: syscall.EINVAL}
	}
	if old, ok := ndir.children[nbase]; ok {
		switch {
		case old == n:
			return nil
		case old.dir && !n.dir:
			return &os.LinkError{Op: "rename", Old: oldname, New: newname, Err: syscall.EISDIR}
		case !old.dir && n.dir:
			return &os.LinkError{Op: "rename", Old: oldname, New: newname, Err: syscall.ENOTDIR}
		case old.dir && len(old.children) > 0:
			return &os.LinkError{Op: "rename", Old: oldname, New: newname, Err: syscall.ENOTEMPTY}
		}
	}
	delete(odir.children, obase)
	ndir.children[nbase] = n
	odir.mtime, ndir.mtime = m.now(), m.now()
	return nil
}

// MkdirAll creates name and any missing parents. New directories are
// durable only once their parent is SyncDir'd.
func (m *MemFS) MkdirAll(name string, perm os.FileMode) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	n := m.root
	for _, c := range split(name) {
		child, ok := n.children[c]
		if !ok {
			child = newDirNode(perm&os.ModePerm, m.now())
			n.children[c] = child
			n.mtime = m.now()
		} else if !child.dir {
			return pathErr("mkdir", name, syscall.ENOTDIR)
		}
		n = child
	}
	return nil
}

// ReadDir lists name's live entries sorted by name.
func (m *MemFS) ReadDir(name string) ([]os.DirEntry, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	n, err := m.lookup(name)
	if err != nil {
		return nil, pathErr("readdir", name, err)
	}
	if !n.dir {
		return nil, pathErr("readdir", name, syscall.ENOTDIR)
	}
	out := make([]os.DirEntry, 0, len(n.children))
	for base, c := range n.children {
		out = append(out, fs.FileInfoToDirEntry(c.info(base)))
	}
	slices.SortFunc(out, func(a, b os.DirEntry) int { return strings.Compare(a.Name(), b.Name()) })
	return out, nil
}

// Stat describes name.
func (m *MemFS) Stat(name string) (os.FileInfo, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	n, err := m.lookup(name)
	if err != nil {
		return nil, pathErr("stat", name, err)
	}
	parts := split(name)
	base := "/"
	if len(parts) > 0 {
		base = parts[len(parts)-1]
	}
	return n.info(base), nil
}

// SyncDir makes name's current entries durable.
func (m *MemFS) SyncDir(name string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	n, err := m.lookup(name)
	if err != nil {
		return pathErr("syncdir", name, err)
	}
	if !n.dir {
		return pathErr("syncdir", name, syscall.ENOTDIR)
	}
	n.durable = make(map[string]*memNode, len(n.children))
	for k, v := range n.children {
		n.durable[k] = v
	}
	return nil
}

// SetClock replaces the clock used for modification times (tests).
func (m *MemFS) SetClock(now func() time.Time) {
	m.mu.Lock()
	m.now = now
	m.mu.Unlock()
}

// info must be called with mu held.
func (n *memNode) info(name string) os.FileInfo {
	return memInfo{name: name, size: int64(len(n.data)), mode: n.mode, mtime: n.mtime, dir: n.dir}
}

type memInfo struct {
	name  string
	size  int64
	mode  os.FileMode
	mtime time.Time
	dir   bool
}

func (i memInfo) Name() string       { return i.name }
func (i memInfo) Size() int64        { return i.size }
func (i memInfo) Mode() os.FileMode  { return i.mode }
func (i memInfo) ModTime() time.Time { return i.mtime }
func (i memInfo) IsDir() bool        { return i.dir }
func (i memInfo) Sys() any           { return nil }

// memFile is an open MemFS file. Its offset is protected by the FS mutex.
type memFile struct {
	fs          *MemFS
	n           *memNode
	name        string
	flag        int
	read, write bool
	pos         int64
	closed      bool
}

func (f *memFile) Name() string { return f.name }

func (f *memFile) ReadAt(p []byte, off int64) (int, error) {
	f.fs.mu.Lock()
	defer f.fs.mu.Unlock()
	if f.closed {
		return 0, pathErr("read", f.name, os.ErrClosed)
	}
	if !f.read {
		return 0, pathErr("read", f.name, syscall.EBADF)
	}
	if off < 0 {
		return 0, pathErr("read", f.name, syscall.EINVAL)
	}
	if off >= int64(len(f.n.data)) {
		return 0, io.EOF
	}
	n := copy(p, f.n.data[off:])
	if n < len(p) {
		return n, io.EOF
	}
	return n, nil
}

// writeAt must be called with mu held.
func (f *memFile) writeAt(p []byte, off int64) {
	end := off + int64(len(p))
	if end > int64(len(f.n.data)) {
		if end > int64(cap(f.n.data)) {
			grown := make([]byte, end, max(end, 2*int64(cap(f.n.data))))
			copy(grown, f.n.data)
			f.n.data = grown
		} else {
			old := len(f.n.data)
			f.n.data = f.n.data[:end]
			clear(f.n.data[old:])
		}
	}
	copy(f.n.data[off:], p)
	f.n.dirtyFrom = min(f.n.dirtyFrom, off)
	f.n.mtime = f.fs.now()
}

func (f *memFile) check(op string) error {
	if f.closed {
		return pathErr(op, f.name, os.ErrClosed)
	}
	if !f.write {
		return pathErr(op, f.name, syscall.EBADF)
	}
	return nil
}

func (f *memFile) WriteAt(p []byte, off int64) (int, error) {
	f.fs.mu.Lock()
	defer f.fs.mu.Unlock()
	if err := f.check("write"); err != nil {
		return 0, err
	}
	if off < 0 {
		return 0, pathErr("write", f.name, syscall.EINVAL)
	}
	f.writeAt(p, off)
	return len(p), nil
}

func (f *memFile) Write(p []byte) (int, error) {
	f.fs.mu.Lock()
	defer f.fs.mu.Unlock()
	if err := f.check("write"); err != nil {
		return 0, err
	}
	if f.flag&os.O_APPEND != 0 {
		f.pos = int64(len(f.n.data))
	}
	f.writeAt(p, f.pos)
	f.pos += int64(len(p))
	return len(p), nil
}

func (f *memFile) Sync() error {
	f.fs.mu.Lock()
	defer f.fs.mu.Unlock()
	if f.closed {
		return pathErr("sync", f.name, os.ErrClosed)
	}
	// Copy only what changed since the last Sync, so appending and syncing
	// a large file stays linear.
	keep := min(f.n.dirtyFrom, int64(len(f.n.synced)), int64(len(f.n.data)))
	f.n.synced = append(f.n.synced[:keep:keep], f.n.data[keep:]...)
	f.n.dirtyFrom = math.MaxInt64
	return nil
}

func (f *memFile) Truncate(size int64) error {
	f.fs.mu.Lock()
	defer f.fs.mu.Unlock()
	if err := f.check("truncate"); err != nil {
		return err
	}
	if size < 0 {
		return pathErr("truncate", f.name, syscall.EINVAL)
	}
	if size <= int64(len(f.n.data)) {
		f.n.data = f.n.data[:size]
	} else {
		f.writeAt(nil, size)
	}
	f.n.dirtyFrom = min(f.n.dirtyFrom, size)
	f.n.mtime = f.fs.now()
	return nil
}

func (f *memFile) Size() (int64, error) {
	f.fs.mu.Lock()
	defer f.fs.mu.Unlock()
	if f.closed {
		return 0, pathErr("stat", f.name, os.ErrClosed)
	}
	return int64(len(f.n.data)), nil
}

func (f *memFile) Close() error {
	f.fs.mu.Lock()
	defer f.fs.mu.Unlock()
	if f.closed {
		return pathErr("close", f.name, os.ErrClosed)
	}
	f.closed = true
	return nil
}
