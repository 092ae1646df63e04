package record

import (
	"fmt"
	"slices"
)

// Header is a record header. Value nil means a null header value.
type Header struct {
	Key   string
	Value []byte
}

// Record is one decoded record with absolute offset and resolved timestamp.
type Record struct {
	Offset    int64  // absolute offset
	Timestamp int64  // ms since epoch; already resolved (LogAppendTime applied)
	Key       []byte // nil = null key; []byte{} = empty key
	Value     []byte // nil = null value (tombstone)
	Headers   []Header
}

// Record inside a v2 batch (kafka-formats.md §1.4), all integers zig-zag varints:
//
//	length varint | attributes int8 | timestampDelta varlong | offsetDelta varint |
//	keyLength varint (-1 null) | key | valueLength varint (-1 null) | value |
//	headersCount varint | headers: { keyLen varint (>= 0) | key | valLen varint (-1 null) | val }
//
// length counts the bytes after itself. A record is at least 7 bytes long
// (every field one byte, null key and value, no headers).
const minRecordSize = 7

// Records decodes (decompresses) every record of the batch, appending to dst.
// Offsets and timestamps are absolute; LogAppendTime overrides per-record
// timestamps with MaxTimestamp. Legacy wrappers are unnested (and BaseOffset
// and RecordCount of a legacy b are updated, see Batch). It does NOT verify
// the CRC (call Verify). It never panics, whatever Raw holds.
//
// The returned keys, values and header values never alias Raw (callers may
// reuse the read buffer); all records of one call share one backing array.
// dst grows geometrically, so collecting many batches into one slice is
// linear. On error dst is returned with its original length.
func (b *Batch) Records(dst []Record) ([]Record, error) {
	dst, _, err := b.records(dst, nil, false)
	return dst, err
}

// RecordsInto is Records for hot readers that reuse their buffers: it
// decompresses into scratch (grown when too small; the possibly new buffer is
// returned for the next call) and, for codec none, keys, values and header
// values alias b.Raw without any copy.
//
// Aliasing: the returned records' byte slices point into b.Raw (codec none,
// legacy entries excepted) or into the returned scratch (compressed batches).
// They are valid only until Raw's buffer or scratch is reused or modified;
// copy what must live longer. With enough capacity in dst and a warm
// scratch, a batch without headers decodes with no allocation. Legacy
// (magic 0/1) entries are decoded as by Records (copied). On error dst is
// returned with its original length (keep using the returned scratch).
func (b *Batch) RecordsInto(dst []Record, scratch []byte) ([]Record, []byte, error) {
	return b.records(dst, scratch, true)
}

func (b *Batch) records(dst []Record, scratch []byte, alias bool) ([]Record, []byte, error) {
	if b.Magic < 2 {
		dst, err := b.legacyRecords(dst)
		return dst, scratch, err
	}
	if len(b.Raw) < HeaderSize || len(b.Raw) != b.Size() {
		return dst, scratch, fmt.Errorf("%w: offset %d: batch of %d bytes, size %d", ErrCorrupt, b.BaseOffset, len(b.Raw), b.Size())
	}
	count := b.RecordCount
	if count < 0 {
		return dst, scratch, fmt.Errorf("%w: offset %d: record count %d", ErrCorrupt, b.BaseOffset, count)
	}
	if count == 0 {
		// Kafka returns no records for an empty batch without looking further.
		return dst, scratch, nil
	}
	body := b.Raw[HeaderSize:]
	var data []byte
	if c := b.Codec(); c == None {
		if alias {
			data = body
		} else {
			data = append(make([]byte, 0, len(body)), body...)
		}
	} else {
		if !c.valid() {
			return dst, scratch, fmt.Errorf("%w: offset %d: codec id %d", ErrUnsupported, b.BaseOffset, int8(c))
		}
		var out []byte
		if alias {
			out = scratch
		}
		var err error
		if data, err = decompressInto(out, c, body, 2); err != nil {
			return dst, scratch, fmt.Errorf("%w (batch at offset %d)", err, b.BaseOffset)
		}
		if alias {
			scratch = data
		}
	}
	if int64(count) > int64(len(data)/minRecordSize) {
		return dst, scratch, fmt.Errorf("%w: offset %d: %d records cannot fit in %d bytes", ErrCorrupt, b.BaseOffset, count, len(data))
	}
	start := len(dst)
	dst = slices.Grow(dst, int(count))
	var (
		lat    = b.LogAppendTime()
		baseTs = b.BaseTimestamp
		p      = 0
	)
	for i := int32(0); i < count; i++ {
		r, n, err := decodeRecord(data[p:])
		if err != nil {
			clear(dst[start:len(dst)])
			return dst[:start], scratch, fmt.Errorf("%w: offset %d: record %d: %w", ErrCorrupt, b.BaseOffset, i, err)
		}
		p += n
		r.Offset += b.BaseOffset
		if lat {
			r.Timestamp = b.MaxTimestamp
		} else {
			r.Timestamp += baseTs
		}
		dst = append(dst, r)
	}
	if p != len(data) {
		clear(dst[start:len(dst)])
		return dst[:start], scratch, fmt.Errorf("%w: offset %d: %d bytes after %d records (incorrect declared batch size)",
			ErrCorrupt, b.BaseOffset, len(data)-p, count)
	}
	return dst, scratch, nil
}

// errRecord describes a malformed record; Records wraps it with ErrCorrupt.
type errRecord string

func (e errRecord) Error() string { return string(e) }

// decodeRecord decodes one record from the start of data. Offset and
// Timestamp hold the raw deltas. It returns the bytes consumed.
func decodeRecord(data []byte) (Record, int, error) {
	length, n := readVarint(data)
	if n <= 0 {
		return Record{}, 0, errRecord("bad length varint")
	}
	if length < minRecordSize-1 || int64(length) > int64(len(data)-n) {
		return Record{}, 0, fmt.Errorf("record length %d with %d bytes left", length, len(data)-n)
	}
	end := n + int(length)
	rb := data[n:end] // attributes .. end of headers
	p := 1            // skip attributes
	tsDelta, m := readVarlong(rb[p:])
	if m <= 0 {
		return Record{}, 0, errRecord("bad timestampDelta varlong")
	}
	p += m
	offDelta, m := readVarint(rb[p:])
	if m <= 0 {
		return Record{}, 0, errRecord("bad offsetDelta varint")
	}
	p += m
	r := Record{Offset: int64(offDelta), Timestamp: tsDelta}
	var err error
	if r.Key, p, err = readVarBytes(rb, p, "key"); err != nil {
		return Record{}, 0, err
	}
	if r.Value, p, err = readVarBytes(rb, p, "value"); err != nil {
		return Record{}, 0, err
	}
	hc, m := readVarint(rb[p:])
	if m <= 0 {
		return Record{}, 0, errRecord("bad headersCount varint")
	}
	p += m
	if hc < 0 || int(hc) > len(rb)-p {
		return Record{}, 0, fmt.Errorf("headersCount %d with %d bytes left", hc, len(rb)-p)
	}
	if hc > 0 {
		r.Headers = make([]Header, hc)
		for i := range r.Headers {
			kl, m := readVarint(rb[p:])
			if m <= 0 {
				return Record{}, 0, errRecord("bad header key length varint")
			}
			p += m
			if kl < 0 || int(kl) > len(rb)-p {
				return Record{}, 0, fmt.Errorf("header key length %d with %d bytes left", kl, len(rb)-p)
			}
			r.Headers[i].Key = string(rb[p : p+int(kl)])
			p += int(kl)
			if r.Headers[i].Value, p, err = readVarBytes(rb, p, "header value"); err != nil {
				return Record{}, 0, err
			}
		}
	}
	if p != len(rb) {
		return Record{}, 0, fmt.Errorf("record length %d but fields end at %d", length, p)
	}
	return r, end, nil
}

// readVarBytes reads a varint-length-prefixed byte string at b[p:]; a
// negative length means null (as Kafka's DefaultRecord reads it).
func readVarBytes(b []byte, p int, what string) ([]byte, int, error) {
	l, m := readVarint(b[p:])
	if m <= 0 {
		return nil, p, fmt.Errorf("bad %s length varint", what)
	}
	p += m
	if l < 0 {
		return nil, p, nil
	}
	if int(l) > len(b)-p {
		return nil, p, fmt.Errorf("%s length %d with %d bytes left", what, l, len(b)-p)
	}
	return b[p : p+int(l) : p+int(l)], p + int(l), nil
}

// ControlType returns the control record type (0 ABORT, 1 COMMIT, 2
// LEADER_CHANGE, ...) of a control batch: the int16 at byte 2 of the first
// record's key. The key must be at least 4 bytes with a non-negative version.
func (b *Batch) ControlType() (int16, error) {
	if !b.IsControl() {
		return 0, fmt.Errorf("%w: offset %d: not a control batch", ErrCorrupt, b.BaseOffset)
	}
	var one [1]Record
	recs, err := b.Records(one[:0])
	if err != nil {
		return 0, err
	}
	if len(recs) == 0 {
		return 0, fmt.Errorf("%w: offset %d: control batch without records", ErrCorrupt, b.BaseOffset)
	}
	return controlKeyType(recs[0].Key)
}
