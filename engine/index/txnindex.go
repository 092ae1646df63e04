package index

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"sync"

	"github.com/topicfs/topicfs/engine/vfs"
)

// TxnEntrySize is the size of one transaction index entry. Part of the format.
const TxnEntrySize = 34

// txnVersion is the only entry version. Part of the format.
const txnVersion = 0

// AbortedTxn is one aborted transaction whose ABORT marker lies in the
// segment: LastOffset is the marker's offset, LastStableOffset the LSO when
// it was aborted.
type AbortedTxn struct{ ProducerID, FirstOffset, LastOffset, LastStableOffset int64 }

// Transaction index entry (34 bytes, big-endian), lastOffset strictly
// increasing:
//
//	+---------------+------------------+------------------+------------------+------------------------+
//	| Version int16 | ProducerID int64 | FirstOffset int64| LastOffset int64 | LastStableOffset int64 |
//	+---------------+------------------+------------------+------------------+------------------------+
//	  0
func encodeTxnEntry(dst []byte, t AbortedTxn) {
	binary.BigEndian.PutUint16(dst[0:2], txnVersion)
	binary.BigEndian.PutUint64(dst[2:10], uint64(t.ProducerID))
	binary.BigEndian.PutUint64(dst[10:18], uint64(t.FirstOffset))
	binary.BigEndian.PutUint64(dst[18:26], uint64(t.LastOffset))
	binary.BigEndian.PutUint64(dst[26:34], uint64(t.LastStableOffset))
}

func decodeTxnEntry(e []byte) (AbortedTxn, error) {
	// Kafka reads the version with a 1-byte get at offset 0 (the high byte).
	if v := int8(e[0]); v > txnVersion {
		return AbortedTxn{}, fmt.Errorf("unknown version %d", v)
	}
	return AbortedTxn{
		ProducerID:       int64(binary.BigEndian.Uint64(e[2:10])),
		FirstOffset:      int64(binary.BigEndian.Uint64(e[10:18])),
		LastOffset:       int64(binary.BigEndian.Uint64(e[18:26])),
		LastStableOffset: int64(binary.BigEndian.Uint64(e[26:34])),
	}, nil
}

// TxnIndex is a segment's .txnindex: the aborted transactions whose markers
// it holds. The file is created lazily by the first Append. Safe for
// concurrent use (one mutex).
type TxnIndex struct {
	fs   vfs.FS
	path string

	mu struct {
		sync.Mutex
		txns []AbortedTxn
		f    vfs.File // nil until the first write
		size int64    // bytes of whole entries in the file
	}
}

// OpenTxnIndex reads path; a missing file is an empty index. A trailing
// partial entry is ignored (and cut by the next write); an entry with an
// unknown version is an error wrapping ErrCorruptIndex.
func OpenTxnIndex(fsys vfs.FS, path string) (*TxnIndex, error) {
	x := &TxnIndex{fs: fsys, path: path}
	f, err := fsys.OpenFile(path, os.O_RDONLY, 0)
	if errors.Is(err, fs.ErrNotExist) {
		return x, nil
	}
	if err != nil {
		return nil, fmt.Errorf("index: open %s: %w", path, err)
	}
	defer f.Close()
	size, err := f.Size()
	if err != nil {
		return nil, fmt.Errorf("index: stat %s: %w", path, err)
	}
	n := size / TxnEntrySize
	buf := make([]byte, n*TxnEntrySize)
	if got, err := f.ReadAt(buf, 0); got < len(buf) {
		if err == nil || errors.Is(err, io.EOF) {
			err = io.ErrUnexpectedEOF
		}
		return nil, fmt.Errorf("index: read %s: %w", path, err)
	}
	for i := 0; i < int(n); i++ {
		t, err := decodeTxnEntry(buf[i*TxnEntrySize:])
		if err != nil {
			return nil, fmt.Errorf("%w: %s entry %d: %v", ErrCorruptIndex, path, i, err)
		}
		x.mu.txns = append(x.mu.txns, t)
	}
	x.mu.size = n * TxnEntrySize
	return x, nil
}

// Path returns the file name.
func (x *TxnIndex) Path() string { return x.path }

// All returns a copy of every entry, in file order.
func (x *TxnIndex) All() []AbortedTxn {
	x.mu.Lock()
	defer x.mu.Unlock()
	return append([]AbortedTxn(nil), x.mu.txns...)
}

// Collect returns the entries with LastOffset >= fetchOffset and
// FirstOffset < upperBound, and whether the search is complete (an entry's
// LastStableOffset reached upperBound), as Kafka's collectAbortedTxns does.
func (x *TxnIndex) Collect(fetchOffset, upperBound int64) (out []AbortedTxn, complete bool) {
	x.mu.Lock()
	defer x.mu.Unlock()
	for _, t := range x.mu.txns {
		if t.LastOffset >= fetchOffset && t.FirstOffset < upperBound {
			out = append(out, t)
		}
		if t.LastStableOffset >= upperBound {
			return out, true
		}
	}
	return out, false
}

// openForWrite opens (creating) the file; mu held.
func (x *TxnIndex) openForWrite() error {
	if x.mu.f != nil {
		return nil
	}
	f, err := x.fs.OpenFile(x.path, os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return fmt.Errorf("index: open %s: %w", x.path, err)
	}
	if sz, err := f.Size(); err != nil || sz != x.mu.size {
		if err == nil {
			err = f.Truncate(x.mu.size)
		}
		if err != nil {
			_ = f.Close()
			return fmt.Errorf("index: truncate %s: %w", x.path, err)
		}
	}
	x.mu.f = f
	return nil
}

// Append adds an aborted transaction; its LastOffset must be above the last
// entry's.
func (x *TxnIndex) Append(t AbortedTxn) error {
	x.mu.Lock()
	defer x.mu.Unlock()
	if n := len(x.mu.txns); n > 0 && t.LastOffset <= x.mu.txns[n-1].LastOffset {
		return fmt.Errorf("%w: %s: last offset %d not above %d", ErrInvalidAppend, x.path, t.LastOffset, x.mu.txns[n-1].LastOffset)
	}
	if err := x.openForWrite(); err != nil {
		return err
	}
	var e [TxnEntrySize]byte
	encodeTxnEntry(e[:], t)
	if _, err := x.mu.f.WriteAt(e[:], x.mu.size); err != nil {
		return fmt.Errorf("index: write %s: %w", x.path, err)
	}
	x.mu.size += TxnEntrySize
	x.mu.txns = append(x.mu.txns, t)
	return nil
}

// TruncateTo drops the entries with LastOffset >= offset.
func (x *TxnIndex) TruncateTo(offset int64) error {
	x.mu.Lock()
	defer x.mu.Unlock()
	keep := len(x.mu.txns)
	for keep > 0 && x.mu.txns[keep-1].LastOffset >= offset {
		keep--
	}
	if keep == len(x.mu.txns) {
		return nil
	}
	return x.cut(keep)
}

// Reset drops every entry (the file, if any, is cut to zero bytes).
func (x *TxnIndex) Reset() error {
	x.mu.Lock()
	defer x.mu.Unlock()
	if len(x.mu.txns) == 0 && x.mu.size == 0 {
		return nil
	}
	return x.cut(0)
}

// cut keeps the first keep entries; mu held.
func (x *TxnIndex) cut(keep int) error {
	if err := x.openForWrite(); err != nil {
		return err
	}
	if err := x.mu.f.Truncate(int64(keep) * TxnEntrySize); err != nil {
		return fmt.Errorf("index: truncate %s: %w", x.path, err)
	}
	x.mu.txns = x.mu.txns[:keep]
	x.mu.size = int64(keep) * TxnEntrySize
	return nil
}

// SanityCheck reports an entry whose LastOffset is below the segment's base.
func (x *TxnIndex) SanityCheck(base int64) error {
	x.mu.Lock()
	defer x.mu.Unlock()
	for i, t := range x.mu.txns {
		if t.LastOffset < base {
			return fmt.Errorf("%w: %s entry %d: last offset %d below base offset %d", ErrCorruptIndex, x.path, i, t.LastOffset, base)
		}
	}
	return nil
}

// Sync makes written entries durable (no-op if nothing was written).
func (x *TxnIndex) Sync() error {
	x.mu.Lock()
	defer x.mu.Unlock()
	if x.mu.f == nil {
		return nil
	}
	if err := x.mu.f.Sync(); err != nil {
		return fmt.Errorf("index: sync %s: %w", x.path, err)
	}
	return nil
}

// Close releases the file. The index stays readable (All, Collect).
func (x *TxnIndex) Close() error {
	x.mu.Lock()
	defer x.mu.Unlock()
	if x.mu.f == nil {
		return nil
	}
	err := x.mu.f.Close()
	x.mu.f = nil
	return err
}
