package record

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"sync"

	"github.com/klauspost/compress/gzip"
	"github.com/klauspost/compress/zstd"
)

// Compression framing per codec (docs/FORMATS.md §3). The compressed bytes
// cover only the records region: a v2 batch from byte 61, or a legacy
// wrapper's value.
//
//	gzip   RFC 1952 members (java.util.zip.GZIPOutputStream); concatenated
//	       members are accepted on read, trailing garbage after a member is
//	       ignored as GZIPInputStream does.
//	snappy xerial SnappyOutputStream framing (snappy.go); raw block on read too.
//	lz4    LZ4 frame as Kafka's Lz4BlockOutputStream writes it (lz4.go).
//	zstd   RFC 8878 frames; one or more accepted on read (magic 2 only).

// Zip-bomb guard: decompressing n bytes may produce at most
// MaxDecompressRatio*n + MaxDecompressSlack bytes, else ErrCorrupt. They are
// package settings; change them only before use (not concurrently).
var (
	MaxDecompressRatio = 256
	MaxDecompressSlack = 16 << 20
)

// decompressLimit is the largest decompressed size accepted for n bytes.
func decompressLimit(n int) int {
	l := int64(MaxDecompressRatio)*int64(n) + int64(MaxDecompressSlack)
	if l > 1<<31-1 {
		l = 1<<31 - 1
	}
	return int(l)
}

// errTooLarge is wrapped with ErrCorrupt when the limit is hit.
func errTooLarge(c Codec, n, limit int) error {
	return fmt.Errorf("%w: %v data of %d bytes decompresses past %d bytes", ErrCorrupt, c, n, limit)
}

// decompress returns the decompressed form of src in a fresh buffer (never
// pooled, so records may alias it). magic selects legacy quirks: the
// KAFKA-3160 lz4 header checksum is not checked for magic 0. Errors wrap
// ErrCorrupt (or ErrUnsupported for an unknown codec).
func decompress(c Codec, src []byte, magic int) ([]byte, error) {
	return decompressInto(nil, c, src, magic)
}

// decompressInto is decompress writing into out's backing array when it is
// large enough (out's contents are overwritten); it grows a new one otherwise.
func decompressInto(out []byte, c Codec, src []byte, magic int) ([]byte, error) {
	limit := decompressLimit(len(src))
	out = out[:0]
	switch c {
	case Gzip:
		return gunzip(out, src, limit)
	case Snappy:
		return unsnappy(out, src, limit)
	case LZ4:
		return unlz4(out, src, limit, magic == 0)
	case Zstd:
		return unzstd(out, src, limit)
	}
	return nil, fmt.Errorf("%w: codec %v", ErrUnsupported, c)
}

// compress appends the compressed form of src to dst.
func compress(dst []byte, c Codec, src []byte) ([]byte, error) {
	switch c {
	case Gzip:
		return appendGzip(dst, src)
	case Snappy:
		return appendSnappy(dst, src), nil
	case LZ4:
		return appendLZ4(dst, src), nil
	case Zstd:
		return appendZstd(dst, src)
	case None:
		return append(dst, src...), nil
	}
	return dst, fmt.Errorf("%w: codec %v", ErrUnsupported, c)
}

// appendWriter is an io.Writer appending to b.
type appendWriter struct{ b []byte }

func (w *appendWriter) Write(p []byte) (int, error) {
	w.b = append(w.b, p...)
	return len(p), nil
}

type gzipWriter struct {
	zw *gzip.Writer
	aw appendWriter
}

var gzipWriters = sync.Pool{New: func() any {
	g := &gzipWriter{}
	// Kafka's default gzip level is Deflater.DEFAULT_COMPRESSION (6).
	g.zw, _ = gzip.NewWriterLevel(&g.aw, gzip.DefaultCompression)
	return g
}}

// appendGzip appends one gzip member holding src.
func appendGzip(dst, src []byte) ([]byte, error) {
	g := gzipWriters.Get().(*gzipWriter)
	g.aw.b = dst
	g.zw.Reset(&g.aw)
	_, err := g.zw.Write(src)
	if err == nil {
		err = g.zw.Close()
	}
	out := g.aw.b
	g.aw.b = nil
	gzipWriters.Put(g)
	if err != nil {
		return dst, fmt.Errorf("record: gzip: %w", err)
	}
	return out, nil
}

var gzipReaders sync.Pool // of *gzip.Reader

// gunzip decompresses concatenated gzip members.
func gunzip(out, src []byte, limit int) ([]byte, error) {
	br := bytes.NewReader(src)
	var zr *gzip.Reader
	var err error
	if p := gzipReaders.Get(); p != nil {
		zr = p.(*gzip.Reader)
		err = zr.Reset(br)
	} else {
		zr, err = gzip.NewReader(br)
	}
	if err != nil {
		if zr != nil {
			gzipReaders.Put(zr)
		}
		return nil, fmt.Errorf("%w: gzip: %w", ErrCorrupt, err)
	}
	defer gzipReaders.Put(zr)
	if cap(out) == 0 {
		out = make([]byte, 0, min(4*len(src)+512, limit+1))
	}
	for {
		zr.Multistream(false)
		if out, err = readAllLimit(zr, out, limit); err != nil {
			if errors.Is(err, errLimit) {
				return nil, errTooLarge(Gzip, len(src), limit)
			}
			return nil, fmt.Errorf("%w: gzip: %w", ErrCorrupt, err)
		}
		// Another member follows only if a gzip header does; anything else
		// is ignored, as GZIPInputStream ignores a malformed next header.
		rest := src[len(src)-br.Len():]
		if len(rest) < 2 || rest[0] != 0x1f || rest[1] != 0x8b {
			return out, nil
		}
		if err := zr.Reset(br); err != nil {
			return out, nil
		}
	}
}

var errLimit = errors.New("decompression limit")

// readAllLimit appends everything r yields to out, failing with errLimit
// once more than limit bytes are in out.
func readAllLimit(r io.Reader, out []byte, limit int) ([]byte, error) {
	for {
		if len(out) == cap(out) {
			if len(out) > limit {
				return out, errLimit
			}
			n := min(2*cap(out)+4096, limit+1)
			if n <= cap(out) {
				n = cap(out) + 1
			}
			grown := make([]byte, len(out), n)
			copy(grown, out)
			out = grown
		}
		n, err := r.Read(out[len(out):cap(out)])
		out = out[:len(out)+n]
		if len(out) > limit {
			return out, errLimit
		}
		if err == io.EOF {
			return out, nil
		}
		if err != nil {
			return out, err
		}
	}
}

// zstd: a standard frame without checksum, as zstd-jni's ZstdOutputStream
// writes. Kafka uses level 3 (klauspost's SpeedDefault); we use SpeedFastest
// (level 1 equivalent): encoding is much faster for slightly larger batches
// (docs/PERFORMANCE.md, engine append), and any zstd reader decodes either.
// The window keeps its default size. One Encoder and one Decoder are
// shared: EncodeAll and DecodeAll may be called concurrently.
var zstdEncoder = sync.OnceValue(func() *zstd.Encoder {
	e, err := zstd.NewWriter(nil,
		zstd.WithEncoderLevel(zstd.SpeedFastest),
		zstd.WithEncoderCRC(false),
		zstd.WithZeroFrames(true))
	if err != nil {
		panic(err) // only on invalid options
	}
	return e
})

// zstdMaxWindow bounds the window a frame may ask for (level 22 uses 128 MiB).
const zstdMaxWindow = 128 << 20

var zstdDecoder = sync.OnceValue(func() *zstd.Decoder {
	d, err := zstd.NewReader(nil,
		zstd.WithDecoderConcurrency(0),
		zstd.WithDecodeAllCapLimit(true),
		zstd.WithDecoderMaxWindow(zstdMaxWindow))
	if err != nil {
		panic(err) // only on invalid options
	}
	return d
})

func appendZstd(dst, src []byte) ([]byte, error) {
	return zstdEncoder().EncodeAll(src, dst), nil
}

// unzstd decodes one or more zstd frames. DecodeAll is bounded by the
// capacity it is given; it starts from the frame's content size when known
// and grows up to limit.
func unzstd(scratch, src []byte, limit int) ([]byte, error) {
	size := 4*len(src) + 4096
	var h zstd.Header
	if h.Decode(src) == nil && h.HasFCS && h.FrameContentSize < uint64(limit) {
		size = int(h.FrameContentSize) + 64
	}
	for {
		size = min(size, limit)
		buf := scratch[:0:min(cap(scratch), limit)]
		if cap(buf) < size {
			buf = make([]byte, 0, size)
		} else {
			size = cap(buf)
		}
		scratch = nil
		out, err := zstdDecoder().DecodeAll(src, buf)
		if err == nil {
			return out, nil
		}
		if !errors.Is(err, zstd.ErrDecoderSizeExceeded) {
			return nil, fmt.Errorf("%w: zstd: %w", ErrCorrupt, err)
		}
		if size >= limit {
			return nil, errTooLarge(Zstd, len(src), limit)
		}
		size *= 4
	}
}
