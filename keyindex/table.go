package keyindex

import (
	"errors"
	"fmt"
	"hash/maphash"
	"os"
	"sync/atomic"
	"unsafe"

	"golang.org/x/sys/unix"
)

// slotBytes is one table slot: the key's 64-bit hash and a word holding the
// offset of its latest record and a tombstone bit.
const slotBytes = 16

// tombBit marks an offset word whose record is a tombstone (null value).
const tombBit = uint64(1) << 63

// minSlots is the smallest table; tables double when three quarters full.
const minSlots = 1024

// MinMemoryBytes is the least key.index.memory.bytes accepts: one table of
// minSlots in memory.
const MinMemoryBytes = minSlots * slotBytes

// Budget is the heap the key indexes of one mount may use together
// (key.index.memory.bytes), and the directory a table that does not fit
// spills to. A Budget is safe for concurrent use.
type Budget struct {
	limit int64
	used  atomic.Int64
	dir   string
	spill atomic.Int64 // bytes of tables in spill files
	seed  maphash.Seed // the key hash's seed: new each mount, so no one can
	// choose keys that collide
	builds chan struct{} // first builds running at once (buildsAtOnce)
}

// buildsAtOnce bounds the first builds that run together: a mount of many
// compacted partitions reads them a few at a time, not all at once.
const buildsAtOnce = 2

// NewBudget returns a budget of limit heap bytes whose tables spill to
// files in dir ("" spills nowhere: a table past the limit fails to grow).
func NewBudget(limit int64, dir string) *Budget {
	return &Budget{limit: limit, dir: dir, seed: maphash.MakeSeed(), builds: make(chan struct{}, buildsAtOnce)}
}

// Usage returns the heap and spill-file bytes the tables hold.
func (b *Budget) Usage() (heap, spilled int64) { return b.used.Load(), b.spill.Load() }

// reserve takes n heap bytes if the budget has them.
func (b *Budget) reserve(n int64) bool {
	for {
		u := b.used.Load()
		if u+n > b.limit {
			return false
		}
		if b.used.CompareAndSwap(u, u+n) {
			return true
		}
	}
}

// errSpill reports that a table could not be placed anywhere.
var errSpill = errors.New("keyindex: table does not fit key.index.memory.bytes and cannot spill")

// table is an open-addressing hash table with linear probing over slots of
// two words: hash (0: empty) and offset word. It is not safe for concurrent
// use; Index serialises access.
type table struct {
	w      []uint64 // 2 words a slot
	mask   uint64   // slots - 1
	n      int      // occupied slots
	live   int      // occupied slots that are not tombstones
	budget *Budget
	file   *os.File // the spill file, nil for a heap table
	mapped []byte   // the spill file's mapping
}

// newTable returns an empty table of slots slots (a power of two).
func newTable(b *Budget, slots int) (*table, error) {
	t := &table{mask: uint64(slots - 1), budget: b}
	size := int64(slots) * slotBytes
	if b.reserve(size) {
		t.w = make([]uint64, 2*slots)
		return t, nil
	}
	if b.dir == "" {
		return nil, errSpill
	}
	f, m, err := spillFile(b.dir, size)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", errSpill, err)
	}
	t.file, t.mapped = f, m
	t.w = unsafe.Slice((*uint64)(unsafe.Pointer(&m[0])), 2*slots)
	b.spill.Add(size)
	return t, nil
}

// spillFile returns a file of size bytes, all of its blocks allocated (so
// writing the mapping never finds the disk full, which would be SIGBUS),
// mapped read-write. The file has no name: it is gone when closed, and a
// crash leaves nothing behind.
func spillFile(dir string, size int64) (*os.File, []byte, error) {
	fd, err := unix.Open(dir, unix.O_TMPFILE|unix.O_RDWR|unix.O_CLOEXEC, 0o600)
	var f *os.File
	if err == nil {
		f = os.NewFile(uintptr(fd), dir+"/(key index)")
	} else {
		// No O_TMPFILE here: a named file, unlinked at once.
		f, err = os.CreateTemp(dir, ".topicfs-keyindex-*")
		if err != nil {
			return nil, nil, err
		}
		_ = os.Remove(f.Name())
	}
	if err := unix.Fallocate(int(f.Fd()), 0, 0, size); err != nil {
		f.Close()
		return nil, nil, fmt.Errorf("allocate %d bytes in %s: %w", size, dir, err)
	}
	m, err := unix.Mmap(int(f.Fd()), 0, int(size), unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	if err != nil {
		f.Close()
		return nil, nil, fmt.Errorf("map %d bytes of %s: %w", size, dir, err)
	}
	return f, m, nil
}

// free gives the table's memory or file back.
func (t *table) free() {
	if t == nil || t.w == nil {
		return
	}
	size := int64(len(t.w)) * 8
	if t.file != nil {
		_ = unix.Munmap(t.mapped)
		t.file.Close()
		t.budget.spill.Add(-size)
	} else {
		t.budget.used.Add(-size)
	}
	t.w, t.mapped, t.file = nil, nil, nil
}

func (t *table) slots() int { return len(t.w) / 2 }

// bytes is the table's size in memory or in its spill file.
func (t *table) bytes() int64 { return int64(len(t.w)) * 8 }

// find returns the slot of hash h, or the empty slot where it would go.
func (t *table) find(h uint64) (i uint64, found bool) {
	for i = h & t.mask; ; i = (i + 1) & t.mask {
		switch t.w[2*i] {
		case h:
			return i, true
		case 0:
			return i, false
		}
	}
}

// get returns the offset word of hash h.
func (t *table) get(h uint64) (uint64, bool) {
	i, ok := t.find(h)
	if !ok {
		return 0, false
	}
	return t.w[2*i+1], true
}

// put sets the offset word of hash h; the caller has made room (grow).
func (t *table) put(h, word uint64) {
	i, ok := t.find(h)
	if !ok {
		t.w[2*i] = h
		t.n++
	} else if t.w[2*i+1]&tombBit == 0 {
		t.live--
	}
	t.w[2*i+1] = word
	if word&tombBit == 0 {
		t.live++
	}
}

// remove deletes hash h (backward-shift deletion keeps probe runs whole).
func (t *table) remove(h uint64) {
	i, ok := t.find(h)
	if !ok {
		return
	}
	if t.w[2*i+1]&tombBit == 0 {
		t.live--
	}
	t.n--
	for j := (i + 1) & t.mask; t.w[2*j] != 0; j = (j + 1) & t.mask {
		home := t.w[2*j] & t.mask
		// Move j's entry into the hole at i unless its home lies in (i, j].
		if (j > i && (home <= i || home > j)) || (j < i && home <= i && home > j) {
			t.w[2*i], t.w[2*i+1] = t.w[2*j], t.w[2*j+1]
			i = j
		}
	}
	t.w[2*i], t.w[2*i+1] = 0, 0
}

// full reports whether one more entry would pass three quarters.
func (t *table) full() bool { return (t.n+1)*4 > t.slots()*3 }

// grown returns a table twice t's size holding t's entries, and frees t.
func (t *table) grown() (*table, error) {
	nt, err := newTable(t.budget, 2*t.slots())
	if err != nil {
		return nil, err
	}
	for i := 0; i < len(t.w); i += 2 {
		if h := t.w[i]; h != 0 {
			nt.put(h, t.w[i+1])
		}
	}
	t.free()
	return nt, nil
}

// dropBelow removes the entries whose offset is below off (records
// retention deleted), returning how many.
func (t *table) dropBelow(off int64) int {
	var gone []uint64
	t.each(func(h, word uint64) bool {
		if int64(word&^tombBit) < off {
			gone = append(gone, h)
		}
		return true
	})
	for _, h := range gone {
		t.remove(h)
	}
	return len(gone)
}

// each calls fn with every entry until fn returns false.
func (t *table) each(fn func(h, word uint64) bool) {
	for i := 0; i < len(t.w); i += 2 {
		if h := t.w[i]; h != 0 && !fn(h, t.w[i+1]) {
			return
		}
	}
}
