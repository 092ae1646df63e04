// Point reads from a read-only mapping of a segment's .log: a warm read
// (its batch remembered, checked, anchored) finds its record without a
// system call.

package engine

import (
	"errors"
	"fmt"

	"github.com/topicfs/topicfs/engine/index"
	"github.com/topicfs/topicfs/engine/vfs"
)

// mapReserve is how much of the active segment's .log a mapping covers
// beyond what is committed when it is made: the segment grows into it
// (a read past the mapping is a pread). No memory is used until read.
const mapReserve = 1 << 30

// maxMapped bounds the segments mapped at once; past it the mapping of the
// memo used least recently goes.
const maxMapped = 256

// errMapFault is a fault while reading a mapping: the file is shorter than
// its committed size (cut behind the engine's back).
var errMapFault = errors.New("engine: fault reading a mapped .log")

// withMapped calls fn with bytes [off, end) of the segment's .log from the
// memo's read-only mapping, made at the first call, under the memo's read
// lock (a mapping goes only under its write lock). ok is false when there
// is no mapping or it does not cover end: read with pread instead. A fault
// while fn reads (the file cut short behind the engine's back) is returned
// as an error and the mapping is not used again.
func (m *batchMemo) withMapped(off, end int64, fn func([]byte) error) (ok bool, err error) {
	m.mu.RLock()
	if m.mapped == nil && !m.mapTried {
		m.mu.RUnlock()
		m.mapFile()
		m.mu.RLock()
	}
	data := m.mapped
	if data == nil || end > int64(len(data)) || off < 0 || off > end {
		m.mu.RUnlock()
		return false, nil
	}
	defer m.mu.RUnlock()
	return true, readMapped(data[off:end:end], fn)
}

// readMapped calls fn with b, a part of a mapping, turning a fault while it
// reads into errMapFault.
func readMapped(b []byte, fn func([]byte) error) (err error) {
	if !index.ReadGuarded(func() { err = fn(b) }) {
		return errMapFault
	}
	return err
}

// mapFile maps the segment's .log read-only, once; a file that cannot be
// mapped (not an OS file, no address space) is read with pread.
func (m *batchMemo) mapFile() {
	m.mu.Lock()
	if m.mapTried || m.closed {
		m.mu.Unlock()
		return
	}
	m.mapTried = true
	f, ok := m.seg.log.(vfs.ReadMmapper)
	if !ok {
		m.mu.Unlock()
		return
	}
	size := m.seg.Size()
	if !m.seg.Sealed() {
		size += mapReserve
	}
	if size <= 0 || size > 1<<40 {
		m.mu.Unlock()
		return
	}
	b, err := f.MmapReadOnly(int(size))
	if err != nil {
		m.mu.Unlock()
		m.seg.logger.Debug("engine: no mapping for point reads", "segment", m.seg.LogPath(), "err", err)
		return
	}
	m.mapped, m.unmap = b, f.Munmap
	m.mu.Unlock()
	countMapped(m)
}

// countMapped counts m's new mapping and unmaps the least recently used
// others past maxMapped.
func countMapped(m *batchMemo) {
	r := &memoRegistry
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.mapped == nil {
		r.mapped = map[*batchMemo]struct{}{}
	}
	r.mapped[m] = struct{}{}
	for len(r.mapped) > maxMapped {
		var v *batchMemo
		for x := range r.mapped {
			if x != m && (v == nil || x.lastUse.Load() < v.lastUse.Load()) {
				v = x
			}
		}
		if v == nil {
			return
		}
		delete(r.mapped, v)
		v.unmapLocked(false)
	}
}

// unmapLocked unmaps m's mapping (m.mu not held; the registry's is). Later
// reads map again unless closed.
func (m *batchMemo) unmapLocked(closed bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.mapped != nil {
		if err := m.unmap(m.mapped); err != nil {
			// (no LogPath: the segment's lock may be held, it is closing)
			m.seg.logger.Warn("engine: unmapping a .log", "base", m.seg.base, "err", err)
		}
		m.mapped = nil
	}
	m.mapTried = closed
}

// mapFault reports a fault while reading m's mapping and keeps reads off it.
func (m *batchMemo) mapFault(pos int64) error {
	r := &memoRegistry
	r.mu.Lock()
	delete(r.mapped, m)
	m.unmapLocked(true)
	r.mu.Unlock()
	return m.seg.corrupt(pos, fmt.Errorf("%w: %w", ErrCorrupt, errMapFault))
}
