package record

import (
	"encoding/binary"
	"fmt"
)

// Control record types (ControlRecordType ids). Part of the format; never
// renumber.
const (
	ControlAbort          int16 = 0
	ControlCommit         int16 = 1
	ControlLeaderChange   int16 = 2
	ControlSnapshotHeader int16 = 3
	ControlSnapshotFooter int16 = 4
	ControlKRaftVersion   int16 = 5
	ControlKRaftVoters    int16 = 6
)

// Control record key and end-transaction-marker value (Kafka's
// ControlRecordType and EndTransactionMarker):
//
//	key:   version int16 (0) | type int16                 4 bytes
//	value: version int16 (0) | coordinatorEpoch int32     6 bytes (ABORT/COMMIT)

// ControlRecordKey returns the 4-byte key of a control record of type typ.
func ControlRecordKey(typ int16) []byte {
	k := make([]byte, 4)
	binary.BigEndian.PutUint16(k[2:], uint16(typ))
	return k
}

// ControlRecordValue returns the 6-byte value of an end-transaction marker
// (COMMIT or ABORT) for coordinatorEpoch.
func ControlRecordValue(coordinatorEpoch int32) []byte {
	v := make([]byte, 6)
	binary.BigEndian.PutUint32(v[2:], uint32(coordinatorEpoch))
	return v
}

// ParseEndTxnMarker decodes an end-transaction marker value and returns its
// coordinator epoch. It needs at least 6 bytes and a non-negative version.
func ParseEndTxnMarker(value []byte) (coordinatorEpoch int32, err error) {
	if len(value) < 6 {
		return 0, fmt.Errorf("%w: end txn marker value of %d bytes", ErrCorrupt, len(value))
	}
	if v := int16(binary.BigEndian.Uint16(value)); v < 0 {
		return 0, fmt.Errorf("%w: end txn marker version %d", ErrCorrupt, v)
	}
	return int32(binary.BigEndian.Uint32(value[2:])), nil
}

// controlKeyType reads the type of a control record key.
func controlKeyType(key []byte) (int16, error) {
	if len(key) < 4 {
		return 0, fmt.Errorf("%w: control record key of %d bytes", ErrCorrupt, len(key))
	}
	if v := int16(binary.BigEndian.Uint16(key)); v < 0 {
		return 0, fmt.Errorf("%w: control record key version %d", ErrCorrupt, v)
	}
	return int16(binary.BigEndian.Uint16(key[2:])), nil
}

// EncodeControlBatch appends a control batch holding one end-transaction
// marker (typ ControlCommit or ControlAbort) at offset with the given
// timestamp, as the broker writes it: attributes transactional + control,
// codec none, baseSequence -1; ProducerID, ProducerEpoch and
// PartitionLeaderEpoch come from spec (BaseOffset is set to offset; the
// Codec, Transactional, Control and LastOffsetDelta fields of spec are
// ignored).
func EncodeControlBatch(dst []byte, spec BatchSpec, offset, timestamp int64, typ int16, coordinatorEpoch int32) ([]byte, error) {
	spec.BaseOffset = offset
	spec.Codec = None
	spec.Transactional = true
	spec.Control = true
	spec.BaseSequence = -1
	spec.LastOffsetDelta = -1
	rec := [1]Record{{
		Offset:    offset,
		Timestamp: timestamp,
		Key:       ControlRecordKey(typ),
		Value:     ControlRecordValue(coordinatorEpoch),
	}}
	return Encode(dst, spec, rec[:])
}
