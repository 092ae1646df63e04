package record

import (
	"bytes"
	"compress/gzip"
	"encoding/binary"
	"errors"
	"io"
	"runtime"
	"testing"

	kgzip "github.com/klauspost/compress/gzip"
	"github.com/klauspost/compress/s2"
	"github.com/klauspost/compress/zstd"
	"github.com/pierrec/lz4/v4"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestParseCodec(t *testing.T) {
	for _, tc := range []struct {
		name string
		want Codec
	}{
		{"none", None}, {"uncompressed", None}, {"GZIP", Gzip}, {"snappy", Snappy}, {"lz4", LZ4}, {" zstd ", Zstd},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := ParseCodec(tc.name)
			require.NoError(t, err)
			assert.Equal(t, tc.want, c)
		})
	}
	_, err := ParseCodec("producer")
	require.ErrorIs(t, err, ErrUnsupported)
	for _, c := range allCodecs {
		back, err := ParseCodec(c.String())
		require.NoError(t, err)
		assert.Equal(t, c, back)
	}
	assert.Equal(t, "unknown(7)", Codec(7).String())
}

func TestCodecRoundTrip(t *testing.T) {
	big := make([]byte, 1<<20)
	for i := range big {
		big[i] = byte(i * 7 / 13)
	}
	cases := []struct {
		name string
		recs []Record
	}{
		{"sample", sampleRecords(100, 1_700_000_000_000)},
		{"one null record", []Record{{Offset: 5, Timestamp: 1}}},
		{"1000 small", valueRecords(1000, 100, 0, 1_700_000_000_000)},
		{"large 1MiB value", []Record{{Offset: 7, Timestamp: 9, Key: []byte("big"), Value: big}, {Offset: 8, Timestamp: 9, Value: big[:70000]}}},
		{"empty", nil},
	}
	for _, codec := range allCodecs {
		for _, tc := range cases {
			t.Run(codec.String()+"/"+tc.name, func(t *testing.T) {
				raw := mustEncode(t, codec, tc.recs)
				b, got := decodeAll(t, raw)
				if len(tc.recs) == 0 {
					assert.Empty(t, got)
					assert.Equal(t, None, b.Codec(), "empty batches are written uncompressed")
					assert.Equal(t, HeaderSize, len(raw))
					assert.Equal(t, int64(-1), b.BaseTimestamp)
					return
				}
				assert.Equal(t, codec, b.Codec())
				require.Equal(t, tc.recs, got)
				assert.Equal(t, tc.recs[len(tc.recs)-1].Offset, b.LastOffset())
				// Decoded records do not alias the batch bytes.
				for i := range raw {
					raw[i] = 0xEE
				}
				require.Equal(t, tc.recs, got)
			})
		}
	}
}

func TestXerialSnappyFraming(t *testing.T) {
	src := valueRecords(1, 100000, 0, 0)[0].Value
	out := appendSnappy(nil, src)
	require.Equal(t, []byte{0x82, 'S', 'N', 'A', 'P', 'P', 'Y', 0, 0, 0, 0, 1, 0, 0, 0, 1}, out[:16])
	// Chunks of at most 32 KiB input, each an int32 BE length + raw block.
	var dec []byte
	chunks := 0
	for p := 16; p < len(out); chunks++ {
		n := int(binary.BigEndian.Uint32(out[p:]))
		blk := out[p+4 : p+4+n]
		l, err := s2.DecodedLen(blk)
		require.NoError(t, err)
		assert.LessOrEqual(t, l, 32<<10)
		d, err := s2.Decode(nil, blk)
		require.NoError(t, err)
		dec = append(dec, d...)
		p += 4 + n
	}
	assert.Equal(t, 4, chunks) // 100000 / 32768 rounded up
	assert.Equal(t, src, dec)

	// Reading: raw block, framed, and concatenated framed streams.
	raw := s2.EncodeSnappy(nil, src)
	got, err := unsnappy(nil, raw, decompressLimit(len(raw)))
	require.NoError(t, err)
	assert.Equal(t, src, got)
	got, err = unsnappy(nil, append(appendSnappy(nil, src[:10]), appendSnappy(nil, src[10:50])...), 1<<20)
	require.NoError(t, err)
	assert.Equal(t, src[:50], got)

	_, err = unsnappy(nil, out[:len(out)-1], 1<<30)
	require.ErrorIs(t, err, ErrCorrupt)
	_, err = unsnappy(nil, out, 1000)
	require.ErrorIs(t, err, ErrCorrupt, "decompression limit")
}

func TestLZ4FrameBytes(t *testing.T) {
	src := valueRecords(1, 200000, 0, 0)[0].Value
	out := appendLZ4(nil, src)
	// Kafka's header: magic, FLG 0x60, BD 0x40, HC 0x82.
	require.Equal(t, []byte{0x04, 0x22, 0x4D, 0x18, 0x60, 0x40, 0x82}, out[:7])
	require.Equal(t, []byte{0, 0, 0, 0}, out[len(out)-4:])
	// An independent reader (pierrec's frame reader verifies HC) agrees.
	dec, err := io.ReadAll(lz4.NewReader(bytes.NewReader(out)))
	require.NoError(t, err)
	assert.Equal(t, src, dec)

	// Incompressible input is stored raw (high bit set).
	rnd := make([]byte, 1000)
	for i := range rnd {
		rnd[i] = byte(xxh32([]byte{byte(i), byte(i >> 8)}, 1))
	}
	out = appendLZ4(nil, rnd)
	assert.Equal(t, uint32(1000)|0x80000000, binary.LittleEndian.Uint32(out[7:]))
	got, err := unlz4(nil, out, 1<<20, false)
	require.NoError(t, err)
	assert.Equal(t, rnd, got)
}

func TestLZ4ReaderRules(t *testing.T) {
	src := bytes.Repeat([]byte("kafka lz4 "), 20000)
	good := appendLZ4(nil, src)

	// pierrec frames: content checksum, content size, block checksums, 4 MiB blocks.
	for _, opts := range [][]lz4.Option{
		nil,
		{lz4.BlockChecksumOption(true), lz4.SizeOption(uint64(len(src)))},
		{lz4.BlockSizeOption(lz4.Block4Mb), lz4.ChecksumOption(false)},
	} {
		var buf bytes.Buffer
		w := lz4.NewWriter(&buf)
		require.NoError(t, w.Apply(opts...))
		_, err := w.Write(src)
		require.NoError(t, err)
		require.NoError(t, w.Close())
		got, err := unlz4(nil, buf.Bytes(), 1<<30, false)
		require.NoError(t, err)
		assert.Equal(t, src, got)
	}

	// KAFKA-3160: magic 0 writers hashed magic+FLG+BD; accepted only for magic 0.
	broken := append([]byte(nil), good...)
	broken[6] = byte(xxh32(broken[0:6], 0) >> 8)
	require.NotEqual(t, good[6], broken[6])
	_, err := unlz4(nil, broken, 1<<30, false)
	require.ErrorIs(t, err, ErrCorrupt)
	got, err := unlz4(nil, broken, 1<<30, true)
	require.NoError(t, err)
	assert.Equal(t, src, got)

	bad := func(mut func(b []byte) []byte) error {
		b := mut(append([]byte(nil), good...))
		_, err := unlz4(nil, b, 1<<30, false)
		return err
	}
	for name, mut := range map[string]func(b []byte) []byte{
		"magic":         func(b []byte) []byte { b[0] = 5; return b },
		"version":       func(b []byte) []byte { b[4] = 0xA0; return b },
		"dependent":     func(b []byte) []byte { b[4] = 0x40; return b },
		"reserved FLG":  func(b []byte) []byte { b[4] |= 1; return b },
		"reserved BD":   func(b []byte) []byte { b[5] |= 1; return b },
		"small size id": func(b []byte) []byte { b[5] = 0x30; return b },
		"truncated":     func(b []byte) []byte { return b[:len(b)/2] },
		"block too big": func(b []byte) []byte { binary.LittleEndian.PutUint32(b[7:], 70000); return b },
		"short header":  func(b []byte) []byte { return b[:5] },
	} {
		err := bad(mut)
		assert.ErrorIs(t, err, ErrCorrupt, name)
	}
	_, err = unlz4(nil, good, 1000, false)
	assert.ErrorIs(t, err, ErrCorrupt, "decompression limit")
}

func TestXXH32Golden(t *testing.T) {
	assert.Equal(t, uint32(0x02CC5D05), xxh32(nil, 0))
	assert.Equal(t, uint32(0x550D7456), xxh32([]byte("a"), 0))
	assert.Equal(t, uint32(0x32D153FF), xxh32([]byte("abc"), 0))
	// Inputs of 16 bytes and more: compare with the block checksum pierrec's
	// frame writer stores after each block.
	for _, n := range []int{16, 17, 39, 64, 1000} {
		src := bytes.Repeat([]byte("Nobody inspects the spammish repetition"), 30)[:n]
		var buf bytes.Buffer
		w := lz4.NewWriter(&buf)
		require.NoError(t, w.Apply(lz4.BlockChecksumOption(true), lz4.ChecksumOption(false)))
		_, err := w.Write(src)
		require.NoError(t, err)
		require.NoError(t, w.Close())
		f := buf.Bytes()
		size := int(binary.LittleEndian.Uint32(f[7:]) &^ 0x80000000)
		blk := f[11 : 11+size]
		assert.Equal(t, binary.LittleEndian.Uint32(f[11+size:]), xxh32(blk, 0), "n=%d", n)
	}
	assert.Equal(t, byte(0x82), lz4HC)
}

func TestGzipConcatenatedMembersAndJavaHeader(t *testing.T) {
	var buf bytes.Buffer
	for _, part := range []string{"first member ", "second member"} {
		w := gzip.NewWriter(&buf)
		_, err := w.Write([]byte(part))
		require.NoError(t, err)
		require.NoError(t, w.Close())
	}
	got, err := gunzip(nil, buf.Bytes(), 1<<20)
	require.NoError(t, err)
	assert.Equal(t, "first member second member", string(got))
	// Trailing garbage after a member is ignored, as GZIPInputStream does.
	got, err = gunzip(nil, append(buf.Bytes(), 0, 1, 2), 1<<20)
	require.NoError(t, err)
	assert.Equal(t, "first member second member", string(got))

	out, err := appendGzip([]byte("prefix"), []byte("hello"))
	require.NoError(t, err)
	assert.Equal(t, "prefix", string(out[:6]))
	// java.util.zip.GZIPOutputStream's fixed header (JDK >= 16 writes OS 255).
	assert.Equal(t, []byte{0x1f, 0x8b, 0x08, 0x00, 0, 0, 0, 0, 0x00, 0xff}, out[6:16])
	r, err := gzip.NewReader(bytes.NewReader(out[6:]))
	require.NoError(t, err)
	dec, err := io.ReadAll(r)
	require.NoError(t, err)
	assert.Equal(t, "hello", string(dec))

	_, err = gunzip(nil, []byte{1, 2, 3}, 100)
	require.ErrorIs(t, err, ErrCorrupt)
}

func TestZstdMultipleFrames(t *testing.T) {
	enc, err := zstd.NewWriter(nil)
	require.NoError(t, err)
	a := enc.EncodeAll([]byte("frame one "), nil)
	// A streaming frame has no content size, like zstd-jni's output.
	var buf bytes.Buffer
	sw, err := zstd.NewWriter(&buf, zstd.WithEncoderCRC(true))
	require.NoError(t, err)
	_, err = sw.Write(bytes.Repeat([]byte("frame two "), 10000))
	require.NoError(t, err)
	require.NoError(t, sw.Close())
	got, err := unzstd(nil, append(a, buf.Bytes()...), decompressLimit(len(a)+buf.Len()))
	require.NoError(t, err)
	assert.Equal(t, "frame one "+string(bytes.Repeat([]byte("frame two "), 10000)), string(got))

	_, err = unzstd(nil, buf.Bytes(), 50000)
	require.ErrorIs(t, err, ErrCorrupt, "decompression limit")
	_, err = unzstd(nil, []byte{0x28, 0xb5, 0x2f, 0xfd, 0xff}, 1000)
	require.ErrorIs(t, err, ErrCorrupt)
}

// TestZipBombRejected checks the decompressed-size guard for every codec.
func TestZipBombRejected(t *testing.T) {
	oldRatio, oldSlack := MaxDecompressRatio, MaxDecompressSlack
	t.Cleanup(func() { MaxDecompressRatio, MaxDecompressSlack = oldRatio, oldSlack })
	MaxDecompressRatio, MaxDecompressSlack = 4, 1024
	zeros := make([]Record, 1)
	zeros[0] = Record{Offset: 0, Timestamp: 0, Value: make([]byte, 200000)}
	for _, c := range allCodecs[1:] {
		t.Run(c.String(), func(t *testing.T) {
			raw := mustEncode(t, c, zeros)
			b, err := Parse(raw)
			require.NoError(t, err)
			require.NoError(t, b.Verify())
			_, err = b.Records(nil)
			require.ErrorIs(t, err, ErrCorrupt)
		})
	}
}

func TestKlauspostGzipReaderPoolReuse(t *testing.T) {
	// The pooled reader must not leak state between calls (bad then good).
	_, err := gunzip(nil, []byte{0x1f, 0x8b, 8, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff}, 100)
	require.Error(t, err)
	var buf bytes.Buffer
	w := kgzip.NewWriter(&buf)
	_, _ = w.Write([]byte("ok"))
	require.NoError(t, w.Close())
	got, err := gunzip(nil, buf.Bytes(), 100)
	require.NoError(t, err)
	assert.Equal(t, "ok", string(got))
	assert.False(t, errors.Is(err, ErrCorrupt))
}

// TestLZ4TinyBlocksDoNotAllocatePerBlock guards against allocating the BD
// maximum (up to 4 MiB) for every block of a stream of tiny blocks.
func TestLZ4TinyBlocksDoNotAllocatePerBlock(t *testing.T) {
	const blocks = 5000
	frame := []byte{0x04, 0x22, 0x4D, 0x18, 0x60, 0x70, 0}
	frame[6] = byte(xxh32(frame[4:6], 0) >> 8)
	for i := 0; i < blocks; i++ {
		frame = append(frame, 2, 0, 0, 0, 0x10, 'a') // one literal
	}
	frame = append(frame, 0, 0, 0, 0)
	var got []byte
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	got, err := unlz4(nil, frame, decompressLimit(len(frame)), false)
	runtime.ReadMemStats(&after)
	require.NoError(t, err)
	assert.Equal(t, bytes.Repeat([]byte("a"), blocks), got)
	assert.Less(t, after.TotalAlloc-before.TotalAlloc, uint64(64<<20), "allocated bytes")
}
