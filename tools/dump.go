package tools

import (
	"bufio"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/topicfs/topicfs/engine"
	"github.com/topicfs/topicfs/engine/record"
	"github.com/topicfs/topicfs/engine/vfs"
)

// DumpOptions mirror kafka-dump-log.sh's flags. The zero value prints batch
// lines only, like Kafka without options.
type DumpOptions struct {
	// PrintData (--print-data-log) prints every record with its key and
	// payload, decoded as UTF-8 (malformed bytes become U+FFFD, as Java's
	// StringDecoder does). It implies DeepIteration.
	PrintData bool
	// DeepIteration (--deep-iteration) prints a line per record without the
	// key and payload.
	DeepIteration bool
	// SkipRecordMetadata (--skip-record-metadata) leaves the offset,
	// timestamp, sizes and sequence out of record lines.
	SkipRecordMetadata bool
	// VerifyIndexOnly (--verify-index-only) checks index entries against the
	// log without printing them.
	VerifyIndexOnly bool
	// IndexSanityCheck (--index-sanity-check) only runs Kafka's sanity check
	// on .index and .timeindex files.
	IndexSanityCheck bool
	// JSON prints one JSON object per line instead of Kafka's text: one per
	// file ("file"), batch, record, index entry, producer and aborted
	// transaction, so scripts need not parse the text.
	JSON bool
	// FS is the file system to read; nil means vfs.OS.
	FS vfs.FS
}

func (o DumpOptions) deep() bool { return o.PrintData || o.DeepIteration }

// Dump prints each file the way Kafka's DumpLogSegments does, dispatching on
// the suffix: .log (and KRaft .checkpoint snapshots), .index, .timeindex,
// .snapshot (producer state) and .txnindex; anything else is reported on errw
// as "Ignoring unknown file <path>". Each error is printed on errw once, as
// "topicfs dump: ...", when it happens; the caller should not print the
// returned error again. Index mismatches, time-index errors and
// non-consecutive offsets are summarised on errw after all files, in Kafka's
// words. Dump never writes to the files.
//
// The error is non-nil when a file could not be read or held data Kafka's
// tool would fail on (a corrupt entry, a bad producer snapshot); trailing
// partial batches are only reported, as Kafka does.
func Dump(w io.Writer, errw io.Writer, files []string, opts DumpOptions) error {
	d := &dumper{
		out:  bufio.NewWriterSize(w, 64<<10),
		errw: errw,
		opts: opts,
		fs:   opts.FS,
	}
	if d.fs == nil {
		d.fs = vfs.OS
	}
	for _, f := range files {
		d.file(f)
	}
	flushErr := d.out.Flush()
	d.summaries()
	if flushErr != nil {
		d.errs = append(d.errs, flushErr)
	}
	return errors.Join(d.errs...)
}

type dumper struct {
	out  *bufio.Writer
	errw io.Writer
	opts DumpOptions
	fs   vfs.FS
	errs []error

	// Summaries printed on errw after all files, keyed by absolute path in
	// the order first seen.
	indexMismatches issues // "Mismatches in :<path>"
	timeMismatch    issues
	timeOutOfOrder  issues
	timeNotFound    issues
	nonConsecutive  issues
}

// issues is an insertion-ordered map from a file to pairs of numbers.
type issues struct {
	order []string
	pairs map[string][][2]int64
}

func (is *issues) add(file string, a, b int64) {
	if is.pairs == nil {
		is.pairs = make(map[string][][2]int64)
	}
	if _, ok := is.pairs[file]; !ok {
		is.order = append(is.order, file)
	}
	is.pairs[file] = append(is.pairs[file], [2]int64{a, b})
}

// fail records an error and prints it on errw at once, in order with the
// output, as "topicfs <error>" (the returned error is not printed again).
func (d *dumper) fail(format string, args ...any) {
	err := fmt.Errorf(format, args...)
	d.errs = append(d.errs, err)
	_ = d.out.Flush()
	fmt.Fprintln(d.errw, "topicfs "+err.Error())
}

func (d *dumper) printf(format string, args ...any) { fmt.Fprintf(d.out, format, args...) }

func (d *dumper) json(v any) {
	b, err := json.Marshal(v)
	if err != nil {
		d.fail("dump: %w", err)
		return
	}
	d.out.Write(b)
	d.out.WriteByte('\n')
}

func absPath(p string) string {
	if a, err := filepath.Abs(p); err == nil {
		return a
	}
	return p
}

// fileBase returns the base offset a segment file's name starts with, as
// the engine reads it (engine.ParseSegmentName).
func fileBase(path string) (int64, error) {
	name := filepath.Base(path)
	base, _, ok := engine.ParseSegmentName(name)
	if !ok {
		return 0, fmt.Errorf("%q does not start with <offset>.", name)
	}
	return base, nil
}

// sibling returns the file next to path with the same base and another suffix.
func sibling(path, suffix string) string {
	dir, name := filepath.Split(path)
	if i := strings.IndexByte(name, '.'); i >= 0 {
		name = name[:i]
	}
	return filepath.Join(dir, name+suffix)
}

func (d *dumper) file(path string) {
	if d.opts.JSON {
		d.json(struct {
			Type string `json:"type"`
			Path string `json:"path"`
		}{"file", path})
	} else {
		d.printf("Dumping %s\n", path)
	}
	// A missing file (or a directory) is one plain error, whatever its name.
	if fi, err := d.fs.Stat(path); err != nil {
		var pe *os.PathError
		if errors.As(err, &pe) {
			err = pe.Err
		}
		d.fail("dump: %s: %w", path, err)
		return
	} else if fi.IsDir() {
		d.fail("dump: %s: is a directory (name a segment, index or snapshot file)", path)
		return
	}
	name := filepath.Base(path)
	suffix := ""
	if i := strings.LastIndexByte(name, '.'); i >= 0 {
		suffix = name[i:]
	}
	switch suffix {
	case ".log", ".checkpoint":
		d.dumpLog(path)
	case ".index":
		d.dumpIndex(path)
	case ".timeindex":
		d.dumpTimeIndex(path)
	case ".snapshot":
		d.dumpSnapshot(path)
	case ".txnindex":
		d.dumpTxnIndex(path)
	default:
		_ = d.out.Flush()
		fmt.Fprintf(d.errw, "Ignoring unknown file %s\n", path)
	}
}

// open opens path read-only and returns it with its size.
func (d *dumper) open(path string) (vfs.File, int64, bool) {
	f, err := d.fs.OpenFile(path, os.O_RDONLY, 0)
	if err != nil {
		d.fail("dump: %w", err)
		return nil, 0, false
	}
	size, err := f.Size()
	if err != nil {
		_ = f.Close()
		d.fail("dump: %s: %w", path, err)
		return nil, 0, false
	}
	return f, size, true
}

// timestampType is Kafka's TimestampType name for a batch.
func timestampType(b *record.Batch) string {
	switch {
	case b.Magic == 0:
		return "NoTimestampType"
	case b.LogAppendTime():
		return "LogAppendTime"
	}
	return "CreateTime"
}

// incrementSequence adds delta to a producer sequence, wrapping past
// Int32 max to 0 as DefaultRecordBatch.incrementSequence does.
func incrementSequence(seq, delta int32) int32 {
	if seq > (1<<31-1)-delta {
		return delta - ((1<<31 - 1) - seq) - 1
	}
	return seq + delta
}

func lastSequence(b *record.Batch) int32 {
	if b.BaseSequence < 0 {
		return -1
	}
	return incrementSequence(b.BaseSequence, b.LastOffsetDelta)
}

func optionalLong(v int64, set bool) string {
	if !set {
		return "OptionalLong.empty"
	}
	return fmt.Sprintf("OptionalLong[%d]", v)
}

// javaString decodes b as UTF-8 the way Java's new String(bytes, UTF_8)
// does: each maximal ill-formed subsequence (a lead byte and the
// continuation bytes that could still have completed it, or any other single
// bad byte) becomes one U+FFFD, per the Unicode "maximal subpart" practice
// Java's decoder follows.
func javaString(b []byte) string {
	if utf8.Valid(b) {
		return string(b)
	}
	var sb strings.Builder
	sb.Grow(len(b) + 8)
	for len(b) > 0 {
		r, n := utf8.DecodeRune(b)
		if r != utf8.RuneError || n > 1 {
			sb.WriteRune(r)
			b = b[n:]
			continue
		}
		sb.WriteRune(utf8.RuneError)
		b = b[maximalSubpart(b):]
	}
	return sb.String()
}

// maximalSubpart returns how many bytes at the start of b (which does not
// start with a valid UTF-8 sequence) form one maximal ill-formed subpart.
func maximalSubpart(b []byte) int {
	lead := b[0]
	var need int
	lo, hi := byte(0x80), byte(0xBF) // allowed range of the second byte
	switch {
	case lead >= 0xC2 && lead <= 0xDF:
		need = 1
	case lead == 0xE0:
		need, lo = 2, 0xA0
	case lead >= 0xE1 && lead <= 0xEC, lead == 0xEE, lead == 0xEF:
		need = 2
	case lead == 0xED:
		need, hi = 2, 0x9F
	case lead == 0xF0:
		need, lo = 3, 0x90
	case lead >= 0xF1 && lead <= 0xF3:
		need = 3
	case lead == 0xF4:
		need, hi = 3, 0x8F
	default:
		return 1
	}
	n := 1
	for i := 0; i < need && n < len(b); i++ {
		c := b[n]
		if i == 0 && (c < lo || c > hi) || i > 0 && (c < 0x80 || c > 0xBF) {
			break
		}
		n++
	}
	return n
}

type batchJSON struct {
	Type                 string `json:"type"`
	BaseOffset           int64  `json:"baseOffset"`
	LastOffset           int64  `json:"lastOffset"`
	Count                *int32 `json:"count,omitempty"`
	BaseSequence         int32  `json:"baseSequence"`
	LastSequence         int32  `json:"lastSequence"`
	ProducerID           int64  `json:"producerId"`
	ProducerEpoch        int16  `json:"producerEpoch"`
	PartitionLeaderEpoch int32  `json:"partitionLeaderEpoch"`
	IsTransactional      bool   `json:"isTransactional"`
	IsControl            bool   `json:"isControl"`
	DeleteHorizonMs      *int64 `json:"deleteHorizonMs"`
	Position             int64  `json:"position"`
	TimestampType        string `json:"timestampType"`
	MaxTimestamp         int64  `json:"maxTimestamp"`
	Size                 int    `json:"size"`
	Magic                int8   `json:"magic"`
	CompressCodec        string `json:"compresscodec"`
	CRC                  uint32 `json:"crc"`
	IsValid              bool   `json:"isvalid"`
}

type recordJSON struct {
	Type             string   `json:"type"`
	Offset           int64    `json:"offset"`
	TimestampType    string   `json:"timestampType"`
	Timestamp        int64    `json:"timestamp"`
	KeySize          int      `json:"keySize"`
	ValueSize        int      `json:"valueSize"`
	Sequence         *int32   `json:"sequence,omitempty"`
	HeaderKeys       []string `json:"headerKeys,omitempty"`
	IsValid          *bool    `json:"isValid,omitempty"`
	CRC              *uint32  `json:"crc,omitempty"`
	ControlType      string   `json:"controlType,omitempty"`
	CoordinatorEpoch *int32   `json:"coordinatorEpoch,omitempty"`
	Control          any      `json:"control,omitempty"`
	Key              *string  `json:"key,omitempty"`
	KeyBase64        *string  `json:"keyBase64,omitempty"`
	Payload          *string  `json:"payload,omitempty"`
	PayloadBase64    *string  `json:"payloadBase64,omitempty"`
}

// partialBatch reports whether the bytes at pos, which run past size, can be
// a batch cut short by a crash (reported only, as Kafka does): fewer bytes
// than a header up to its magic byte, or a header record.PeekHeader accepts
// (a known magic at byte 16 and a length that fits it).
func partialBatch(f io.ReaderAt, pos, size int64) bool {
	const upToMagic = 17
	if size-pos < upToMagic {
		return true
	}
	var hdr [upToMagic]byte
	if _, err := f.ReadAt(hdr[:], pos); err != nil {
		return false
	}
	_, err := record.PeekHeader(hdr[:], math.MaxInt64)
	return err == nil
}

// dumpLog prints a .log file (or a KRaft .checkpoint snapshot): one line per
// batch and, with deep iteration, one per record.
func (d *dumper) dumpLog(path string) {
	if !d.opts.JSON && !d.printLogHeader(path) {
		return
	}
	f, size, ok := d.open(path)
	if !ok {
		return
	}
	defer f.Close()

	var (
		pos     int64
		buf     []byte
		recs    []record.Record
		lastOff int64 = -1
		abs           = absPath(path)
	)
	// A raw scan, not the engine's batch reader (engine.SegmentReader, which
	// check uses): dump prints every entry it can frame, a batch whose CRC
	// fails too (isValid: false), as kafka-dump-log does, and the reader
	// returns verified batches only.
	for {
		b, err := record.ReadAt(f, pos, size, buf)
		if errors.Is(err, record.ErrTruncated) && !partialBatch(f, pos, size) {
			// Not the start of a batch cut short: garbage fails the dump
			// whatever its length.
			d.fail("dump: %s: position %d: %w: %v", path, pos, record.ErrCorrupt, err)
			break
		}
		if errors.Is(err, io.EOF) || errors.Is(err, record.ErrTruncated) {
			break
		}
		if err != nil {
			d.fail("dump: %s: position %d: %w", path, pos, err)
			break
		}
		buf = b.Raw[:cap(b.Raw)]
		d.printBatch(&b, pos)
		if d.opts.deep() {
			var err error
			recs, err = b.Records(recs[:0])
			if err != nil {
				d.fail("dump: %s: position %d: %w", path, pos, err)
				pos += int64(b.Size())
				break
			}
			lastOff = d.printRecords(&b, recs, lastOff, abs)
		}
		pos += int64(b.Size())
	}
	if trailing := size - pos; trailing > 0 {
		if d.opts.JSON {
			d.json(struct {
				Type         string `json:"type"`
				Position     int64  `json:"position"`
				InvalidBytes int64  `json:"invalidBytes"`
			}{"trailing", pos, trailing})
		} else {
			d.printf("Found %d invalid bytes at the end of %s\n", trailing, filepath.Base(path))
		}
	}
}

// printLogHeader prints the first line of a text dump of path: the segment's
// starting offset or the snapshot's end offset and epoch. It returns false
// when path is not to be dumped (a name that is no offset: reported).
func (d *dumper) printLogHeader(path string) bool {
	name := filepath.Base(path)
	switch {
	case strings.HasSuffix(name, ".log"):
		base, err := fileBase(path)
		if err != nil {
			d.fail("dump: %s: segment name is not an offset: %w", path, err)
			return false
		}
		d.printf("Log starting offset: %d\n", base)
	case name == "bootstrap.checkpoint":
		d.printf("KRaft bootstrap snapshot\n")
	default:
		// <offset 20 digits>-<epoch 10 digits>.checkpoint
		stem := strings.TrimSuffix(name, ".checkpoint")
		off, epoch, ok := strings.Cut(stem, "-")
		o, err1 := strconv.ParseInt(off, 10, 64)
		e, err2 := strconv.ParseInt(epoch, 10, 32)
		if !ok || err1 != nil || err2 != nil {
			_ = d.out.Flush()
			fmt.Fprintf(d.errw, "Ignoring unknown file %s\n", path)
			return false
		}
		d.printf("Snapshot end offset: %d, epoch: %d\n", o, e)
	}
	return true
}

// printRecords prints the records recs of b, noting offsets that do not
// follow the one before (lastOff, -1 none) in the file abs, and returns the
// last offset printed.
func (d *dumper) printRecords(b *record.Batch, recs []record.Record, lastOff int64, abs string) int64 {
	var inner []legacyInner
	if b.Magic < 2 {
		inner = legacyInnerMessages(b, len(recs))
	}
	for i := range recs {
		r := &recs[i]
		if lastOff == -1 {
			lastOff = r.Offset
		} else if r.Offset != lastOff+1 {
			d.nonConsecutive.add(abs, lastOff, r.Offset)
		}
		lastOff = r.Offset
		var li *legacyInner
		if inner != nil {
			li = &inner[i]
		}
		d.printRecord(b, r, li)
	}
	return lastOff
}

func (d *dumper) printBatch(b *record.Batch, pos int64) {
	valid := b.Verify() == nil
	tt := timestampType(b)
	if d.opts.JSON {
		j := batchJSON{
			Type: "batch", BaseOffset: b.BaseOffset, LastOffset: b.LastOffset(),
			BaseSequence: b.BaseSequence, LastSequence: lastSequence(b),
			ProducerID: b.ProducerID, ProducerEpoch: b.ProducerEpoch,
			PartitionLeaderEpoch: b.PartitionLeaderEpoch,
			IsTransactional:      b.IsTransactional(), IsControl: b.IsControl(),
			Position: pos, TimestampType: tt, MaxTimestamp: b.MaxTimestamp,
			Size: b.Size(), Magic: b.Magic, CompressCodec: b.Codec().String(),
			CRC: b.CRC, IsValid: valid,
		}
		if b.Magic >= 2 {
			c := b.RecordCount
			j.Count = &c
		} else {
			j.BaseOffset = b.LastOffset() // as Kafka prints "offset:" for legacy
		}
		if b.HasDeleteHorizon() {
			h := b.DeleteHorizonMs()
			j.DeleteHorizonMs = &h
		}
		d.json(j)
		return
	}
	if b.Magic >= 2 {
		d.printf("baseOffset: %d lastOffset: %d count: %d baseSequence: %d lastSequence: %d producerId: %d producerEpoch: %d partitionLeaderEpoch: %d isTransactional: %t isControl: %t deleteHorizonMs: %s",
			b.BaseOffset, b.LastOffset(), b.RecordCount, b.BaseSequence, lastSequence(b),
			b.ProducerID, b.ProducerEpoch, b.PartitionLeaderEpoch, b.IsTransactional(), b.IsControl(),
			optionalLong(b.DeleteHorizonMs(), b.HasDeleteHorizon()))
	} else {
		d.printf("offset: %d", b.LastOffset())
	}
	d.printf(" position: %d %s: %d size: %d magic: %d compresscodec: %s crc: %d isvalid: %t\n",
		pos, tt, b.MaxTimestamp, b.Size(), b.Magic, b.Codec(), b.CRC, valid)
}

// controlInfo describes a control record as DumpLogSegments prints it.
type controlInfo struct {
	text  string // appended to the record line
	typ   string
	epoch *int32
	json  any
}

func describeControl(r *record.Record) controlInfo {
	if len(r.Key) < 4 {
		return controlInfo{text: " controlType: UNKNOWN(-1)", typ: "UNKNOWN"}
	}
	id := int16(binary.BigEndian.Uint16(r.Key[2:]))
	switch id {
	case record.ControlAbort, record.ControlCommit:
		name := "ABORT"
		if id == record.ControlCommit {
			name = "COMMIT"
		}
		epoch, err := record.ParseEndTxnMarker(r.Value)
		if err != nil {
			return controlInfo{text: fmt.Sprintf(" controlType: %s(%d)", name, id), typ: name}
		}
		return controlInfo{text: fmt.Sprintf(" endTxnMarker: %s coordinatorEpoch: %d", name, epoch), typ: name, epoch: &epoch}
	case record.ControlSnapshotHeader:
		// SnapshotHeaderRecord: version int16, lastContainedLogTimestamp int64, tagged fields.
		if len(r.Value) >= 10 {
			v := struct {
				Version                   int16 `json:"version"`
				LastContainedLogTimestamp int64 `json:"lastContainedLogTimestamp"`
			}{int16(binary.BigEndian.Uint16(r.Value)), int64(binary.BigEndian.Uint64(r.Value[2:]))}
			j, _ := json.Marshal(v)
			return controlInfo{text: " SnapshotHeader " + string(j), typ: "SNAPSHOT_HEADER", json: v}
		}
	case record.ControlSnapshotFooter:
		if len(r.Value) >= 2 {
			v := struct {
				Version int16 `json:"version"`
			}{int16(binary.BigEndian.Uint16(r.Value))}
			j, _ := json.Marshal(v)
			return controlInfo{text: " SnapshotFooter " + string(j), typ: "SNAPSHOT_FOOTER", json: v}
		}
	}
	name := controlTypeName(id)
	return controlInfo{text: fmt.Sprintf(" controlType: %s(%d)", name, id), typ: name}
}

func controlTypeName(id int16) string {
	switch id {
	case record.ControlAbort:
		return "ABORT"
	case record.ControlCommit:
		return "COMMIT"
	case record.ControlLeaderChange:
		return "LEADER_CHANGE"
	case record.ControlSnapshotHeader:
		return "SNAPSHOT_HEADER"
	case record.ControlSnapshotFooter:
		return "SNAPSHOT_FOOTER"
	case record.ControlKRaftVersion:
		return "KRAFT_VERSION"
	case record.ControlKRaftVoters:
		return "KRAFT_VOTERS"
	}
	return "UNKNOWN"
}

func byteSize(b []byte) int {
	if b == nil {
		return -1
	}
	return len(b)
}

func (d *dumper) printRecord(b *record.Batch, r *record.Record, li *legacyInner) {
	tt := timestampType(b)
	var seq int32 = -1
	if b.BaseSequence >= 0 {
		seq = incrementSequence(b.BaseSequence, int32(r.Offset-b.BaseOffset))
	}
	var ctl controlInfo
	if b.IsControl() {
		ctl = describeControl(r)
	}
	showData := d.opts.PrintData && !b.IsControl()
	if d.opts.JSON {
		j := recordJSON{Type: "record", Offset: r.Offset, TimestampType: tt, Timestamp: r.Timestamp,
			KeySize: byteSize(r.Key), ValueSize: byteSize(r.Value)}
		if b.Magic >= 2 {
			j.Sequence = &seq
			j.HeaderKeys = make([]string, 0, len(r.Headers))
			for _, h := range r.Headers {
				j.HeaderKeys = append(j.HeaderKeys, h.Key)
			}
		} else if li != nil {
			j.IsValid, j.CRC = &li.valid, &li.crc
		}
		if b.IsControl() {
			j.ControlType, j.CoordinatorEpoch, j.Control = ctl.typ, ctl.epoch, ctl.json
		}
		if showData {
			j.Key, j.KeyBase64 = jsonBytes(r.Key)
			j.Payload, j.PayloadBase64 = jsonBytes(r.Value)
		}
		d.json(j)
		return
	}
	prefix := "| "
	if !d.opts.SkipRecordMetadata {
		d.printf("%soffset: %d %s: %d keySize: %d valueSize: %d", prefix, r.Offset, tt, r.Timestamp, byteSize(r.Key), byteSize(r.Value))
		prefix = " "
		if b.Magic >= 2 {
			d.printf(" sequence: %d headerKeys: [", seq)
			for i, h := range r.Headers {
				if i > 0 {
					d.out.WriteByte(',')
				}
				d.out.WriteString(h.Key)
			}
			d.out.WriteByte(']')
		} else if li != nil {
			// Kafka prints a stray '}' here; copied so scripts match.
			d.printf(" isValid: %t crc: %d}", li.valid, li.crc)
		}
		if b.IsControl() {
			d.out.WriteString(ctl.text)
		}
	}
	if showData {
		if r.Key != nil {
			d.printf("%skey: %s", prefix, javaString(r.Key))
		}
		if r.Value != nil {
			d.printf(" payload: %s", javaString(r.Value))
		}
	}
	d.out.WriteByte('\n')
}

// jsonBytes returns b as a JSON string when it is valid UTF-8, else as base64.
func jsonBytes(b []byte) (text, b64 *string) {
	if b == nil {
		return nil, nil
	}
	if utf8.Valid(b) {
		s := string(b)
		return &s, nil
	}
	s := base64.StdEncoding.EncodeToString(b)
	return nil, &s
}

// summaries prints the collected index and offset problems on errw, in the
// order and words of DumpLogSegments.
func (d *dumper) summaries() {
	w := d.errw
	for _, f := range d.indexMismatches.order {
		fmt.Fprintf(w, "Mismatches in :%s\n", f)
		// Kafka prepends to a list, so the last mismatch prints first.
		ps := d.indexMismatches.pairs[f]
		for i := len(ps) - 1; i >= 0; i-- {
			fmt.Fprintf(w, "  Index offset: %d, log offset: %d\n", ps[i][0], ps[i][1])
		}
	}
	for _, f := range d.timeMismatch.order {
		fmt.Fprintf(w, "Found timestamp mismatch in :%s\n", f)
		for _, p := range d.timeMismatch.pairs[f] {
			fmt.Fprintf(w, "  Index timestamp: %d, log timestamp: %d\n", p[0], p[1])
		}
	}
	for _, f := range d.timeOutOfOrder.order {
		fmt.Fprintf(w, "Found out of order timestamp in :%s\n", f)
		for _, p := range d.timeOutOfOrder.pairs[f] {
			fmt.Fprintf(w, "  Index timestamp: %d, Previously indexed timestamp: %d\n", p[0], p[1])
		}
	}
	for _, f := range d.timeNotFound.order {
		fmt.Fprintln(w, "The following indexed offsets are not found in the log.")
		for _, p := range d.timeNotFound.pairs[f] {
			fmt.Fprintf(w, "Indexed offset: %d, found log offset: %d\n", p[0], p[1])
		}
	}
	for _, f := range d.nonConsecutive.order {
		fmt.Fprintf(w, "Non-consecutive offsets in %s\n", f)
		ps := d.nonConsecutive.pairs[f]
		for i := len(ps) - 1; i >= 0; i-- {
			fmt.Fprintf(w, "  %d is followed by %d\n", ps[i][0], ps[i][1])
		}
	}
}
