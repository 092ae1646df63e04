package tools

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"hash/crc32"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/klauspost/compress/s2"
	"github.com/klauspost/compress/zstd"
	"github.com/pierrec/lz4/v4"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/topicfs/topicfs/engine/index"
	"github.com/topicfs/topicfs/engine/vfs"
)

// This file builds Kafka batches with franz-go's kmsg (not engine/record),
// compresses them with codec libraries called directly here, lays them out
// as a Kafka partition directory and checks that Dump and Check read them.

// kRecord is one record to encode.
type kRecord struct {
	key, value []byte
	headers    []kmsg.Header
	ts         int64
}

// kBatch describes a batch to build with kmsg.
type kBatch struct {
	codec         int16 // attribute bits 0-2
	txn, control  bool
	pid           int64
	epoch         int16
	seq           int32
	recs          []kRecord
	firstOffset   int64
	leaderEpoch   int32
	logAppendTime int64 // >0: set bit 3 and maxTimestamp
}

func compressIndependently(t *testing.T, codec int16, raw []byte) []byte {
	t.Helper()
	var buf bytes.Buffer
	switch codec {
	case 0:
		return raw
	case 1: // gzip, RFC 1952, standard library
		w := gzip.NewWriter(&buf)
		_, err := w.Write(raw)
		require.NoError(t, err)
		require.NoError(t, w.Close())
	case 2: // snappy with xerial framing, blocks by s2's snappy-compatible encoder
		buf.Write([]byte{0x82, 'S', 'N', 'A', 'P', 'P', 'Y', 0, 0, 0, 0, 1, 0, 0, 0, 1})
		for p := 0; p < len(raw); p += 32 << 10 {
			blk := s2.EncodeSnappy(nil, raw[p:min(len(raw), p+32<<10)])
			var n [4]byte
			binary.BigEndian.PutUint32(n[:], uint32(len(blk)))
			buf.Write(n[:])
			buf.Write(blk)
		}
	case 3: // lz4 frame, pierrec's frame writer
		w := lz4.NewWriter(&buf)
		require.NoError(t, w.Apply(lz4.BlockSizeOption(lz4.Block64Kb), lz4.ChecksumOption(false)))
		_, err := w.Write(raw)
		require.NoError(t, err)
		require.NoError(t, w.Close())
	case 4: // zstd frame
		enc, err := zstd.NewWriter(nil)
		require.NoError(t, err)
		out := enc.EncodeAll(raw, nil)
		require.NoError(t, enc.Close())
		return out
	default:
		t.Fatalf("codec %d", codec)
	}
	return buf.Bytes()
}

// buildBatch encodes b with kmsg: records first (their Length computed), then
// the header with Length and CRC-32C filled in.
func buildBatch(t *testing.T, b kBatch) []byte {
	t.Helper()
	var recs []byte
	base := b.recs[0].ts
	maxTs := base
	for i, r := range b.recs {
		kr := kmsg.Record{TimestampDelta64: r.ts - base, OffsetDelta: int32(i), Key: r.key, Value: r.value, Headers: r.headers}
		body := kr.AppendTo(nil)
		// body starts with the varint of Length 0 (one byte).
		kr.Length = int32(len(body) - 1)
		recs = kr.AppendTo(recs)
		maxTs = max(maxTs, r.ts)
	}
	attrs := b.codec
	if b.txn {
		attrs |= 0x10
	}
	if b.control {
		attrs |= 0x20
	}
	if b.logAppendTime > 0 {
		attrs |= 0x08
		maxTs = b.logAppendTime
	}
	kb := kmsg.RecordBatch{
		FirstOffset:          b.firstOffset,
		PartitionLeaderEpoch: b.leaderEpoch,
		Magic:                2,
		Attributes:           attrs,
		LastOffsetDelta:      int32(len(b.recs) - 1),
		FirstTimestamp:       base,
		MaxTimestamp:         maxTs,
		ProducerID:           b.pid,
		ProducerEpoch:        b.epoch,
		FirstSequence:        b.seq,
		NumRecords:           int32(len(b.recs)),
		Records:              compressIndependently(t, b.codec, recs),
	}
	raw := kb.AppendTo(nil)
	binary.BigEndian.PutUint32(raw[8:], uint32(len(raw)-12))
	binary.BigEndian.PutUint32(raw[17:], crc32.Checksum(raw[21:], crc32.MakeTable(crc32.Castagnoli)))
	return raw
}

func controlRecord(typ int16, coordinatorEpoch int32, ts int64) kRecord {
	key := make([]byte, 4)
	binary.BigEndian.PutUint16(key[2:], uint16(typ))
	val := make([]byte, 6)
	binary.BigEndian.PutUint32(val[2:], uint32(coordinatorEpoch))
	return kRecord{key: key, value: val, ts: ts}
}

// txnLog is a partition directory built by writeTxnLog.
type txnLog struct {
	dir, log   string
	batches    []kBatch
	positions  []int64
	aborted    index.AbortedTxn
	nextOffset int64
}

const (
	txnPID   = 4242
	txnEpoch = 3
)

// writeTxnLog lays out a Kafka partition directory holding one batch per
// codec (with keys, a null key, a tombstone and headers), a committed and an
// aborted transaction with their COMMIT/ABORT markers, a LogAppendTime batch,
// and the .index, .timeindex and .txnindex Kafka would write (built with
// engine/index at a small index interval).
func writeTxnLog(t *testing.T) txnLog {
	t.Helper()
	root := t.TempDir()
	dir := filepath.Join(root, "txn-0")
	require.NoError(t, os.MkdirAll(dir, 0o755))
	tl := txnLog{dir: dir, log: filepath.Join(dir, "00000000000000000000.log")}
	ts := int64(1_700_000_000_000)
	next := int64(0)
	add := func(b kBatch) {
		b.firstOffset = next
		next += int64(len(b.recs))
		tl.batches = append(tl.batches, b)
	}
	for codec := int16(0); codec <= 4; codec++ {
		var recs []kRecord
		for i := 0; i < 3; i++ {
			ts += 10
			r := kRecord{key: []byte(fmt.Sprintf("k%d-%d", codec, i)), value: []byte(fmt.Sprintf("value %d of codec %d", i, codec)), ts: ts}
			switch i {
			case 1:
				r.key = nil
				r.headers = []kmsg.Header{{Key: "h1", Value: []byte("x")}, {Key: "h2", Value: nil}}
			case 2:
				r.value = nil // tombstone
			}
			recs = append(recs, r)
		}
		// Out-of-order timestamps inside a batch: maxTimestamp is not the last.
		recs[0].ts, recs[1].ts = recs[1].ts, recs[0].ts
		add(kBatch{codec: codec, pid: -1, epoch: -1, seq: -1, recs: recs, leaderEpoch: 7})
	}
	// Committed transaction: two data batches (gzip, lz4) then COMMIT.
	firstTxn := next
	add(kBatch{codec: 1, txn: true, pid: txnPID, epoch: txnEpoch, seq: 0, recs: []kRecord{{key: []byte("a"), value: []byte("committed-1"), ts: ts + 1}, {key: []byte("b"), value: []byte("committed-2"), ts: ts + 2}}})
	add(kBatch{codec: 3, txn: true, pid: txnPID, epoch: txnEpoch, seq: 2, recs: []kRecord{{key: []byte("c"), value: []byte("committed-3"), ts: ts + 3}}})
	add(kBatch{txn: true, control: true, pid: txnPID, epoch: txnEpoch, seq: -1, recs: []kRecord{controlRecord(1, 5, ts+4)}})
	_ = firstTxn
	// Aborted transaction: one zstd data batch then ABORT.
	abortFirst := next
	add(kBatch{codec: 4, txn: true, pid: txnPID, epoch: txnEpoch, seq: 3, recs: []kRecord{{key: []byte("d"), value: []byte("aborted-1"), ts: ts + 5}, {key: []byte("e"), value: []byte("aborted-2"), ts: ts + 6}}})
	abortMarker := next
	add(kBatch{txn: true, control: true, pid: txnPID, epoch: txnEpoch, seq: -1, recs: []kRecord{controlRecord(0, 5, ts+7)}})
	// A LogAppendTime batch, snappy.
	add(kBatch{codec: 2, pid: 77, epoch: 0, seq: 10, logAppendTime: ts + 100, recs: []kRecord{{value: []byte("lat-1"), ts: ts + 8}, {value: []byte("lat-2"), ts: ts + 9}}})
	tl.nextOffset = next
	tl.aborted = index.AbortedTxn{ProducerID: txnPID, FirstOffset: abortFirst, LastOffset: abortMarker, LastStableOffset: abortFirst}

	var data []byte
	oi, err := index.OpenOffsetIndex(vfs.OS, filepath.Join(dir, "00000000000000000000.index"), 0, 1<<20, true)
	require.NoError(t, err)
	ti, err := index.OpenTimeIndex(vfs.OS, filepath.Join(dir, "00000000000000000000.timeindex"), 0, 1<<20, true)
	require.NoError(t, err)
	const interval = 150
	sinceIndex := 0
	maxTs, maxTsOff := int64(-1), int64(-1)
	for _, b := range tl.batches {
		raw := buildBatch(t, b)
		last := b.firstOffset + int64(len(b.recs)) - 1
		bmax := int64(binary.BigEndian.Uint64(raw[35:]))
		if bmax > maxTs {
			maxTs, maxTsOff = bmax, last
		}
		if sinceIndex > interval {
			require.NoError(t, oi.Append(last, int64(len(data))))
			require.NoError(t, ti.MaybeAppend(maxTs, maxTsOff, false))
			sinceIndex = 0
		}
		tl.positions = append(tl.positions, int64(len(data)))
		data = append(data, raw...)
		sinceIndex += len(raw)
	}
	require.NoError(t, ti.MaybeAppend(maxTs, maxTsOff, true))
	require.Greater(t, oi.Entries(), 2, "the test needs several index entries")
	require.NoError(t, oi.Close())
	require.NoError(t, ti.Close())
	require.NoError(t, os.WriteFile(tl.log, data, 0o644))

	tx, err := index.OpenTxnIndex(vfs.OS, filepath.Join(dir, "00000000000000000000.txnindex"))
	require.NoError(t, err)
	require.NoError(t, tx.Append(tl.aborted))
	require.NoError(t, tx.Close())
	return tl
}

// jsonLines decodes Dump's JSON output.
func jsonLines(t *testing.T, out string) []map[string]any {
	t.Helper()
	var objs []map[string]any
	sc := bufio.NewScanner(strings.NewReader(out))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var m map[string]any
		require.NoError(t, json.Unmarshal(sc.Bytes(), &m), sc.Text())
		objs = append(objs, m)
	}
	return objs
}

func TestDumpKmsgBatchesEveryCodecAndTransactions(t *testing.T) {
	tl := writeTxnLog(t)
	var out, errOut bytes.Buffer
	require.NoError(t, Dump(&out, &errOut, []string{tl.log}, DumpOptions{PrintData: true, JSON: true}))
	assert.Empty(t, errOut.String())
	objs := jsonLines(t, out.String())

	codecs := []string{"none", "gzip", "snappy", "lz4", "zstd"}
	bi := -1
	ri := 0
	for _, o := range objs {
		switch o["type"] {
		case "batch":
			bi++
			ri = 0
			require.Less(t, bi, len(tl.batches))
			b := tl.batches[bi]
			assert.Equal(t, codecs[b.codec], o["compresscodec"], "batch %d", bi)
			assert.EqualValues(t, b.firstOffset, o["baseOffset"], "batch %d", bi)
			assert.EqualValues(t, b.firstOffset+int64(len(b.recs))-1, o["lastOffset"], "batch %d", bi)
			assert.EqualValues(t, len(b.recs), o["count"], "batch %d", bi)
			assert.EqualValues(t, b.pid, o["producerId"], "batch %d", bi)
			assert.EqualValues(t, b.txn, o["isTransactional"], "batch %d", bi)
			assert.EqualValues(t, b.control, o["isControl"], "batch %d", bi)
			assert.EqualValues(t, tl.positions[bi], o["position"], "batch %d", bi)
			assert.Equal(t, true, o["isvalid"], "batch %d", bi)
			if b.logAppendTime > 0 {
				assert.Equal(t, "LogAppendTime", o["timestampType"])
			} else {
				assert.Equal(t, "CreateTime", o["timestampType"])
			}
		case "record":
			b := tl.batches[bi]
			r := b.recs[ri]
			assert.EqualValues(t, b.firstOffset+int64(ri), o["offset"], "batch %d record %d", bi, ri)
			if b.logAppendTime > 0 {
				assert.EqualValues(t, b.logAppendTime, o["timestamp"])
			} else {
				assert.EqualValues(t, r.ts, o["timestamp"], "batch %d record %d", bi, ri)
			}
			if b.seq >= 0 {
				assert.EqualValues(t, b.seq+int32(ri), o["sequence"])
			} else {
				assert.EqualValues(t, -1, o["sequence"])
			}
			if b.control {
				wantType := map[byte]string{0: "ABORT", 1: "COMMIT"}[r.key[3]]
				assert.Equal(t, wantType, o["controlType"])
				assert.EqualValues(t, 5, o["coordinatorEpoch"])
				assert.NotContains(t, o, "payload", "control records print no payload")
			} else {
				if r.key == nil {
					assert.EqualValues(t, -1, o["keySize"])
					assert.NotContains(t, o, "key")
				} else {
					assert.Equal(t, string(r.key), o["key"])
				}
				if r.value == nil {
					assert.EqualValues(t, -1, o["valueSize"])
					assert.NotContains(t, o, "payload")
				} else {
					assert.Equal(t, string(r.value), o["payload"])
				}
				var hk []any
				for _, h := range r.headers {
					hk = append(hk, h.Key)
				}
				if hk == nil {
					hk = []any{}
				}
				if len(hk) > 0 {
					assert.Equal(t, hk, o["headerKeys"])
				}
			}
			ri++
		}
	}
	assert.Equal(t, len(tl.batches)-1, bi, "every batch dumped")

	// Kafka's text form of the markers and the transaction index.
	out.Reset()
	errOut.Reset()
	files := []string{tl.log, sibling(tl.log, ".index"), sibling(tl.log, ".timeindex"), sibling(tl.log, ".txnindex")}
	require.NoError(t, Dump(&out, &errOut, files, DumpOptions{DeepIteration: true}))
	assert.Empty(t, errOut.String(), "no index mismatch, no time index error, offsets consecutive")
	text := out.String()
	assert.Contains(t, text, " endTxnMarker: COMMIT coordinatorEpoch: 5\n")
	assert.Contains(t, text, " endTxnMarker: ABORT coordinatorEpoch: 5\n")
	assert.Contains(t, text, fmt.Sprintf("version: 0 producerId: %d firstOffset: %d lastOffset: %d lastStableOffset: %d\n",
		txnPID, tl.aborted.FirstOffset, tl.aborted.LastOffset, tl.aborted.LastStableOffset))
	assert.Contains(t, text, fmt.Sprintf("producerId: %d producerEpoch: %d partitionLeaderEpoch: 0 isTransactional: true isControl: true", txnPID, txnEpoch))
	assert.Contains(t, text, "compresscodec: zstd")
	assert.Regexp(t, `(?m)^offset: \d+ position: \d+$`, text)
	assert.Regexp(t, `(?m)^timestamp: \d+ offset: \d+$`, text)

	rep, err := Check(&out, tl.dir, CheckOptions{})
	require.NoError(t, err)
	assert.Empty(t, rep.Problems(), out.String())
	require.Len(t, rep.Partitions, 1)
	p := rep.Partitions[0]
	assert.EqualValues(t, len(tl.batches), p.Batches)
	assert.EqualValues(t, tl.nextOffset, p.Records)
	assert.EqualValues(t, tl.nextOffset, p.NextOffset)
}

func TestCheckFindsTxnIndexNotPointingAtAbort(t *testing.T) {
	tl := writeTxnLog(t)
	path := sibling(tl.log, ".txnindex")
	tx, err := index.OpenTxnIndex(vfs.OS, path)
	require.NoError(t, err)
	// The COMMIT marker is not an abort.
	require.NoError(t, tx.Append(index.AbortedTxn{ProducerID: txnPID, FirstOffset: tl.aborted.LastOffset + 1, LastOffset: tl.nextOffset - 1, LastStableOffset: 0}))
	require.NoError(t, tx.Close())
	var out bytes.Buffer
	rep, err := Check(&out, tl.dir, CheckOptions{})
	require.NoError(t, err)
	require.Len(t, rep.Problems(), 1, out.String())
	assert.Contains(t, rep.Problems()[0].Message, "is not an ABORT marker")
}
