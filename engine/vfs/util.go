package vfs

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sync"
	"syscall"

	"golang.org/x/sys/unix"
)

// ReadFile reads the whole named file.
func ReadFile(fs FS, name string) ([]byte, error) {
	f, err := fs.OpenFile(name, os.O_RDONLY, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	size, err := f.Size()
	if err != nil {
		return nil, err
	}
	buf := make([]byte, size)
	n, err := f.ReadAt(buf, 0)
	if n < len(buf) {
		if err == nil || errors.Is(err, io.EOF) {
			err = io.ErrUnexpectedEOF
		}
		return nil, &os.PathError{Op: "read", Path: name, Err: err}
	}
	return buf, nil
}

// WriteFileAtomic replaces name with data so that a crash leaves the old
// file or the new one, never a torn one (see WriteAtomic).
func WriteFileAtomic(fs FS, name string, data []byte, perm os.FileMode) error {
	return WriteAtomic(fs, name, perm, func(w io.Writer) error {
		_, err := w.Write(data)
		return err
	})
}

// WriteAtomic replaces name with what write writes, so that a crash leaves
// the old file or the new one, never a torn one: write writes
// name+".tmp", which is fsynced, renamed over name, and the directory
// fsynced. On failure (write's error included) the temporary file is
// removed (best effort) and name is untouched.
func WriteAtomic(fs FS, name string, perm os.FileMode, write func(io.Writer) error) error {
	tmp := name + ".tmp"
	f, err := fs.OpenFile(tmp, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, perm)
	if err != nil {
		return err
	}
	cleanup := func(err error) error {
		_ = f.Close()
		_ = fs.Remove(tmp)
		return err
	}
	if err := write(f); err != nil {
		return cleanup(err)
	}
	if err := f.Sync(); err != nil {
		return cleanup(err)
	}
	if err := f.Close(); err != nil {
		_ = fs.Remove(tmp)
		return err
	}
	if err := fs.Rename(tmp, name); err != nil {
		_ = fs.Remove(tmp)
		return err
	}
	return fs.SyncDir(filepath.Dir(name))
}

// MkdirAllDurable creates dir and any missing parents so that a crash after
// it returns nil loses none of them: after MkdirAll it fsyncs each directory
// it created, deepest first, and then the parent of the outermost one. Going
// from the leaf up means a crash part way leaves the new chain unreachable
// (its top entry not yet durable) rather than reachable but incomplete, and
// each directory is synced before the entry naming it. A dir that already
// exists costs a Stat and MkdirAll, no fsync. A Stat error other than "does
// not exist" stops the walk and MkdirAll reports it.
func MkdirAllDurable(fs FS, dir string, perm os.FileMode) error {
	var created []string // deepest first
	for d := filepath.Clean(dir); ; d = filepath.Dir(d) {
		if _, err := fs.Stat(d); err == nil || !errors.Is(err, os.ErrNotExist) {
			break
		}
		created = append(created, d)
		if filepath.Dir(d) == d {
			break
		}
	}
	if err := fs.MkdirAll(dir, perm); err != nil {
		return err
	}
	if len(created) == 0 {
		return nil
	}
	if err := fs.SyncDir(created[0]); err != nil {
		return err
	}
	for _, d := range created {
		if err := fs.SyncDir(filepath.Dir(d)); err != nil {
			return err
		}
	}
	return nil
}

// ErrLocked reports a lock held by someone else. Errors from Lock wrap it.
var ErrLocked = errors.New("vfs: locked")

// Locker is implemented by file systems that can take an exclusive advisory
// lock on a file (OS: flock; MemFS: in-process). The file is created if
// missing; closing the returned Closer releases the lock.
type Locker interface {
	Lock(name string) (io.Closer, error)
}

// Lock takes an exclusive lock on name through fs, which must implement
// Locker (OS, MemFS and ErrorFS over either do).
func Lock(fs FS, name string) (io.Closer, error) {
	l, ok := fs.(Locker)
	if !ok {
		return nil, fmt.Errorf("vfs: %T cannot lock %s", fs, name)
	}
	return l.Lock(name)
}

// Lock takes a non-blocking flock(LOCK_EX) on name, creating it.
func (osFS) Lock(name string) (io.Closer, error) {
	f, err := os.OpenFile(name, os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return nil, err
	}
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
		_ = f.Close()
		if errors.Is(err, unix.EWOULDBLOCK) {
			return nil, fmt.Errorf("%w: %s: %w", ErrLocked, name, syscall.EWOULDBLOCK)
		}
		return nil, &os.PathError{Op: "flock", Path: name, Err: err}
	}
	return f, nil // closing the descriptor releases the flock
}

// Lock takes an in-process exclusive lock on name, creating the file. Locks
// are not part of the durable state: a Crash copy starts with none.
func (m *MemFS) Lock(name string) (io.Closer, error) {
	f, err := m.OpenFile(name, os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return nil, err
	}
	_ = f.Close()
	m.mu.Lock()
	defer m.mu.Unlock()
	n, err := m.lookup(name)
	if err != nil {
		return nil, pathErr("lock", name, err)
	}
	if m.locks == nil {
		m.locks = map[*memNode]bool{}
	}
	if m.locks[n] {
		return nil, fmt.Errorf("%w: %s: %w", ErrLocked, name, syscall.EWOULDBLOCK)
	}
	m.locks[n] = true
	return &memLock{m: m, n: n}, nil
}

type memLock struct {
	m    *MemFS
	n    *memNode
	once sync.Once
}

func (l *memLock) Close() error {
	l.once.Do(func() {
		l.m.mu.Lock()
		delete(l.m.locks, l.n)
		l.m.mu.Unlock()
	})
	return nil
}

// Lock delegates to the inner FS after asking the injector (as OpCreate).
func (e *ErrorFS) Lock(name string) (io.Closer, error) {
	if err := e.check(Op{Kind: OpCreate, Path: name}); err != nil {
		return nil, err
	}
	return Lock(e.inner, name)
}
