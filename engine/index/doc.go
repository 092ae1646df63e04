// Package index implements Kafka's per-segment index files: the offset index
// (.index), the time index (.timeindex) and the transaction index
// (.txnindex), byte for byte as a broker writes them.
//
// Offset and time indexes are fixed-size sorted entries. A writable index is
// preallocated to floor(maxBytes/entrySize)*entrySize zero bytes and, on the
// real file system, memory-mapped; Trim (on seal) and Close shrink the file to
// entries*entrySize. On files that cannot be mapped (MemFS, ErrorFS) entries
// live in a heap buffer and every append is written through with WriteAt.
// A read-only index (a sealed segment's) is mapped read-only on the real
// file system, only the whole entries of the length it had at open, and
// the file closed; elsewhere it is read into the heap once. Reads of such a
// mapping (and of a writable one once Trim sealed it) are guarded: a file
// cut short under it makes them answer as an empty index and Faulted
// report it, instead of a SIGBUS. Mapped counts the live mappings.
//
// Opening trusts no terminator: like Kafka's DumpLogSegments it stops at the
// first entry after entry 0 whose offset equals the base offset (the zero
// tail of a preallocated file left by a crash; an all-zero entry 0 means an
// empty file), and also at the first entry that breaks the sort order or
// lies below the base offset (reported by SanityCheck). So the entries an
// index holds are always sorted and lookups are monotone.
//
//	x, err := index.OpenOffsetIndex(vfs.OS, dir+"/00000000000000000000.index", 0, 10<<20, true)
//	...
//	_ = x.Append(lastOffsetOfBatch, batchStartPos)
//	off, pos := x.Lookup(target) // then scan batches from pos
//
// Concurrency: one writer (Append, MaybeAppend, Sync) and any number of
// concurrent readers (Lookup, Entry, Entries, LastEntry). The entry count is
// published atomically after the entry's bytes are written, so readers see a
// consistent prefix. TruncateTo, Reset, Trim and Close need exclusive access:
// no concurrent readers or writers.
//
// Owns: the .index, .timeindex and .txnindex formats. Imports: only the
// standard library, golang.org/x/sys/unix and engine/vfs. Must not import
// the rest of engine, fusefs, go-fuse or policies (internal/archtest).
package index

import "errors"

// Sentinel errors; test with errors.Is.
var (
	// ErrCorruptIndex reports an index whose contents fail a sanity check.
	ErrCorruptIndex = errors.New("index: corrupt index")
	// ErrFull reports an append to an index that has no free slot.
	ErrFull = errors.New("index: index full")
	// ErrInvalidAppend reports an append that would break the index's order
	// or whose offset or position does not fit the entry.
	ErrInvalidAppend = errors.New("index: invalid append")
	// ErrReadOnly reports a write to an index opened read-only.
	ErrReadOnly = errors.New("index: read-only")
	// ErrClosed reports use of a closed index.
	ErrClosed = errors.New("index: closed")
)
