package record

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"math/bits"
	"sync"
)

// BatchSpec describes the header of a v2 batch for Encode. Fields documented
// "-1 none" must be set explicitly (NewBatchSpec does that); the zero value
// means 0, which is a valid producer id, epoch, sequence and leader epoch.
type BatchSpec struct {
	BaseOffset           int64
	Codec                Codec
	LogAppendTime        bool
	Transactional        bool
	Control              bool
	ProducerID           int64 // -1 none
	ProducerEpoch        int16 // -1 none
	BaseSequence         int32 // -1 none
	PartitionLeaderEpoch int32 // -1 none
	DeleteHorizonMs      int64 // -1 (any negative) none; else sets attribute bit 6, BaseTimestamp = horizon
	LastOffsetDelta      int32 // -1: derive from the last record's offset
}

// NewBatchSpec returns a BatchSpec for a non-idempotent, non-transactional,
// uncompressed CreateTime batch at baseOffset: every "none" field is -1.
func NewBatchSpec(baseOffset int64) BatchSpec {
	return BatchSpec{
		BaseOffset:           baseOffset,
		ProducerID:           -1,
		ProducerEpoch:        -1,
		BaseSequence:         -1,
		PartitionLeaderEpoch: -1,
		DeleteHorizonMs:      -1,
		LastOffsetDelta:      -1,
	}
}

// MaxRecordOverhead is the largest per-record overhead of a v2 record,
// excluding key, value and headers (DefaultRecord.MAX_RECORD_OVERHEAD).
const MaxRecordOverhead = 21

// RecordSizeUpperBound is an upper bound of the bytes r takes in an
// uncompressed v2 batch, whatever its offset and timestamp deltas.
func RecordSizeUpperBound(r *Record) int {
	n := MaxRecordOverhead + len(r.Key) + len(r.Value)
	for i := range r.Headers {
		n += 2*maxVarintLen + len(r.Headers[i].Key) + len(r.Headers[i].Value)
	}
	return n
}

// EncodedSizeUpperBound is an upper bound of the size of an uncompressed v2
// batch holding recs (HeaderSize + Σ RecordSizeUpperBound). A compressed
// batch of incompressible data can exceed it by the codec's framing (a few
// bytes per 32-64 KiB); check len of Encode's output when the limit is strict.
func EncodedSizeUpperBound(recs []Record) int {
	n := HeaderSize
	for i := range recs {
		n += RecordSizeUpperBound(&recs[i])
	}
	return n
}

// errEncode prefixes Encode's argument errors.
var errEncode = errors.New("record: cannot encode batch")

// Encode appends one v2 batch holding recs to dst and returns the extended
// slice. Each record's offsetDelta is rec.Offset - spec.BaseOffset (it must
// fit 0..MaxInt32), its timestampDelta is relative to the first record's
// timestamp, or to spec.DeleteHorizonMs when that is set (attribute bit 6).
// maxTimestamp is the largest record timestamp (for LogAppendTime the broker
// then calls SetLogAppendTime). With no records Encode writes Kafka's empty
// batch: codec none, baseTimestamp -1, maxTimestamp -1, no delete horizon.
// The records region is compressed as Kafka's Java client does (gzip RFC
// 1952, snappy xerial framing, lz4 frame FLG 0x60 BD 0x40, zstd frame).
// Encode does not retain recs; it may be called concurrently.
func Encode(dst []byte, spec BatchSpec, recs []Record) ([]byte, error) {
	if !spec.Codec.valid() {
		return dst, fmt.Errorf("%w: codec id %d", ErrUnsupported, int8(spec.Codec))
	}
	if len(recs) > math.MaxInt32 {
		return dst, fmt.Errorf("%w: %d records", errEncode, len(recs))
	}
	codec, horizon := spec.Codec, spec.DeleteHorizonMs >= 0
	baseTs, maxTs := int64(-1), int64(-1)
	if len(recs) == 0 {
		codec, horizon = None, false
	} else {
		baseTs = recs[0].Timestamp
		if horizon {
			baseTs = spec.DeleteHorizonMs
		}
		maxTs = recs[0].Timestamp
	}
	// Pass 1: validate and size. Each record's size is kept for pass 2.
	szp := sizesPool.Get().(*[]int32)
	defer putSizes(szp)
	sizes, bodySize, maxTs, err := sizeRecords((*szp)[:0], spec.BaseOffset, recs, baseTs, maxTs)
	if err != nil {
		return dst, err
	}
	*szp = sizes
	lastDelta, err := lastOffsetDelta(spec, recs)
	if err != nil {
		return dst, err
	}

	start := len(dst)
	if codec == None {
		dst = grow(dst, HeaderSize+bodySize)
	} else {
		dst = grow(dst, HeaderSize)
	}
	dst = dst[:start+HeaderSize]
	// Pass 2: write the records, directly or into a scratch buffer.
	if dst, err = appendRecords(dst, codec, spec.BaseOffset, baseTs, recs, sizes, bodySize); err != nil {
		return dst[:start], err
	}
	length := len(dst) - start - LogOverhead
	if length > math.MaxInt32 {
		return dst[:start], fmt.Errorf("%w: batch of %d bytes", errEncode, length)
	}

	h := dst[start : start+HeaderSize]
	spec.putHeader(h, spec.attributes(codec, horizon), length, lastDelta, baseTs, maxTs, len(recs))
	binary.BigEndian.PutUint32(h[offCRC:], checksumCastagnoli(dst[start+offAttributes:]))
	return dst, nil
}

// sizeRecords is Encode's first pass: it checks each record's offset
// delta from baseOffset, appends its recordBodySize to sizes, and returns
// sizes, the size of the records section uncompressed and the largest
// timestamp (maxTs or above).
func sizeRecords(sizes []int32, baseOffset int64, recs []Record, baseTs, maxTs int64) ([]int32, int, int64, error) {
	bodySize := 0
	for i := range recs {
		r := &recs[i]
		d := r.Offset - baseOffset
		if d < 0 || d > math.MaxInt32 {
			return sizes, 0, 0, fmt.Errorf("%w: record offset %d outside [%d, %d]", errEncode, r.Offset, baseOffset, baseOffset+math.MaxInt32)
		}
		if r.Timestamp > maxTs {
			maxTs = r.Timestamp
		}
		sz := recordBodySize(r, int32(d), r.Timestamp-baseTs)
		bodySize += varintSize(int32(sz)) + sz
		if sz > math.MaxInt32-HeaderSize || bodySize > math.MaxInt32-HeaderSize {
			return sizes, 0, 0, fmt.Errorf("%w: records of %d bytes", errEncode, bodySize)
		}
		sizes = append(sizes, int32(sz))
	}
	return sizes, bodySize, maxTs, nil
}

// lastOffsetDelta is the batch's lastOffsetDelta: spec.LastOffsetDelta when
// set (it may not be below the last record's delta), else the last
// record's delta (0 without records).
func lastOffsetDelta(spec BatchSpec, recs []Record) (int32, error) {
	lastDelta := spec.LastOffsetDelta
	if len(recs) > 0 {
		derived := int32(recs[len(recs)-1].Offset - spec.BaseOffset)
		if lastDelta < 0 {
			lastDelta = derived
		} else if lastDelta < derived {
			return 0, fmt.Errorf("%w: LastOffsetDelta %d below the last record's delta %d", errEncode, lastDelta, derived)
		}
	} else if lastDelta < 0 {
		lastDelta = 0
	}
	return lastDelta, nil
}

// appendRecords is Encode's second pass: it appends the records section of
// recs (sizes from sizeRecords, bodySize bytes uncompressed) to dst, written
// in place for codec None, else into a scratch buffer then compressed.
func appendRecords(dst []byte, codec Codec, baseOffset, baseTs int64, recs []Record, sizes []int32, bodySize int) ([]byte, error) {
	if codec == None {
		for i := range recs {
			dst = appendRecord(dst, &recs[i], baseOffset, baseTs, sizes[i])
		}
		return dst, nil
	}
	sp := getScratch(bodySize)
	body := (*sp)[:0]
	for i := range recs {
		body = appendRecord(body, &recs[i], baseOffset, baseTs, sizes[i])
	}
	dst, err := compress(dst, codec, body)
	*sp = body
	putScratch(sp)
	return dst, err
}

// recordBodySize is the size of a record after its length varint.
func recordBodySize(r *Record, offDelta int32, tsDelta int64) int {
	n := 1 + varlongSize(tsDelta) + varintSize(offDelta)
	n += bytesSize(r.Key) + bytesSize(r.Value)
	n += varintSize(int32(len(r.Headers)))
	for i := range r.Headers {
		h := &r.Headers[i]
		n += varintSize(int32(len(h.Key))) + len(h.Key) + bytesSize(h.Value)
	}
	return n
}

// bytesSize is the size of a varint-length-prefixed, nullable byte string.
func bytesSize(b []byte) int {
	if b == nil {
		return 1
	}
	return varintSize(int32(len(b))) + len(b)
}

// sizesPool holds Encode's per-record size slices.
var sizesPool = sync.Pool{New: func() any { s := make([]int32, 0, 1024); return &s }}

func putSizes(sp *[]int32) {
	if cap(*sp) <= 1<<20 {
		*sp = (*sp)[:0]
		sizesPool.Put(sp)
	}
}

// appendRecord appends r's v2 encoding (length varint first; the layout is
// drawn in decode.go and docs/FORMATS.md §2.4); size is its recordBodySize,
// computed once in Encode's first pass.
func appendRecord(b []byte, r *Record, baseOffset, baseTs int64, size int32) []byte {
	b = appendVarint(b, size)
	b = append(b, 0) // attributes
	b = appendVarlong(b, r.Timestamp-baseTs)
	b = appendVarint(b, int32(r.Offset-baseOffset))
	b = appendBytes(b, r.Key)
	b = appendBytes(b, r.Value)
	b = appendVarint(b, int32(len(r.Headers)))
	for i := range r.Headers {
		h := &r.Headers[i]
		b = appendVarint(b, int32(len(h.Key)))
		b = append(b, h.Key...)
		b = appendBytes(b, h.Value)
	}
	return b
}

// appendBytes appends a varint-length-prefixed byte string (nil = -1).
func appendBytes(b, v []byte) []byte {
	if v == nil {
		return append(b, 1) // zig-zag(-1)
	}
	b = appendVarint(b, int32(len(v)))
	return append(b, v...)
}

// grow makes room for n more bytes after len(b).
func grow(b []byte, n int) []byte {
	if cap(b)-len(b) >= n {
		return b
	}
	nb := make([]byte, len(b), len(b)+n+len(b)/4)
	copy(nb, b)
	return nb
}

// maxPooledScratch bounds the scratch buffers kept in scratchPool.
const maxPooledScratch = 4 << 20

var scratchPool = sync.Pool{New: func() any { b := make([]byte, 0, 64<<10); return &b }}

func getScratch(n int) *[]byte {
	sp := scratchPool.Get().(*[]byte)
	if cap(*sp) < n {
		*sp = make([]byte, 0, n)
	}
	return sp
}

func putScratch(sp *[]byte) {
	if cap(*sp) <= maxPooledScratch {
		*sp = (*sp)[:0]
		scratchPool.Put(sp)
	}
}

// ErrBatchTooLarge is returned by EncodeSequential when not even the first
// record fits the size limit on its own.
var ErrBatchTooLarge = errors.New("record: record does not fit the batch size limit")

// SequentialInfo describes the batch EncodeSequential wrote.
type SequentialInfo struct {
	Records      int   // records taken from the front of recs
	Size         int   // bytes of the batch, header included
	MaxTimestamp int64 // largest record timestamp (as written)
}

// crcStride is how many freshly written bytes EncodeSequential lets pile up
// before it folds them into the CRC: small enough that they are still in the
// L1 cache, large enough that the call overhead does not count.
const crcStride = 8 << 10

// EncodeSequential appends to dst one uncompressed v2 batch holding the
// longest prefix of recs that fits in maxBytes, and says how many records it
// took. It is Encode for records as a broker appends them: record i gets the
// offset spec.BaseOffset+i (recs[i].Offset is ignored, recs is not
// modified), and the timestamp nowMs when spec.LogAppendTime is set or
// recs[i].Timestamp is negative. The bytes are exactly Encode's for the same
// offsets and timestamps.
//
// It is the append hot path: one pass over recs sizes each record from its
// lengths and writes it once at its final place, straight from the caller's
// slices, folding each 8 KiB just written into the CRC while it is in cache;
// the header (count and max timestamp are known last) is checksummed at the
// end and its CRC combined with the body's (a body shorter than one stride
// is checksummed with the header in one pass instead). dst grows as needed (keep its
// capacity across calls to write in place). spec.Codec must be None and recs non-empty. If the first
// record alone does not fit in maxBytes nothing is written and the error
// wraps ErrBatchTooLarge.
//
// It is one function over 80 lines on purpose: the write position, the CRC
// mark and the running CRC stay in registers across the whole loop, and a
// record writer split out of it does not inline and makes
// BenchmarkEncodeSequential slower (docs/PERFORMANCE.md §6.1, tried and
// dropped).
func EncodeSequential(dst []byte, spec BatchSpec, recs []Record, nowMs int64, maxBytes int) ([]byte, SequentialInfo, error) {
	if spec.Codec != None {
		return dst, SequentialInfo{}, fmt.Errorf("%w: EncodeSequential writes uncompressed batches, not %v", errEncode, spec.Codec)
	}
	if len(recs) == 0 {
		return dst, SequentialInfo{}, fmt.Errorf("%w: no records", errEncode)
	}
	force, horizon := spec.LogAppendTime, spec.DeleteHorizonMs >= 0
	baseTs := recs[0].Timestamp
	if force || baseTs < 0 {
		baseTs = nowMs
	}
	if horizon {
		baseTs = spec.DeleteHorizonMs
	}
	// One pass: each record is sized just before it is written at its
	// final place (its struct is read once, while it is in cache). The
	// body's CRC is folded in strides while the bytes are hot; the header,
	// whose count and max timestamp are known only at the end, is checksummed
	// last and combined with the body's CRC (or, for a body under one
	// stride, checksummed together with it).
	orig, buf, start, body0, limit := beginSequential(dst, maxBytes)
	w, mark := body0, body0
	crc := uint32(0)
	maxTs := int64(math.MinInt64)
	n := 0
	for i := range min(len(recs), math.MaxInt32) {
		r := &recs[i]
		ts := r.Timestamp
		if force || ts < 0 {
			ts = nowMs
		}
		tsDelta := zigzag64(ts - baseTs)
		offDelta := uint64(zigzag32(int32(i)))
		if r.Key == nil && len(r.Headers) == 0 && r.Value != nil && len(r.Value) < 1<<12 && tsDelta < 1<<7 && offDelta < 1<<14 {
			// The common record, a value stamped about now: its sizes fit
			// one or two varint bytes each, written without loops.
			vz := uint64(len(r.Value)) << 1
			sz := 4 + varint14Len(offDelta) + varint14Len(vz) + len(r.Value)
			szz := uint64(sz) << 1 // < 1<<14
			tot := varint14Len(szz) + sz
			if w-body0+tot > limit {
				break
			}
			if w+tot > len(buf) {
				buf = grow(buf[:w], max(tot+16, w-start))
				buf = buf[:cap(buf)]
			}
			if w+16 <= len(buf) {
				b := buf[w : w+16 : w+16]
				k := putUvarint14(b, 0, szz)
				b[k&15] = 0 // attributes
				b[(k+1)&15] = byte(tsDelta)
				k = putUvarint14(b, k+2, offDelta)
				b[k&15] = 1 // null key
				w += putUvarint14(b, k+1, vz)
			} else {
				w = putUvarint(buf, w, szz)
				buf[w] = 0
				buf[w+1] = byte(tsDelta)
				w = putUvarint(buf, w+2, offDelta)
				buf[w] = 1
				w = putUvarint(buf, w+1, vz)
			}
			w += copy(buf[w:], r.Value)
			buf[w] = 0 // no headers
			w++
			maxTs = max(maxTs, ts)
			n++
			if w-mark >= crcStride {
				crc = updateCastagnoli(crc, buf[mark:w])
				mark = w
			}
			continue
		}
		sz := 1 + uvarintLen(tsDelta) + uvarintLen(offDelta)
		sz += nullableLen(r.Key) + nullableLen(r.Value)
		if len(r.Headers) == 0 {
			sz++
		} else {
			sz += varintSize(int32(len(r.Headers)))
			for j := range r.Headers {
				h := &r.Headers[j]
				sz += varintSize(int32(len(h.Key))) + len(h.Key) + bytesSize(h.Value)
			}
		}
		if sz < 0 || sz > limit {
			break
		}
		tot := uvarintLen(uint64(zigzag32(int32(sz)))) + sz
		if w-body0+tot > limit {
			break
		}
		if w+tot > len(buf) {
			buf = grow(buf[:w], max(tot, w-start))
			buf = buf[:cap(buf)]
		}
		w = putUvarint(buf, w, uint64(zigzag32(int32(sz))))
		buf[w] = 0 // attributes
		w = putUvarint(buf, w+1, tsDelta)
		w = putUvarint(buf, w, offDelta)
		w = putNullable(buf, w, r.Key)
		w = putNullable(buf, w, r.Value)
		if len(r.Headers) == 0 {
			buf[w] = 0
			w++
		} else {
			w = putUvarint(buf, w, uint64(zigzag32(int32(len(r.Headers)))))
			for j := range r.Headers {
				h := &r.Headers[j]
				w = putUvarint(buf, w, uint64(zigzag32(int32(len(h.Key)))))
				w += copy(buf[w:], h.Key)
				w = putNullable(buf, w, h.Value)
			}
		}
		maxTs = max(maxTs, ts)
		n++
		if w-mark >= crcStride {
			crc = updateCastagnoli(crc, buf[mark:w])
			mark = w
		}
	}
	if n == 0 {
		sz := recordBodySize(&recs[0], 0, 0)
		return orig, SequentialInfo{}, fmt.Errorf("%w: a %d-byte batch, limit %d", ErrBatchTooLarge,
			HeaderSize+varintSize(int32(min(sz, math.MaxInt32)))+sz, maxBytes)
	}
	return finishSequential(orig, buf, start, w, mark, crc, spec, horizon, n, baseTs, maxTs)
}

// beginSequential sets EncodeSequential or EncodeLines up to write a batch
// at the end of dst: orig is dst as passed in (returned on error), buf its
// whole capacity (room for the header at least), start where the batch
// begins, body0 where its records begin, limit the most bytes of records
// that fit in maxBytes.
func beginSequential(dst []byte, maxBytes int) (orig, buf []byte, start, body0, limit int) {
	limit = min(maxBytes, math.MaxInt32) - HeaderSize
	orig, start = dst, len(dst)
	body0 = start + HeaderSize
	if cap(dst)-len(dst) < HeaderSize {
		dst = grow(dst, HeaderSize+min(max(limit, 0), 4<<10))
	}
	return orig, dst[:cap(dst)], start, body0, limit
}

// finishSequential completes a batch written at buf[start:w] by
// EncodeSequential or EncodeLines (n records, the body's CRC folded up to
// mark): it writes the header and the CRC. orig is dst as passed in,
// returned on error.
func finishSequential(orig, buf []byte, start, w, mark int, crc uint32, spec BatchSpec, horizon bool, n int, baseTs, maxTs int64) ([]byte, SequentialInfo, error) {
	body0 := start + HeaderSize
	lastDelta := int32(n - 1)
	if spec.LastOffsetDelta >= 0 {
		if spec.LastOffsetDelta < lastDelta {
			return orig, SequentialInfo{}, fmt.Errorf("%w: LastOffsetDelta %d below the last record's delta %d", errEncode, spec.LastOffsetDelta, lastDelta)
		}
		lastDelta = spec.LastOffsetDelta
	}
	body := w - body0

	h := buf[start:body0]
	spec.putHeader(h, spec.attributes(None, horizon), HeaderSize+body-LogOverhead, lastDelta, baseTs, maxTs, n)
	if mark == body0 {
		// Nothing folded yet (a body under crcStride, still in cache): one
		// pass over header and body costs less than a combination, which
		// rebuilds a table (docs/PERFORMANCE.md, engine append).
		crc = checksumCastagnoli(buf[start+offAttributes : w])
	} else {
		crc = updateCastagnoli(crc, buf[mark:w])
		crc = crc32cCombine(checksumCastagnoli(h[offAttributes:]), crc, body)
	}
	binary.BigEndian.PutUint32(h[offCRC:], crc)
	return buf[:w], SequentialInfo{Records: n, Size: w - start, MaxTimestamp: maxTs}, nil
}

// CRC-32C combination: crc(A‖B) from crc(A), crc(B) and len(B), by
// multiplying crc(A) with x^(8·len(B)) modulo the (reflected) Castagnoli
// polynomial in GF(2).
const castagnoliPoly = 0x82f63b78

// x8nCastagnoli[k][d] is x^(8·d·16^k) modulo the polynomial: the shift of
// a CRC over d·16^k zero bytes.
var x8nCastagnoli = func() (t [8][16]uint32) {
	step := uint32(1) << 30 // x^1
	for range 3 {
		step = gf2MulCastagnoli(step, step) // x^8
	}
	for k := range t {
		t[k][0] = 1 << 31 // x^0
		for d := 1; d < 16; d++ {
			t[k][d] = gf2MulCastagnoli(t[k][d-1], step)
		}
		step = gf2MulCastagnoli(t[k][15], step) // x^(8·16^(k+1))
	}
	return t
}()

// gf2MulCastagnoli multiplies a and b modulo the polynomial (bit 31 is
// x^0, bit 0 is x^31), four bits of a at a time (Horner from a's highest
// powers: p = p·x^4 + a's next four bits times b).
func gf2MulCastagnoli(a, b uint32) uint32 {
	var bx [4]uint32 // b·x^0 .. b·x^3
	bx[0] = b
	for j := 1; j < 4; j++ {
		bx[j] = mulxCastagnoli(bx[j-1])
	}
	var t [16]uint32 // t[m]: bit j of m (x^(3-j) of the nibble) times b
	t[1], t[2], t[4], t[8] = bx[3], bx[2], bx[1], bx[0]
	for m := 3; m < 16; m++ {
		if low := m & -m; low != m {
			t[m] = t[low] ^ t[m^low]
		}
	}
	var p uint32
	for k := 0; k < 32; k += 4 {
		p = p>>4 ^ mulx4Castagnoli[p&15] ^ t[a>>k&15]
	}
	return p
}

// mulxCastagnoli multiplies v by x modulo the polynomial.
func mulxCastagnoli(v uint32) uint32 {
	if v&1 != 0 {
		return v>>1 ^ castagnoliPoly
	}
	return v >> 1
}

// mulx4Castagnoli[m] is m (bits x^28..x^31 only) times x^4 modulo the
// polynomial: what falls off the low end when a value is shifted by x^4.
var mulx4Castagnoli = func() (t [16]uint32) {
	for m := range t {
		v := uint32(m)
		for range 4 {
			v = mulxCastagnoli(v)
		}
		t[m] = v
	}
	return t
}()

// crc32cCombine is the CRC-32C of A‖B given crcA, crcB and len(B) (at
// most 4 GiB).
func crc32cCombine(crcA, crcB uint32, lenB int) uint32 {
	op := uint32(1) << 31 // x^0
	n := uint32(lenB)
	for k := 0; n != 0; k, n = k+1, n>>4 {
		if d := n & 15; d != 0 {
			op = gf2MulCastagnoli(x8nCastagnoli[k][d], op)
		}
	}
	return gf2MulCastagnoli(op, crcA) ^ crcB
}

func zigzag32(v int32) uint32 { return uint32(v<<1) ^ uint32(v>>31) }
func zigzag64(v int64) uint64 { return uint64(v<<1) ^ uint64(v>>63) }

// uvarintLen is the encoded length of an unsigned LEB128 varint.
func uvarintLen(u uint64) int {
	if u < 1<<7 {
		return 1
	}
	return (bits.Len64(u) + 6) / 7
}

// varint14Len is the length of u < 1<<14 as a varint: 1 or 2.
func varint14Len(u uint64) int {
	if u < 1<<7 {
		return 1
	}
	return 2
}

// putUvarint14 writes u < 1<<14 as a one- or two-byte varint at b[k:]
// (b is 16 bytes, k < 14) and returns the position after it.
func putUvarint14(b []byte, k int, u uint64) int {
	if u < 1<<7 {
		b[k&15] = byte(u)
		return k + 1
	}
	b[k&15] = byte(u) | 0x80
	b[(k+1)&15] = byte(u >> 7)
	return k + 2
}

// nullableLen is the encoded length of a varint-length-prefixed nullable
// byte string.
func nullableLen(b []byte) int {
	if b == nil {
		return 1
	}
	return uvarintLen(uint64(zigzag32(int32(len(b))))) + len(b)
}

// putUvarint writes u as an unsigned LEB128 varint at b[w:] and returns the
// position after it.
func putUvarint(b []byte, w int, u uint64) int {
	for u >= 0x80 {
		b[w] = byte(u) | 0x80
		u >>= 7
		w++
	}
	b[w] = byte(u)
	return w + 1
}

// putNullable writes a varint-length-prefixed nullable byte string at b[w:].
func putNullable(b []byte, w int, v []byte) int {
	if v == nil {
		b[w] = 1 // zig-zag(-1)
		return w + 1
	}
	w = putUvarint(b, w, uint64(zigzag32(int32(len(v)))))
	return w + copy(b[w:], v)
}

// attributes is the batch attributes field for spec with codec; horizon
// sets the delete-horizon bit.
func (spec BatchSpec) attributes(codec Codec, horizon bool) uint16 {
	attrs := uint16(codec)
	if spec.LogAppendTime {
		attrs |= attrLogAppendTime
	}
	if spec.Transactional {
		attrs |= attrTransactional
	}
	if spec.Control {
		attrs |= attrControl
	}
	if horizon {
		attrs |= attrDeleteHorizon
	}
	return attrs
}

// putHeader writes every field of the v2 batch header h but the CRC (the
// 61-byte layout is drawn above the field offsets in batch.go and in
// docs/FORMATS.md §2.2).
func (spec BatchSpec) putHeader(h []byte, attrs uint16, length int, lastDelta int32, baseTs, maxTs int64, count int) {
	be := binary.BigEndian
	be.PutUint64(h[offBaseOffset:], uint64(spec.BaseOffset))
	be.PutUint32(h[offLength:], uint32(length))
	be.PutUint32(h[offLeaderEpoch:], uint32(spec.PartitionLeaderEpoch))
	h[offMagic] = 2
	be.PutUint16(h[offAttributes:], attrs)
	be.PutUint32(h[offLastOffsetDelta:], uint32(lastDelta))
	be.PutUint64(h[offBaseTimestamp:], uint64(baseTs))
	be.PutUint64(h[offMaxTimestamp:], uint64(maxTs))
	be.PutUint64(h[offProducerID:], uint64(spec.ProducerID))
	be.PutUint16(h[offProducerEpoch:], uint16(spec.ProducerEpoch))
	be.PutUint32(h[offBaseSequence:], uint32(spec.BaseSequence))
	be.PutUint32(h[offRecordCount:], uint32(count))
}
