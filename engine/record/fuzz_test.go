package record

import (
	"bytes"
	"encoding/binary"
	"errors"
	"flag"
	"io"
	"math"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/topicfs/topicfs/internal/testutil"
)

var updateSeeds = flag.Bool("update-seeds", false, "rewrite testdata/seeds from the encoder")

// seedFiles builds the fuzz seed files: one small .log-like file per codec,
// plus control, empty, legacy and KAFKA-3160 entries.
func seedFiles(t testing.TB) map[string][]byte {
	t.Helper()
	out := map[string][]byte{}
	recs := sampleRecords(0, 1_700_000_000_000)[:6]
	for _, c := range allCodecs {
		spec := NewBatchSpec(0)
		spec.Codec = c
		raw, err := Encode(nil, spec, recs)
		require.NoError(t, err)
		spec = NewBatchSpec(6)
		spec.Codec, spec.LogAppendTime, spec.DeleteHorizonMs = c, true, 1_800_000_000_000
		raw, err = Encode(raw, spec, sampleRecords(6, 5)[:2])
		require.NoError(t, err)
		out["v2-"+c.String()+".log"] = raw
	}
	spec := NewBatchSpec(0)
	spec.ProducerID, spec.ProducerEpoch = 9, 1
	raw, err := EncodeControlBatch(nil, spec, 3, 1000, ControlCommit, 2)
	require.NoError(t, err)
	raw, err = Encode(raw, spec, nil)
	require.NoError(t, err)
	out["v2-control-empty.log"] = raw

	plain := legacyEntry(0, legacyMsg(1, 0, 5, []byte("k"), []byte("v")))
	out["legacy.log"] = bytes.Join([][]byte{
		plain,
		legacyWrapper(t, 1, Gzip, false, 7, 2, legacyEntry(0, legacyMsg(1, 0, 6, nil, []byte("a"))), legacyEntry(1, legacyMsg(1, 0, 7, nil, []byte("b")))),
		legacyWrapper(t, 1, Snappy, true, 9, 3, legacyEntry(0, legacyMsg(1, 0, 8, nil, []byte("c")))),
		legacyWrapper(t, 0, Gzip, false, 0, 4, legacyEntry(4, legacyMsg(0, 0, 0, nil, []byte("d")))),
	}, nil)
	// KAFKA-3160: a v0 lz4 wrapper whose HC covers magic+FLG+BD.
	inner := legacyEntry(5, legacyMsg(0, 0, 0, nil, []byte("old lz4")))
	frame := appendLZ4(nil, inner)
	frame[6] = byte(xxh32(frame[0:6], 0) >> 8)
	out["legacy-v0-lz4-kafka3160.log"] = legacyEntry(5, legacyMsg(0, int8(LZ4), 0, nil, frame))
	return out
}

// TestSeedFiles checks the committed seeds decode (and rewrites them with
// -update-seeds).
func TestSeedFiles(t *testing.T) {
	want := seedFiles(t)
	for name, data := range want {
		path := filepath.Join("testdata", "seeds", name)
		if *updateSeeds {
			require.NoError(t, os.WriteFile(path, data, 0o644))
		}
		got, err := os.ReadFile(path)
		require.NoError(t, err, "run go test -run TestSeedFiles -update-seeds")
		n := 0
		for pos := int64(0); ; {
			b, err := ReadAt(bytes.NewReader(got), pos, int64(len(got)), nil)
			if err != nil {
				require.ErrorIs(t, err, io.EOF, name)
				break
			}
			require.NoError(t, b.Verify(), name)
			_, err = b.Records(nil)
			require.NoError(t, err, name)
			pos += int64(b.Size())
			n++
		}
		require.Positive(t, n, name)
	}
}

// fuzzSeeds adds every seed file and the small real fixture logs.
func fuzzSeeds(f *testing.F) [][]byte {
	var seeds [][]byte
	entries, err := os.ReadDir(filepath.Join("testdata", "seeds"))
	require.NoError(f, err)
	for _, e := range entries {
		data, err := os.ReadFile(filepath.Join("testdata", "seeds", e.Name()))
		require.NoError(f, err)
		seeds = append(seeds, data)
	}
	for _, rel := range []string{
		"kafka-go-fetch-v1v2-gzip-segmentio/extracted/v1-v1c-v2-v2c-v2b-v2b-v2b-v2bc-v1b-v1bc/00000000000000000000.log",
		"cp76-kafka36-lz4-rjmfernandes/data/_confluent-command-0/00000000000000000000.log",
		"kafka41-kraft-nomanazeem/kafka-logs/bootstrap.checkpoint",
	} {
		if data, ok := testutil.KafkaFixtureFile(f, rel); ok {
			seeds = append(seeds, data)
		}
	}
	return seeds
}

// lowerDecompressLimit keeps fuzz iterations fast and small.
func lowerDecompressLimit(f *testing.F) {
	r, s := MaxDecompressRatio, MaxDecompressSlack
	MaxDecompressRatio, MaxDecompressSlack = 64, 1<<20
	f.Cleanup(func() { MaxDecompressRatio, MaxDecompressSlack = r, s })
}

// FuzzReadAt reads a fuzzed file batch by batch. It must never panic; every
// v2 batch that verifies and decodes must re-encode to the same records.
func FuzzReadAt(f *testing.F) {
	lowerDecompressLimit(f)
	for _, s := range fuzzSeeds(f) {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		r := bytes.NewReader(data)
		var buf []byte
		for pos := int64(0); pos < int64(len(data)); {
			b, err := ReadAt(r, pos, int64(len(data)), buf)
			if err != nil {
				if !errors.Is(err, ErrCorrupt) && !errors.Is(err, ErrTruncated) {
					t.Fatalf("unexpected error class: %v", err)
				}
				return
			}
			if b.Size() <= 0 || int64(b.Size()) > int64(len(data))-pos {
				t.Fatalf("bad size %d at %d", b.Size(), pos)
			}
			checkBatch(t, &b)
			pos += int64(b.Size())
		}
	})
}

// FuzzRecords wraps a fuzzed records region in a valid v2 header (codec and
// record count from the input) so the decompressors and record decoder see
// arbitrary bytes behind a correct CRC.
func FuzzRecords(f *testing.F) {
	lowerDecompressLimit(f)
	for _, s := range fuzzSeeds(f) {
		for pos := int64(0); pos < int64(len(s)); {
			b, err := ReadAt(bytes.NewReader(s), pos, int64(len(s)), nil)
			if err != nil {
				break
			}
			if b.Magic == 2 {
				f.Add(uint8(b.Attributes), uint16(b.RecordCount), b.Raw[HeaderSize:])
			}
			pos += int64(b.Size())
		}
	}
	f.Fuzz(func(t *testing.T, attrs uint8, count uint16, body []byte) {
		spec := NewBatchSpec(1000)
		raw, err := Encode(nil, spec, nil)
		require.NoError(t, err)
		raw = append(raw, body...)
		binary.BigEndian.PutUint32(raw[offLength:], uint32(len(raw)-LogOverhead))
		binary.BigEndian.PutUint16(raw[offAttributes:], uint16(attrs))
		binary.BigEndian.PutUint32(raw[offRecordCount:], uint32(count))
		binary.BigEndian.PutUint64(raw[offBaseTimestamp:], 1_700_000_000_000)
		binary.BigEndian.PutUint32(raw[offLastOffsetDelta:], math.MaxInt32)
		updateCRC(raw)
		b, err := Parse(raw)
		require.NoError(t, err)
		require.NoError(t, b.Verify())
		checkBatch(t, &b)
	})
}

// checkBatch verifies and decodes b; a decodable v2 batch must round-trip.
func checkBatch(t *testing.T, b *Batch) {
	t.Helper()
	_ = b.LastOffset()
	_, _ = b.ControlType()
	if b.Verify() != nil {
		return
	}
	recs, err := b.Records(nil)
	if err != nil {
		if !errors.Is(err, ErrCorrupt) && !errors.Is(err, ErrUnsupported) {
			t.Fatalf("unexpected error class: %v", err)
		}
		return
	}
	if b.Magic < 2 || len(recs) == 0 {
		return
	}
	spec := BatchSpec{
		BaseOffset: b.BaseOffset, Codec: b.Codec(), LogAppendTime: b.LogAppendTime(),
		Transactional: b.IsTransactional(), Control: b.IsControl(),
		ProducerID: b.ProducerID, ProducerEpoch: b.ProducerEpoch, BaseSequence: b.BaseSequence,
		PartitionLeaderEpoch: b.PartitionLeaderEpoch, DeleteHorizonMs: b.DeleteHorizonMs(), LastOffsetDelta: -1,
	}
	for _, r := range recs {
		if d := r.Offset - b.BaseOffset; d < 0 || d > math.MaxInt32 {
			return // offsetDelta outside what Encode accepts (Kafka never writes it)
		}
	}
	raw, err := Encode(nil, spec, recs)
	require.NoError(t, err)
	nb, err := Parse(raw)
	require.NoError(t, err)
	require.NoError(t, nb.Verify())
	got, err := nb.Records(nil)
	require.NoError(t, err)
	require.Equal(t, recs, got)
}

// FuzzLegacy builds a legacy entry with a correct CRC around a fuzzed
// (possibly compressed) value, so the legacy unnesting sees arbitrary bytes.
func FuzzLegacy(f *testing.F) {
	lowerDecompressLimit(f)
	for _, s := range fuzzSeeds(f) {
		for pos := int64(0); pos < int64(len(s)); {
			b, err := ReadAt(bytes.NewReader(s), pos, int64(len(s)), nil)
			if err != nil {
				break
			}
			if b.Magic < 2 {
				if m, err := parseLegacyMessage(b.Raw[LogOverhead:]); err == nil {
					f.Add(uint8(m.magic), uint8(m.attrs), b.LastOffset(), m.value)
				}
			}
			pos += int64(b.Size())
		}
	}
	f.Fuzz(func(t *testing.T, magic, attrs uint8, offset int64, value []byte) {
		raw := legacyEntry(offset, legacyMsg(int8(magic%2), int8(attrs), 1_700_000_000_000, nil, value))
		b, err := Parse(raw)
		require.NoError(t, err)
		require.NoError(t, b.Verify())
		assert := func(err error) {
			if err != nil && !errors.Is(err, ErrCorrupt) {
				t.Fatalf("unexpected error class: %v", err)
			}
		}
		msgs, err := b.LegacyMessages(nil)
		assert(err)
		recs, err := b.Records(nil)
		assert(err)
		if err == nil {
			require.Len(t, recs, len(msgs))
			switch {
			case attrs&attrCodecMask == 0: // plain message
				require.Equal(t, offset, recs[0].Offset)
			case magic%2 == 1 && offset != 0: // v1 wrapper: its offset is the last inner offset
				require.Equal(t, offset, recs[len(recs)-1].Offset)
			}
		}
	})
}

// FuzzPeekHeader decodes the first bytes of a fuzzed entry, cut at every
// length and with every amount of file after it: it must never panic, fail
// only with ErrCorrupt or ErrTruncated, agree with ReadAt on every field
// ReadAt decodes, and set each field either as the whole header does or not
// at all (zero) when the cut leaves it out.
func FuzzPeekHeader(f *testing.F) {
	for _, s := range fuzzSeeds(f) {
		f.Add(s[:min(len(s), 80)], int64(len(s)))
		for pos := int64(0); pos < int64(len(s)); { // every entry alone
			b, err := ReadAt(bytes.NewReader(s), pos, int64(len(s)), nil)
			if err != nil {
				break
			}
			f.Add(b.Raw, int64(len(b.Raw)))
			pos += int64(b.Size())
		}
	}
	f.Fuzz(func(t *testing.T, data []byte, avail int64) {
		full, fullErr := PeekHeader(data, avail)
		for n := 0; n <= min(len(data), 2*HeaderSize); n++ { // past HeaderSize every field is set
			h, err := PeekHeader(data[:n], avail)
			if err != nil {
				if !errors.Is(err, ErrCorrupt) && !errors.Is(err, ErrTruncated) {
					t.Fatalf("cut at %d: unexpected error class: %v", n, err)
				}
				continue
			}
			require.NoError(t, fullErr, "cut at %d passes, the whole header must too", n)
			require.Nil(t, h.Raw)
			requireFieldsOf(t, full, h, n)
		}
		if avail < int64(len(data)) || fullErr != nil {
			return
		}
		b, err := ReadAt(bytes.NewReader(data), 0, avail, nil)
		if err != nil || int64(b.Size()) > avail {
			return
		}
		require.NoError(t, fullErr)
		b.Raw = nil
		require.Equal(t, b, full, "PeekHeader and ReadAt disagree")
	})
}

// requireFieldsOf checks that every field of part is that of full or zero.
func requireFieldsOf(t *testing.T, full, part Batch, n int) {
	t.Helper()
	type field struct {
		name      string
		got, want int64
	}
	for _, f := range []field{
		{"PartitionLeaderEpoch", int64(part.PartitionLeaderEpoch), int64(full.PartitionLeaderEpoch)},
		{"CRC", int64(part.CRC), int64(full.CRC)},
		{"Attributes", int64(part.Attributes), int64(full.Attributes)},
		{"LastOffsetDelta", int64(part.LastOffsetDelta), int64(full.LastOffsetDelta)},
		{"BaseTimestamp", part.BaseTimestamp, full.BaseTimestamp},
		{"MaxTimestamp", part.MaxTimestamp, full.MaxTimestamp},
		{"ProducerID", part.ProducerID, full.ProducerID},
		{"ProducerEpoch", int64(part.ProducerEpoch), int64(full.ProducerEpoch)},
		{"BaseSequence", int64(part.BaseSequence), int64(full.BaseSequence)},
		{"RecordCount", int64(part.RecordCount), int64(full.RecordCount)},
	} {
		if f.got != f.want && f.got != 0 {
			t.Fatalf("cut at %d: %s %d, the whole header says %d", n, f.name, f.got, f.want)
		}
	}
	require.Equal(t, []any{full.BaseOffset, full.Length, full.Magic}, []any{part.BaseOffset, part.Length, part.Magic}, "cut at %d", n)
}
