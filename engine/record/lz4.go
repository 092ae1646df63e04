package record

import (
	"encoding/binary"
	"fmt"
	"math/bits"
	"sync"

	"github.com/pierrec/lz4/v4"
)

// LZ4 as Kafka writes it (Lz4BlockOutputStream), an LZ4 frame:
//
//	+-------------+-----+----+----+--------------------------------+-------------+
//	| 04 22 4D 18 | FLG | BD | HC | blocks ...                     | 00 00 00 00 |
//	+-------------+-----+----+----+--------------------------------+-------------+
//	  magic (LE)   0x60  0x40       block: size u32 LE | data        end mark
//
// FLG 0x60: version 01, independent blocks, no block checksum, no content
// size, no content checksum. BD 0x40: 64 KiB maximum block. HC is
// (XXH32(FLG, BD; seed 0) >> 8) & 0xFF. A block size with the high bit set
// (0x80000000) holds its data uncompressed; Kafka stores a block raw when it
// does not compress to less than its input.
//
// Reader rules: magic; FLG version 01, block independence, reserved bits 0; BD
// reserved bits 0 and a block size id of 4-7; an 8-byte content size is
// skipped; HC is checked except for magic 0 (KAFKA-3160: old clients hashed
// magic+FLG+BD, so Kafka skips the check for v0); block checksums are verified
// when flagged; a block larger than the BD maximum fails; the content checksum
// is read but not verified. A missing end mark at the end of the data and
// bytes after the frame are tolerated.
const (
	lz4Magic         = 0x184D2204
	lz4FLG           = 0x60
	lz4BD            = 0x40
	lz4BlockMax      = 64 << 10
	lz4Uncompressed  = 0x80000000
	lz4FlgVersion    = 0xC0
	lz4FlgIndep      = 0x20
	lz4FlgBlockSum   = 0x10
	lz4FlgContentSz  = 0x08
	lz4FlgContentSum = 0x04
	lz4FlgReserved   = 0x03
	lz4BDReserved    = 0x8F
)

// lz4HC is the header checksum of Kafka's FLG/BD pair.
var lz4HC = byte(xxh32([]byte{lz4FLG, lz4BD}, 0) >> 8)

// Kafka uses lz4-java's fastest compressor, i.e. LZ4_compress_default; pierrec's
// CompressorCCompat produces the same blocks as the C implementation.
var lz4Compressors = sync.Pool{New: func() any { return new(lz4.CompressorCCompat) }}

// appendLZ4 appends the Kafka LZ4 frame of src.
func appendLZ4(dst, src []byte) []byte {
	dst = append(dst, 0x04, 0x22, 0x4D, 0x18, lz4FLG, lz4BD, lz4HC)
	c := lz4Compressors.Get().(*lz4.CompressorCCompat)
	for len(src) > 0 {
		blk := src[:min(len(src), lz4BlockMax)]
		src = src[len(blk):]
		bound := lz4.CompressBlockBound(len(blk))
		dst = grow(dst, 4+bound)
		n := len(dst)
		dst = dst[:n+4]
		k, err := c.CompressBlock(blk, dst[n+4:n+4+bound])
		if err != nil || k <= 0 || k >= len(blk) {
			binary.LittleEndian.PutUint32(dst[n:], uint32(len(blk))|lz4Uncompressed)
			dst = append(dst[:n+4], blk...)
			continue
		}
		binary.LittleEndian.PutUint32(dst[n:], uint32(k))
		dst = dst[:n+4+k]
	}
	lz4Compressors.Put(c)
	return append(dst, 0, 0, 0, 0)
}

// unlz4 decodes one LZ4 frame; skipHC skips the header checksum check.
func unlz4(out, src []byte, limit int, skipHC bool) ([]byte, error) {
	p, maxBlock, blockSum, err := lz4FrameDescriptor(src, skipHC)
	if err != nil {
		return nil, err
	}
	if cap(out) == 0 {
		out = make([]byte, 0, min(4*len(src), limit))
	}
	for p < len(src) {
		if len(src)-p < 4 {
			return nil, fmt.Errorf("%w: lz4: %d trailing bytes", ErrCorrupt, len(src)-p)
		}
		size := binary.LittleEndian.Uint32(src[p:])
		p += 4
		if size == 0 {
			break // end mark; a content checksum and anything after it are ignored
		}
		n := int(size &^ lz4Uncompressed)
		if n > maxBlock {
			return nil, fmt.Errorf("%w: lz4: block of %d bytes > max %d", ErrCorrupt, n, maxBlock)
		}
		need := n
		if blockSum {
			need += 4
		}
		if len(src)-p < need {
			return nil, fmt.Errorf("%w: lz4: block of %d bytes, %d left", ErrCorrupt, n, len(src)-p)
		}
		blk := src[p : p+n]
		if blockSum && xxh32(blk, 0) != binary.LittleEndian.Uint32(src[p+n:]) {
			return nil, fmt.Errorf("%w: lz4: block checksum mismatch", ErrCorrupt)
		}
		p += need
		if size&lz4Uncompressed != 0 {
			if n > limit-len(out) {
				return nil, errTooLarge(LZ4, len(src), limit)
			}
			out = append(out, blk...)
			continue
		}
		// Room for a whole block; out grows geometrically (never past
		// limit), so a stream of tiny blocks does not allocate per block.
		room := min(maxBlock, limit-len(out))
		if cap(out)-len(out) < room {
			grown := make([]byte, len(out), min(max(2*cap(out), len(out)+room), limit))
			copy(grown, out)
			out = grown
		}
		l := len(out)
		k, err := lz4.UncompressBlock(blk, out[l:l+room])
		if err != nil {
			if room < maxBlock {
				return nil, errTooLarge(LZ4, len(src), limit)
			}
			return nil, fmt.Errorf("%w: lz4: %w", ErrCorrupt, err)
		}
		out = out[:l+k]
	}
	return out, nil
}

// lz4FrameDescriptor checks the magic and frame descriptor at the start of
// the LZ4 frame src (skipHC skips its header checksum) and returns where
// the first block begins, the largest block the frame allows and whether
// blocks carry a checksum.
func lz4FrameDescriptor(src []byte, skipHC bool) (p, maxBlock int, blockSum bool, err error) {
	if len(src) < 7 {
		return 0, 0, false, fmt.Errorf("%w: lz4: frame of %d bytes", ErrCorrupt, len(src))
	}
	if binary.LittleEndian.Uint32(src) != lz4Magic {
		return 0, 0, false, fmt.Errorf("%w: lz4: bad magic %x", ErrCorrupt, src[:4])
	}
	flg, bd := src[4], src[5]
	if flg&lz4FlgVersion != 0x40 || flg&lz4FlgIndep == 0 || flg&lz4FlgReserved != 0 {
		return 0, 0, false, fmt.Errorf("%w: lz4: unsupported FLG %#02x", ErrCorrupt, flg)
	}
	sizeID := (bd >> 4) & 7
	if bd&lz4BDReserved != 0 || sizeID < 4 {
		return 0, 0, false, fmt.Errorf("%w: lz4: bad BD %#02x", ErrCorrupt, bd)
	}
	maxBlock = 1 << (8 + 2*int(sizeID)) // 4: 64 KiB, 5: 256 KiB, 6: 1 MiB, 7: 4 MiB
	p = 6
	if flg&lz4FlgContentSz != 0 {
		p += 8
	}
	if len(src) < p+1 {
		return 0, 0, false, fmt.Errorf("%w: lz4: frame descriptor past the end", ErrCorrupt)
	}
	if want := byte(xxh32(src[4:p], 0) >> 8); !skipHC && src[p] != want {
		return 0, 0, false, fmt.Errorf("%w: lz4: header checksum %#02x, want %#02x", ErrCorrupt, src[p], want)
	}
	return p + 1, maxBlock, flg&lz4FlgBlockSum != 0, nil
}

// XXH32 (part of the LZ4 frame format), little-endian input words.
const (
	xxhP1 uint32 = 2654435761
	xxhP2 uint32 = 2246822519
	xxhP3 uint32 = 3266489917
	xxhP4 uint32 = 668265263
	xxhP5 uint32 = 374761393
)

// xxh32 is the 32-bit xxHash of b.
func xxh32(b []byte, seed uint32) uint32 {
	n := len(b)
	var h uint32
	if n >= 16 {
		v1, v2, v3, v4 := seed+xxhP1+xxhP2, seed+xxhP2, seed, seed-xxhP1
		for len(b) >= 16 {
			v1 = xxhRound(v1, binary.LittleEndian.Uint32(b))
			v2 = xxhRound(v2, binary.LittleEndian.Uint32(b[4:]))
			v3 = xxhRound(v3, binary.LittleEndian.Uint32(b[8:]))
			v4 = xxhRound(v4, binary.LittleEndian.Uint32(b[12:]))
			b = b[16:]
		}
		h = bits.RotateLeft32(v1, 1) + bits.RotateLeft32(v2, 7) + bits.RotateLeft32(v3, 12) + bits.RotateLeft32(v4, 18)
	} else {
		h = seed + xxhP5
	}
	h += uint32(n)
	for len(b) >= 4 {
		h += binary.LittleEndian.Uint32(b) * xxhP3
		h = bits.RotateLeft32(h, 17) * xxhP4
		b = b[4:]
	}
	for _, c := range b {
		h += uint32(c) * xxhP5
		h = bits.RotateLeft32(h, 11) * xxhP1
	}
	h ^= h >> 15
	h *= xxhP2
	h ^= h >> 13
	h *= xxhP3
	h ^= h >> 16
	return h
}

func xxhRound(acc, in uint32) uint32 {
	return bits.RotateLeft32(acc+in*xxhP2, 13) * xxhP1
}
