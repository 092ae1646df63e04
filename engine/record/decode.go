package record

import (
	"fmt"
	"slices"
	"unsafe"
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

// Record inside a v2 batch (docs/FORMATS.md §2.4), all integers zig-zag varints:
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
	data, scratch, err := b.recordData(scratch, alias)
	if err != nil || data == nil {
		return dst, scratch, err
	}
	count := int(b.RecordCount)
	start := len(dst)
	// Decode in place: no 88-byte Record copied per record.
	dst = slices.Grow(dst, count)[:start+count]
	if err := b.decodeAll(data, dst[start:], nil, nil); err != nil {
		clear(dst[start:])
		return dst[:start], scratch, err
	}
	return dst, scratch, nil
}

// decodeAll decodes data, the v2 batch's records section, record by record:
// into rs[i] when rs is not nil (Records, RecordsInto), else into *r with
// fn called for each (EachRecord; an error from fn is returned as is).
// decodeRun takes the common records, decodeRecordInto the others.
func (b *Batch) decodeAll(data []byte, rs []Record, r *Record, fn func(*Record) error) error {
	count := int(b.RecordCount)
	base := b.runBase()
	p, i := 0, 0
	for {
		var err error
		if p, i, err = decodeRun(data, p, i, count, &base, rs, r, fn); err != nil {
			return err
		}
		if i == count {
			break
		}
		rec := r
		if rs != nil {
			rec = &rs[i]
		}
		n, err := decodeRecordInto(rec, data[p:], rs == nil)
		if err != nil {
			return fmt.Errorf("%w: offset %d: record %d: %w", ErrCorrupt, b.BaseOffset, i, err)
		}
		p += n
		base.resolve(rec)
		if fn != nil {
			if err := fn(rec); err != nil {
				return err
			}
		}
		i++
	}
	if p != len(data) {
		return fmt.Errorf("%w: offset %d: %d bytes after %d records (incorrect declared batch size)",
			ErrCorrupt, b.BaseOffset, len(data)-p, count)
	}
	return nil
}

// recordData checks the v2 batch's sizes and returns its (decompressed)
// records section: b.Raw's body itself when alias is set and the codec is
// none, a copy when alias is not set, else the batch decompressed into
// scratch (alias) or a new buffer. data is nil (and err nil) when the batch
// holds no records.
func (b *Batch) recordData(scratch []byte, alias bool) (data, newScratch []byte, err error) {
	if len(b.Raw) < HeaderSize || len(b.Raw) != b.Size() {
		return nil, scratch, fmt.Errorf("%w: offset %d: batch of %d bytes, size %d", ErrCorrupt, b.BaseOffset, len(b.Raw), b.Size())
	}
	count := b.RecordCount
	if count < 0 {
		return nil, scratch, fmt.Errorf("%w: offset %d: record count %d", ErrCorrupt, b.BaseOffset, count)
	}
	if count == 0 {
		// Kafka returns no records for an empty batch without looking further.
		return nil, scratch, nil
	}
	body := b.Raw[HeaderSize:]
	if c := b.Codec(); c == None {
		if alias {
			data = body
		} else {
			data = append(make([]byte, 0, len(body)), body...)
		}
	} else {
		if !c.valid() {
			return nil, scratch, fmt.Errorf("%w: offset %d: codec id %d", ErrUnsupported, b.BaseOffset, int8(c))
		}
		var out []byte
		if alias {
			out = scratch
		}
		if data, err = decompressInto(out, c, body, 2); err != nil {
			return nil, scratch, fmt.Errorf("%w (batch at offset %d)", err, b.BaseOffset)
		}
		if alias {
			scratch = data
		}
	}
	if int64(count) > int64(len(data)/minRecordSize) {
		return nil, scratch, fmt.Errorf("%w: offset %d: %d records cannot fit in %d bytes", ErrCorrupt, b.BaseOffset, count, len(data))
	}
	return data, scratch, nil
}

// EachRecord calls fn with every record of the batch, in order, without
// building a []Record: it is RecordsInto for streaming readers. One Record is
// reused for every call, so fn must not keep the pointer, and the record's
// Key, Value, Headers and header values are valid only until fn returns
// (they alias b.Raw for codec none, else scratch; copy what must live
// longer). Compressed batches decompress into scratch (grown when too small;
// keep the returned one for the next call). Offsets and timestamps are
// absolute as with Records. Legacy (magic 0/1) entries are decoded as by
// Records (copied) and then passed to fn one by one.
//
// It does NOT verify the CRC (call Verify first). An error returned by fn
// stops the iteration and is returned as is. A malformed record returns an
// error wrapping ErrCorrupt; unlike Records, fn has then already been called
// with the records before it. With a warm scratch and no headers its only
// allocation is the one reused Record (per call, not per record).
func (b *Batch) EachRecord(scratch []byte, fn func(*Record) error) ([]byte, error) {
	if b.Magic < 2 {
		recs, err := b.legacyRecords(nil)
		if err != nil {
			return scratch, err
		}
		for i := range recs {
			if err := fn(&recs[i]); err != nil {
				return scratch, err
			}
		}
		return scratch, nil
	}
	data, scratch, err := b.recordData(scratch, true)
	if err != nil || data == nil {
		return scratch, err
	}
	var r Record // one for every record: fn gets its address
	return scratch, b.decodeAll(data, nil, &r, fn)
}

// errRecord describes a malformed record; Records wraps it with ErrCorrupt.
type errRecord string

func (e errRecord) Error() string { return string(e) }

// decodeRecordInto decodes one record from the start of data into *r,
// setting every field (Offset and Timestamp hold the raw deltas). It returns
// the bytes consumed. reuseHeaders lets it decode headers into r.Headers'
// backing array (EachRecord); otherwise a record with headers gets a new
// slice and one without gets nil. On error *r is unspecified.
//
// Hot path: varints (and the timestampDelta varlong) of one or two bytes
// are read by the inlined varint12, and positions are kept within
// rb = data[:end] so the compiler can drop most bounds checks.
//
// It is one function over 80 lines on purpose: it runs once per record
// decodeRun leaves (every record with headers), and its key and value
// reads split into a helper do not inline: two calls more per record for
// no gain (BenchmarkEachRecord/headers times this path).
func decodeRecordInto(r *Record, data []byte, reuseHeaders bool) (int, error) {
	length, p, ok := varint12(data, 0)
	if !ok {
		length, p = varintAt(data, 0)
	}
	if p < 0 {
		return 0, errRecord("bad length varint")
	}
	if length < minRecordSize-1 || int64(length) > int64(len(data)-p) {
		return 0, fmt.Errorf("record length %d with %d bytes left", length, len(data)-p)
	}
	end := p + int(length)
	rb := data[:end] // length varint .. end of headers
	p++              // skip attributes (length >= 6, so it is there)

	// A varlong of one or two bytes reads as a varint (varint12).
	ts12, p, ok := varint12(rb, p)
	tsDelta := int64(ts12)
	if !ok {
		tsDelta, p = varlongAt(rb, p)
	}
	if p < 0 {
		return 0, errRecord("bad timestampDelta varlong")
	}
	offDelta, p, ok := varint12(rb, p)
	if !ok {
		offDelta, p = varintAt(rb, p)
	}
	if p < 0 {
		return 0, errRecord("bad offsetDelta varint")
	}
	r.Offset = int64(offDelta)
	r.Timestamp = tsDelta

	kl, p, ok := varint12(rb, p)
	if !ok {
		kl, p = varintAt(rb, p)
	}
	if p < 0 {
		return 0, errRecord("bad key length varint")
	}
	if kl < 0 {
		r.Key = nil
	} else {
		if int(kl) > end-p {
			return 0, fmt.Errorf("key length %d with %d bytes left", kl, end-p)
		}
		q := p + int(kl)
		r.Key = rb[p:q:q]
		p = q
	}

	vl, p, ok := varint12(rb, p)
	if !ok {
		vl, p = varintAt(rb, p)
	}
	if p < 0 {
		return 0, errRecord("bad value length varint")
	}
	if vl < 0 {
		r.Value = nil
	} else {
		if int(vl) > end-p {
			return 0, fmt.Errorf("value length %d with %d bytes left", vl, end-p)
		}
		q := p + int(vl)
		r.Value = rb[p:q:q]
		p = q
	}

	var hc int32
	if p == end-1 && rb[p] == 0 {
		p = end // the common case: no headers, the count is the record's last byte
	} else if hc, p = varintAt(rb, p); p < 0 {
		return 0, errRecord("bad headersCount varint")
	}
	if hc == 0 {
		if reuseHeaders {
			r.Headers = r.Headers[:0]
		} else {
			r.Headers = nil
		}
	} else {
		var err error
		if p, err = decodeHeaders(r, rb, p, hc, reuseHeaders); err != nil {
			return 0, err
		}
	}
	if p != end {
		return 0, fmt.Errorf("record length %d but fields end at %d", length, p-(end-int(length)))
	}
	return end, nil
}

// windowSize is the window decodeRun reads a record's leading fields
// from: length, attributes, timestampDelta, offsetDelta and keyLength take
// at most 9 bytes there.
const windowSize = 16

// runBase is what decodeRun adds to a record's deltas: the batch's base
// offset and timestamp, and its MaxTimestamp when the batch has
// LogAppendTime (lat).
type runBase struct {
	off, ts, maxTs int64
	lat            bool
}

func (b *Batch) runBase() runBase {
	return runBase{off: b.BaseOffset, ts: b.BaseTimestamp, maxTs: b.MaxTimestamp, lat: b.LogAppendTime()}
}

// resolve makes r's deltas (as decodeRecordInto leaves them) absolute.
func (base *runBase) resolve(r *Record) {
	r.Offset += base.off
	r.Timestamp += base.ts
	if base.lat {
		r.Timestamp = base.maxTs
	}
}

// decodeRun is decodeAll's hot path: from record i at position s of the
// records section data it decodes one record after another as long as
// each is the common kind (every varint of one or two bytes, no headers,
// at least windowSize bytes left in data), with absolute Offset and
// Timestamp. With dst, record j goes to dst[j] (Headers nil); else every
// record goes to *r (Headers emptied) and fn is called with it; an error
// from fn is returned as is. It returns the position and index of the
// first record it did not decode (i == count when it decoded them all):
// decodeRecordInto then decodes that one or says what is wrong.
// It checks the same framing as decodeRecordInto: the fields, key and value
// end exactly at the record's last byte, its headersCount 0.
//
// One call decodes the whole run: no call per record, whose state would be
// spilled and reloaded each time (docs/PERFORMANCE.md, engine read). A
// record's leading fields are read from a fixed-size array view of
// data[s:s+windowSize]; reads past the record's end inside the window are
// harmless since the final checks reject such a record. The bytes after the
// window (the record's last byte, valueLength, the key and value) are
// reached with unsafe.Add from data's start, each after an explicit check
// that it lies before the record's end (which is within data), which spares
// Go's own bounds checks there and makes decoding cheaper
// (docs/PERFORMANCE.md, engine read).
// FuzzDecodeWindow and TestDecodeWindow hold it to decodeRecordInto, with the
// data placed just before an unreadable page so that a read past it faults.
//
// It is one function over 80 lines on purpose: its state stays in registers
// for the whole run, and its windowed varint reads stay unrolled, since a
// helper for them (inlined) made BenchmarkEachRecord slower
// (docs/PERFORMANCE.md §6.2, tried and dropped).
func decodeRun(data []byte, s, i, count int, base *runBase, dst []Record, r *Record, fn func(*Record) error) (int, int, error) {
	n := len(data)
	ptr := unsafe.Pointer(unsafe.SliceData(data))
	for ; i < count; i++ {
		if s < 0 || n-s < windowSize {
			break
		}
		w := (*[windowSize]byte)(unsafe.Add(ptr, s))
		u := uint32(w[0])
		q := 1
		if u >= 0x80 {
			c := uint32(w[1])
			if c >= 0x80 {
				break
			}
			u, q = u&0x7f|c<<7, 2
		}
		if u&1 != 0 { // a negative length
			break
		}
		length := int(u >> 1)
		end := s + q + length
		if length < minRecordSize-1 || end > n || *(*byte)(unsafe.Add(ptr, end-1)) != 0 {
			break
		}
		q++ // attributes
		bad := uint32(0)
		t := uint32(w[q&(windowSize-1)])
		q++
		if t >= 0x80 {
			c := uint32(w[q&(windowSize-1)])
			bad |= c
			t = t&0x7f | c<<7
			q++
		}
		o := uint32(w[q&(windowSize-1)])
		q++
		if o >= 0x80 {
			c := uint32(w[q&(windowSize-1)])
			bad |= c
			o = o&0x7f | c<<7
			q++
		}
		k := uint32(w[q&(windowSize-1)])
		q++
		if k >= 0x80 {
			c := uint32(w[q&(windowSize-1)])
			bad |= c
			k = k&0x7f | c<<7
			q++
		}
		if bad >= 0x80 {
			break
		}
		p := s + q
		if end-p < 2 { // valueLength and headersCount at least
			break
		}
		var key []byte
		if k&1 == 0 { // keyLength >= 0
			kl := int(k >> 1)
			if kl > end-p-2 {
				break
			}
			key = unsafe.Slice((*byte)(unsafe.Add(ptr, p)), kl)
			p += kl
		} else if k != 1 { // only -1 (null) is a valid negative length
			break
		}
		v := uint32(*(*byte)(unsafe.Add(ptr, p)))
		p++
		if v >= 0x80 {
			c := uint32(*(*byte)(unsafe.Add(ptr, p))) // p < end: headersCount follows
			if c >= 0x80 {
				break
			}
			v = v&0x7f | c<<7
			p++
		}
		var value []byte
		if v&1 == 0 {
			vl := int(v >> 1)
			if vl != end-1-p {
				break
			}
			value = unsafe.Slice((*byte)(unsafe.Add(ptr, p)), vl)
		} else if v != 1 || p != end-1 {
			break
		}
		s = end
		ts := base.ts + int64(int32(t>>1)^-int32(t&1))
		if base.lat {
			ts = base.maxTs
		}
		if dst != nil {
			dst[i] = Record{Offset: base.off + int64(int32(o>>1)^-int32(o&1)), Timestamp: ts, Key: key, Value: value}
			continue
		}
		r.Offset, r.Timestamp, r.Key, r.Value = base.off+int64(int32(o>>1)^-int32(o&1)), ts, key, value
		if len(r.Headers) != 0 { // left by a record with headers
			r.Headers = r.Headers[:0]
		}
		if err := fn(r); err != nil {
			return s, i, err
		}
	}
	return s, i, nil
}

// decodeHeaders decodes hc headers of the record rb at position p into
// r.Headers and returns the position after them.
func decodeHeaders(r *Record, rb []byte, p int, hc int32, reuse bool) (int, error) {
	if hc < 0 || int(hc) > len(rb)-p {
		return 0, fmt.Errorf("headersCount %d with %d bytes left", hc, len(rb)-p)
	}
	if reuse && cap(r.Headers) >= int(hc) {
		r.Headers = r.Headers[:hc]
	} else {
		r.Headers = make([]Header, hc)
	}
	var err error
	for i := range r.Headers {
		kl, m := readVarint(rb[p:])
		if m <= 0 {
			return 0, errRecord("bad header key length varint")
		}
		p += m
		if kl < 0 || int(kl) > len(rb)-p {
			return 0, fmt.Errorf("header key length %d with %d bytes left", kl, len(rb)-p)
		}
		r.Headers[i].Key = string(rb[p : p+int(kl)])
		p += int(kl)
		if r.Headers[i].Value, p, err = readVarBytes(rb, p, "header value"); err != nil {
			return 0, err
		}
	}
	return p, nil
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
