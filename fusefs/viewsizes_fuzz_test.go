package fusefs

import (
	"encoding/binary"
	"hash/crc32"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

// viewSizesBytes builds a topicfs-view-sizes file around an arbitrary
// table: magic and version, blob bytes, the table, and a footer whose table
// position, length, count and CRC are right, so the fuzzer reaches the
// entry decoding (random bytes would almost never pass the CRC).
func viewSizesBytes(blobs, toc []byte, count uint32) []byte {
	b := append([]byte(viewSizesMagic), binary.LittleEndian.AppendUint32(nil, viewSizesVersion)...)
	b = append(b, blobs...)
	tocOff := len(b)
	b = append(b, toc...)
	b = binary.LittleEndian.AppendUint64(b, uint64(tocOff))
	b = binary.LittleEndian.AppendUint32(b, uint32(len(toc)))
	b = binary.LittleEndian.AppendUint32(b, count)
	b = binary.LittleEndian.AppendUint32(b, crc32.Checksum(toc, crcTable))
	b = append(b, viewSizesMagic...)
	return binary.LittleEndian.AppendUint32(b, viewSizesVersion)
}

// tocEntry encodes one table entry as writeFile does.
func tocEntry(path, format string, e savedEntry) []byte {
	str := func(b []byte, s string) []byte {
		return append(binary.LittleEndian.AppendUint16(b, uint16(len(s))), s...)
	}
	b := str(str(nil, path), format)
	for _, v := range []uint64{uint64(e.id.size), e.id.inode, uint64(e.id.mtimeNs), e.abHash, uint64(e.rendered)} {
		b = binary.LittleEndian.AppendUint64(b, v)
	}
	b = binary.LittleEndian.AppendUint32(b, e.cps)
	b = binary.LittleEndian.AppendUint64(b, uint64(e.blobOff))
	b = binary.LittleEndian.AppendUint32(b, e.blobLen)
	return binary.LittleEndian.AppendUint32(b, e.blobCRC)
}

// FuzzReadViewSizes reads arbitrary topicfs-view-sizes files: the raw
// bytes, and the same bytes as blobs and table of a file with a valid
// footer. readViewSizes must never panic, and every entry it accepts must
// be usable without trusting it further: its blob lies inside the file
// before the table, and its checkpoint count fits in its blob (each
// checkpoint after the first takes at least two bytes), so reading it
// allocates no more than the file holds.
func FuzzReadViewSizes(f *testing.F) {
	e := savedEntry{id: fileID{size: 4096, inode: 7, mtimeNs: 1}, rendered: 100, cps: 2, blobOff: 8, blobLen: 2}
	f.Add([]byte{}, []byte{1, 1}, tocEntry("t-0/00000000000000000000.log", "plain", e), uint32(1))
	e.cps, e.blobLen = 0, 0
	f.Add([]byte{}, []byte{}, tocEntry("t-0/0.log", "json", e), uint32(1))
	f.Add([]byte{}, []byte{}, []byte{}, uint32(0))
	e.blobOff, e.blobLen = 1<<62, 1<<31
	f.Add([]byte{}, []byte{}, tocEntry("x", "y", e), uint32(1))
	e.blobOff = 1<<63 - 1<<30 // blobOff+blobLen overflows
	f.Add([]byte{}, []byte{}, tocEntry("x", "y", e), uint32(1))
	e.blobOff, e.blobLen, e.cps = 8, 2, 1<<32-1 // a count no blob can hold
	f.Add([]byte{}, []byte{1, 1}, tocEntry("x", "y", e), uint32(1))
	f.Fuzz(func(t *testing.T, raw, blobs, toc []byte, count uint32) {
		path := filepath.Join(t.TempDir(), ViewSizesFile)
		for i, data := range [][]byte{raw, viewSizesBytes(blobs, toc, count)} {
			require.NoError(t, os.WriteFile(path, data, 0o644))
			file, err := os.Open(path)
			require.NoError(t, err)
			saved, _ := readViewSizes(file)
			tocOff := int64(len(data)) // the raw file: at least inside it
			if i == 1 {
				tocOff = int64(8 + len(blobs))
			}
			for p, es := range saved {
				for _, e := range es {
					require.GreaterOrEqual(t, e.blobOff, int64(8), "entry %q", p)
					require.LessOrEqual(t, e.blobOff, tocOff-int64(e.blobLen), "entry %q: blob of %d bytes at %d, the table starts at %d", p, e.blobLen, e.blobOff, tocOff)
					require.LessOrEqual(t, int64(e.cps), int64(e.blobLen)/2+1, "entry %q: %d checkpoints in a %d-byte blob", p, e.cps, e.blobLen)
				}
			}
			require.NoError(t, file.Close())
		}
	})
}
