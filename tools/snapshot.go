package tools

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
)

// ErrCorruptSnapshot reports a producer snapshot with an unknown version, a
// bad CRC or a size that does not match its entry count.
var ErrCorruptSnapshot = errors.New("corrupt producer snapshot")

// Producer state snapshot (<offset>.snapshot, docs/FORMATS.md §7), big-endian:
//
//	+---------------+-----------+-------------+----------------------------+
//	| version int16 | crc u32   | count int32 | count × entry (46 bytes)   |
//	+---------------+-----------+-------------+----------------------------+
//	entry: producerId int64 | epoch int16 | lastSequence int32 | lastOffset int64 |
//	       offsetDelta int32 | timestamp int64 | coordinatorEpoch int32 |
//	       currentTxnFirstOffset int64 (-1 = none)
//
// The CRC is CRC-32C over everything from count (byte 6) to the end of file.
// The only version is 1. An empty snapshot is 10 bytes.
const (
	snapshotVersion    = 1
	snapshotHeaderSize = 10
	snapshotEntrySize  = 46
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// ProducerEntry is one producer of a snapshot.
type ProducerEntry struct {
	ProducerID            int64 `json:"producerId"`
	Epoch                 int16 `json:"producerEpoch"`
	LastSequence          int32 `json:"lastSequence"`
	LastOffset            int64 `json:"lastOffset"`
	OffsetDelta           int32 `json:"offsetDelta"`
	Timestamp             int64 `json:"timestamp"`
	CoordinatorEpoch      int32 `json:"coordinatorEpoch"`
	CurrentTxnFirstOffset int64 `json:"currentTxnFirstOffset"`
}

// FirstSequence is lastSequence - offsetDelta, wrapping below 0 to Int32 max
// as DefaultRecordBatch.decrementSequence does.
func (e ProducerEntry) FirstSequence() int32 {
	if e.LastSequence < e.OffsetDelta {
		return (1<<31 - 1) - (e.OffsetDelta - e.LastSequence) + 1
	}
	return e.LastSequence - e.OffsetDelta
}

// ParseProducerSnapshot decodes a producer snapshot file. Errors wrap
// ErrCorruptSnapshot and use the words of Kafka's CorruptSnapshotException.
func ParseProducerSnapshot(data []byte) ([]ProducerEntry, error) {
	if len(data) < snapshotHeaderSize {
		return nil, fmt.Errorf("%w: Snapshot of %d bytes is shorter than its %d-byte header", ErrCorruptSnapshot, len(data), snapshotHeaderSize)
	}
	be := binary.BigEndian
	if v := int16(be.Uint16(data)); v != snapshotVersion {
		return nil, fmt.Errorf("%w: Snapshot contained an unknown file version %d", ErrCorruptSnapshot, v)
	}
	stored := be.Uint32(data[2:])
	if computed := crc32.Checksum(data[6:], castagnoli); computed != stored {
		return nil, fmt.Errorf("%w: Snapshot is corrupt (CRC is no longer valid). Stored crc: %d. Computed crc: %d", ErrCorruptSnapshot, stored, computed)
	}
	count := int32(be.Uint32(data[6:]))
	body := data[snapshotHeaderSize:]
	if count < 0 || int64(count)*snapshotEntrySize != int64(len(body)) {
		return nil, fmt.Errorf("%w: %d entries in %d bytes", ErrCorruptSnapshot, count, len(body))
	}
	out := make([]ProducerEntry, count)
	for i := range out {
		e := body[i*snapshotEntrySize:]
		out[i] = ProducerEntry{
			ProducerID:            int64(be.Uint64(e)),
			Epoch:                 int16(be.Uint16(e[8:])),
			LastSequence:          int32(be.Uint32(e[10:])),
			LastOffset:            int64(be.Uint64(e[14:])),
			OffsetDelta:           int32(be.Uint32(e[22:])),
			Timestamp:             int64(be.Uint64(e[26:])),
			CoordinatorEpoch:      int32(be.Uint32(e[34:])),
			CurrentTxnFirstOffset: int64(be.Uint64(e[38:])),
		}
	}
	return out, nil
}
