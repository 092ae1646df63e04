package record

import "fmt"

// Reading single records of an uncompressed v2 batch without decoding the
// others (point reads): RecordFrame walks the records' framing, and
// DecodeRecord decodes the one wanted. Neither checks the CRC: the caller
// reads only bytes of batches that passed Verify.

// RecordFrame reads the framing of the record at data[p:], a position in
// an uncompressed v2 records section: its offset delta and the position
// where it ends (the next record's start). The record must lie whole
// within data; a length or varint that does not parse, or a record that
// runs past the end of data, wraps ErrCorrupt.
func RecordFrame(data []byte, p int) (offsetDelta int32, end int, err error) {
	if p < 0 || p >= len(data) {
		return 0, 0, fmt.Errorf("%w: record at %d of %d bytes", ErrCorrupt, p, len(data))
	}
	length, n := readVarint(data[p:])
	if n <= 0 {
		return 0, 0, fmt.Errorf("%w: bad record length varint at %d", ErrCorrupt, p)
	}
	q := p + n
	if length < minRecordSize-1 || int64(length) > int64(len(data)-q) {
		return 0, 0, fmt.Errorf("%w: record length %d at %d with %d bytes left", ErrCorrupt, length, p, len(data)-q)
	}
	end = q + int(length)
	rb := data[:end]
	q++ // attributes (length >= 6: it is there)
	if _, n = readVarlong(rb[q:]); n <= 0 {
		return 0, 0, fmt.Errorf("%w: bad timestampDelta varlong at %d", ErrCorrupt, q)
	}
	q += n
	if offsetDelta, n = readVarint(rb[q:]); n <= 0 {
		return 0, 0, fmt.Errorf("%w: bad offsetDelta varint at %d", ErrCorrupt, q)
	}
	return offsetDelta, end, nil
}

// DecodeRecord decodes the record at data[p:], a position in b's
// uncompressed v2 records section, into *r with absolute offset and
// timestamp (b needs its header fields only; Raw may be nil). Key, value
// and header values alias data. It returns the position after the record;
// a malformed record wraps ErrCorrupt.
func (b *Batch) DecodeRecord(data []byte, p int, r *Record) (int, error) {
	if p < 0 || p >= len(data) {
		return 0, fmt.Errorf("%w: offset %d: record at %d of %d bytes", ErrCorrupt, b.BaseOffset, p, len(data))
	}
	n, err := decodeRecordInto(r, data[p:], false)
	if err != nil {
		return 0, fmt.Errorf("%w: offset %d: %w", ErrCorrupt, b.BaseOffset, err)
	}
	base := b.runBase()
	base.resolve(r)
	return p + n, nil
}
