package vfs

import (
	"errors"
	"os"
	"strings"
	"sync"
	"sync/atomic"
)

// ErrInjectedCrash is returned by every operation at and after the one a
// CrashAt injector picked: the simulated process is dead.
var ErrInjectedCrash = errors.New("vfs: injected crash")

// OpKind names an FS or File operation seen by an Injector.
type OpKind int

// Operation kinds.
const (
	OpOpen      OpKind = iota // OpenFile of an existing file, read or write, no O_CREATE/O_TRUNC
	OpCreate                  // OpenFile with O_CREATE or O_TRUNC
	OpRead                    // File.ReadAt
	OpWrite                   // File.Write
	OpWriteAt                 // File.WriteAt
	OpSync                    // File.Sync
	OpTruncate                // File.Truncate
	OpRename                  // FS.Rename (Path is the old name, NewPath the new)
	OpRemove                  // FS.Remove
	OpRemoveAll               // FS.RemoveAll
	OpSyncDir                 // FS.SyncDir
	OpMkdir                   // FS.MkdirAll
	OpStat                    // FS.Stat, FS.ReadDir, File.Size
	OpAny       OpKind = -1   // matches every kind in FailOnPath
)

var opNames = [...]string{"open", "create", "read", "write", "writeAt", "sync", "truncate",
	"rename", "remove", "removeAll", "syncdir", "mkdir", "stat"}

func (k OpKind) String() string {
	if k >= 0 && int(k) < len(opNames) {
		return opNames[k]
	}
	return "any"
}

// Mutating reports whether the operation can change durable state. Crash
// tests count and crash only at mutating operations.
func (k OpKind) Mutating() bool {
	switch k {
	case OpCreate, OpWrite, OpWriteAt, OpSync, OpTruncate, OpRename, OpRemove, OpRemoveAll, OpSyncDir, OpMkdir:
		return true
	}
	return false
}

// Op describes one operation.
type Op struct {
	Kind    OpKind
	Path    string
	NewPath string // OpRename only
	Len     int    // OpWrite/OpWriteAt/OpRead: bytes requested
}

// Fault is an Injector's verdict. A nil *Fault lets the operation run.
type Fault struct {
	// Err is returned, wrapped in an *os.PathError naming the operation and
	// path, so errors.Is(err, syscall.ENOSPC) works for Err = syscall.ENOSPC.
	Err error
	// Written, for OpWrite/OpWriteAt, is how many bytes (clamped to the
	// request) reach the inner file before Err is returned: a short write.
	Written int
}

// Injector decides, before each operation, whether it fails. Implementations
// must be safe for concurrent use.
type Injector interface {
	Inject(op Op) *Fault
}

// InjectorFunc adapts a function to Injector.
type InjectorFunc func(op Op) *Fault

// Inject calls f.
func (f InjectorFunc) Inject(op Op) *Fault { return f(op) }

// Counter counts mutating operations and never fails one. Use it for a dry
// run to learn how many crash points a scenario has.
type Counter struct{ n atomic.Int64 }

// NewCounter returns a zeroed Counter.
func NewCounter() *Counter { return &Counter{} }

// Inject counts op if it is mutating.
func (c *Counter) Inject(op Op) *Fault {
	if op.Kind.Mutating() {
		c.n.Add(1)
	}
	return nil
}

// Count returns the number of mutating operations seen.
func (c *Counter) Count() int64 { return c.n.Load() }

// nth fires on the n-th (0-based) mutating operation matching kinds.
type nth struct {
	n     int64
	seen  atomic.Int64
	kinds []OpKind // empty = any mutating op
	fault Fault
}

func (x *nth) Inject(op Op) *Fault {
	if !op.Kind.Mutating() {
		return nil
	}
	if len(x.kinds) > 0 && !containsKind(x.kinds, op.Kind) {
		return nil
	}
	if x.seen.Add(1)-1 == x.n {
		f := x.fault
		return &f
	}
	return nil
}

func containsKind(ks []OpKind, k OpKind) bool {
	for _, x := range ks {
		if x == k {
			return true
		}
	}
	return false
}

// FailNth fails the n-th (0-based) mutating operation with err; every other
// operation runs.
func FailNth(n int64, err error) Injector {
	return &nth{n: n, fault: Fault{Err: err}}
}

// ShortWriteNth makes the n-th (0-based) Write or WriteAt write only written
// bytes and then return err.
func ShortWriteNth(n int64, written int, err error) Injector {
	return &nth{n: n, kinds: []OpKind{OpWrite, OpWriteAt}, fault: Fault{Err: err, Written: written}}
}

// FailOnPath fails every operation of kind (OpAny: every kind) whose path
// (or new path, for a rename) contains substr.
func FailOnPath(substr string, kind OpKind, err error) Injector {
	return InjectorFunc(func(op Op) *Fault {
		if kind != OpAny && op.Kind != kind {
			return nil
		}
		if strings.Contains(op.Path, substr) || (op.NewPath != "" && strings.Contains(op.NewPath, substr)) {
			return &Fault{Err: err}
		}
		return nil
	})
}

// CrashInjector simulates a process that dies at its n-th (0-based) mutating
// operation: that operation and every later operation of any kind fail with
// ErrInjectedCrash.
type CrashInjector struct {
	n       int64
	seen    atomic.Int64
	crashed atomic.Bool
}

// CrashAt returns an injector that crashes at the n-th mutating operation.
func CrashAt(n int64) *CrashInjector { return &CrashInjector{n: n} }

// Inject implements Injector.
func (c *CrashInjector) Inject(op Op) *Fault {
	if c.crashed.Load() {
		return &Fault{Err: ErrInjectedCrash}
	}
	if !op.Kind.Mutating() {
		return nil
	}
	if c.seen.Add(1)-1 >= c.n {
		c.crashed.Store(true)
		return &Fault{Err: ErrInjectedCrash}
	}
	return nil
}

// Crashed reports whether the crash point was reached.
func (c *CrashInjector) Crashed() bool { return c.crashed.Load() }

// Switchable is an Injector that can be swapped at run time (nil = no faults).
type Switchable struct {
	mu  sync.RWMutex
	inj Injector
}

// Set replaces the current injector.
func (s *Switchable) Set(inj Injector) {
	s.mu.Lock()
	s.inj = inj
	s.mu.Unlock()
}

// Inject delegates to the current injector.
func (s *Switchable) Inject(op Op) *Fault {
	s.mu.RLock()
	inj := s.inj
	s.mu.RUnlock()
	if inj == nil {
		return nil
	}
	return inj.Inject(op)
}

// ErrorFS wraps an FS and consults an Injector before each operation. Its
// Files do not implement Mmapper even if the inner ones do, so that every
// write goes through the injector.
type ErrorFS struct {
	inner FS
	inj   Injector
}

// NewErrorFS wraps inner with inj.
func NewErrorFS(inner FS, inj Injector) FS {
	return &ErrorFS{inner: inner, inj: inj}
}

func (e *ErrorFS) fault(op Op) *Fault {
	if e.inj == nil {
		return nil
	}
	return e.inj.Inject(op)
}

func wrapFault(op Op, f *Fault) error {
	if op.Kind == OpRename {
		return &os.LinkError{Op: op.Kind.String(), Old: op.Path, New: op.NewPath, Err: f.Err}
	}
	return &os.PathError{Op: op.Kind.String(), Path: op.Path, Err: f.Err}
}

func (e *ErrorFS) check(op Op) error {
	if f := e.fault(op); f != nil {
		return wrapFault(op, f)
	}
	return nil
}

// OpenFile implements FS.
func (e *ErrorFS) OpenFile(name string, flag int, perm os.FileMode) (File, error) {
	kind := OpOpen
	if flag&(os.O_CREATE|os.O_TRUNC) != 0 {
		kind = OpCreate
	}
	if err := e.check(Op{Kind: kind, Path: name}); err != nil {
		return nil, err
	}
	f, err := e.inner.OpenFile(name, flag, perm)
	if err != nil {
		return nil, err
	}
	return &errorFile{fs: e, f: f}, nil
}

// Remove implements FS.
func (e *ErrorFS) Remove(name string) error {
	if err := e.check(Op{Kind: OpRemove, Path: name}); err != nil {
		return err
	}
	return e.inner.Remove(name)
}

// RemoveAll implements FS.
func (e *ErrorFS) RemoveAll(name string) error {
	if err := e.check(Op{Kind: OpRemoveAll, Path: name}); err != nil {
		return err
	}
	return e.inner.RemoveAll(name)
}

// Rename implements FS.
func (e *ErrorFS) Rename(oldname, newname string) error {
	if err := e.check(Op{Kind: OpRename, Path: oldname, NewPath: newname}); err != nil {
		return err
	}
	return e.inner.Rename(oldname, newname)
}

// MkdirAll implements FS.
func (e *ErrorFS) MkdirAll(name string, perm os.FileMode) error {
	if err := e.check(Op{Kind: OpMkdir, Path: name}); err != nil {
		return err
	}
	return e.inner.MkdirAll(name, perm)
}

// ReadDir implements FS.
func (e *ErrorFS) ReadDir(name string) ([]os.DirEntry, error) {
	if err := e.check(Op{Kind: OpStat, Path: name}); err != nil {
		return nil, err
	}
	return e.inner.ReadDir(name)
}

// Stat implements FS.
func (e *ErrorFS) Stat(name string) (os.FileInfo, error) {
	if err := e.check(Op{Kind: OpStat, Path: name}); err != nil {
		return nil, err
	}
	return e.inner.Stat(name)
}

// SyncDir implements FS.
func (e *ErrorFS) SyncDir(name string) error {
	if err := e.check(Op{Kind: OpSyncDir, Path: name}); err != nil {
		return err
	}
	return e.inner.SyncDir(name)
}

type errorFile struct {
	fs *ErrorFS
	f  File
}

func (f *errorFile) Name() string { return f.f.Name() }

func (f *errorFile) ReadAt(p []byte, off int64) (int, error) {
	if err := f.fs.check(Op{Kind: OpRead, Path: f.f.Name(), Len: len(p)}); err != nil {
		return 0, err
	}
	return f.f.ReadAt(p, off)
}

func (f *errorFile) write(kind OpKind, p []byte, do func([]byte) (int, error)) (int, error) {
	op := Op{Kind: kind, Path: f.f.Name(), Len: len(p)}
	flt := f.fs.fault(op)
	if flt == nil {
		return do(p)
	}
	n := 0
	if w := min(max(flt.Written, 0), len(p)); w > 0 {
		var err error
		if n, err = do(p[:w]); err != nil {
			return n, err
		}
	}
	return n, wrapFault(op, flt)
}

func (f *errorFile) Write(p []byte) (int, error) {
	return f.write(OpWrite, p, f.f.Write)
}

func (f *errorFile) WriteAt(p []byte, off int64) (int, error) {
	return f.write(OpWriteAt, p, func(b []byte) (int, error) { return f.f.WriteAt(b, off) })
}

func (f *errorFile) Sync() error {
	if err := f.fs.check(Op{Kind: OpSync, Path: f.f.Name()}); err != nil {
		return err
	}
	return f.f.Sync()
}

func (f *errorFile) Truncate(size int64) error {
	if err := f.fs.check(Op{Kind: OpTruncate, Path: f.f.Name()}); err != nil {
		return err
	}
	return f.f.Truncate(size)
}

func (f *errorFile) Size() (int64, error) {
	if err := f.fs.check(Op{Kind: OpStat, Path: f.f.Name()}); err != nil {
		return 0, err
	}
	return f.f.Size()
}

// Close always closes the inner file (a crashed process loses its
// descriptors too), so tests do not leak.
func (f *errorFile) Close() error { return f.f.Close() }
