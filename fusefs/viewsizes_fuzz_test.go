package fusefs

import (
	"bytes"
	"context"
	"encoding/binary"
	"github.com/topicfs/topicfs/backend"
	"github.com/topicfs/topicfs/backend/local"
	"hash/crc32"
	"log/slog"
	"math"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/topicfs/topicfs/engine"
	"github.com/topicfs/topicfs/engine/vfs"
)

// rawEntry is a table entry written as given (no field computed), so a
// test can write what a damaged or hostile file holds with valid CRCs.
type rawEntry struct {
	path, format         string
	size, inode, mtimeNs int64
	abHash               uint64
	rendered             int64
	cps                  uint32
	blobOff              int64
	blobLen, blobCRC     uint32
	blob                 []byte // written at blobOff when set (blobOff, blobLen, blobCRC then computed)
}

// rawViewSizes encodes a ViewSizesFile of entries: their blobs, the table
// and a footer with the right CRC and table position.
func rawViewSizes(entries []rawEntry) []byte {
	out := []byte(viewSizesMagic)
	out = binary.LittleEndian.AppendUint32(out, viewSizesVersion)
	for i := range entries {
		if e := &entries[i]; e.blob != nil {
			e.blobOff, e.blobLen, e.blobCRC = int64(len(out)), uint32(len(e.blob)), crc32.Checksum(e.blob, crcTable)
			out = append(out, e.blob...)
		}
	}
	var toc []byte
	for _, e := range entries {
		toc = binary.LittleEndian.AppendUint16(toc, uint16(len(e.path)))
		toc = append(toc, e.path...)
		toc = binary.LittleEndian.AppendUint16(toc, uint16(len(e.format)))
		toc = append(toc, e.format...)
		for _, x := range []uint64{uint64(e.size), uint64(e.inode), uint64(e.mtimeNs), e.abHash, uint64(e.rendered)} {
			toc = binary.LittleEndian.AppendUint64(toc, x)
		}
		toc = binary.LittleEndian.AppendUint32(toc, e.cps)
		toc = binary.LittleEndian.AppendUint64(toc, uint64(e.blobOff))
		toc = binary.LittleEndian.AppendUint32(toc, e.blobLen)
		toc = binary.LittleEndian.AppendUint32(toc, e.blobCRC)
	}
	tocOff := len(out)
	out = append(out, toc...)
	out = binary.LittleEndian.AppendUint64(out, uint64(tocOff))
	out = binary.LittleEndian.AppendUint32(out, uint32(len(toc)))
	out = binary.LittleEndian.AppendUint32(out, uint32(len(entries)))
	out = binary.LittleEndian.AppendUint32(out, crc32.Checksum(toc, crcTable))
	out = append(out, viewSizesMagic...)
	return binary.LittleEndian.AppendUint32(out, viewSizesVersion)
}

// checkpointBlob encodes checkpoints 1.. of cps as the writer does.
func checkpointBlob(deltas ...uint64) []byte {
	var b []byte
	for _, d := range deltas {
		b = binary.AppendUvarint(b, d)
	}
	return b
}

// decodeAll decodes every entry of a ViewSizesFile held in data, and its
// index, checking what comes back: it is what a mount reads of the file.
func decodeAll(t *testing.T, data []byte) {
	r := bytes.NewReader(data)
	saved, err := decodeViewSizes(r, int64(len(data)))
	if err != nil {
		return
	}
	for path, es := range saved {
		for _, e := range es {
			require.GreaterOrEqual(t, e.rendered, int64(0), path)
			require.GreaterOrEqual(t, e.id.size, int64(0), path)
			require.LessOrEqual(t, e.blobOff+int64(e.blobLen), int64(len(data)), path)
			if e.cps == 0 {
				continue
			}
			// The blob as read, CRC or not: decodeIndex checks what it
			// decodes whatever the bytes.
			blob := make([]byte, e.blobLen)
			if _, err := r.ReadAt(blob, e.blobOff); err != nil {
				continue
			}
			cps, err := decodeIndex(blob, e)
			if err != nil {
				continue
			}
			require.Len(t, cps, int(e.cps))
			require.Equal(t, checkpoint{}, cps[0])
			for i := 1; i < len(cps); i++ {
				require.Greater(t, cps[i].rpos, cps[i-1].rpos)
				require.Greater(t, cps[i].fpos, cps[i-1].fpos)
				require.LessOrEqual(t, cps[i].rpos, e.rendered)
				require.Less(t, cps[i].fpos, e.id.size)
			}
		}
	}
}

// hostileEntries are tables a file with valid CRCs may hold, each wrong
// in one length or position.
func hostileEntries() map[string][]rawEntry {
	ok := rawEntry{path: "t-0/00000000000000000000.log", format: "json", size: 1 << 20, inode: 7, mtimeNs: 9, rendered: 3 << 20, cps: 3,
		blob: checkpointBlob(100, 200, 100, 200)}
	with := func(f func(e *rawEntry)) []rawEntry {
		e := ok
		f(&e)
		return []rawEntry{e}
	}
	return map[string][]rawEntry{
		"valid":                  {ok},
		"huge checkpoint count":  with(func(e *rawEntry) { e.cps = math.MaxUint32 }),
		"negative rendered":      with(func(e *rawEntry) { e.rendered = -1 }),
		"negative size":          with(func(e *rawEntry) { e.size = -5 }),
		"rendered wraps":         with(func(e *rawEntry) { e.blob = checkpointBlob(math.MaxUint64, 200, 100, 200) }),
		"file position wraps":    with(func(e *rawEntry) { e.blob = checkpointBlob(100, math.MaxUint64-50, 100, 200) }),
		"past the rendered end":  with(func(e *rawEntry) { e.rendered = 150 }),
		"past the file end":      with(func(e *rawEntry) { e.size = 250 }),
		"more checkpoints":       with(func(e *rawEntry) { e.cps = 2 }),
		"fewer checkpoints":      with(func(e *rawEntry) { e.cps = 4 }),
		"a zero delta":           with(func(e *rawEntry) { e.blob = checkpointBlob(100, 200, 0, 200) }),
		"a truncated varint":     with(func(e *rawEntry) { e.blob = []byte{0x80, 0x80} }),
		"blob offset wraps":      with(func(e *rawEntry) { e.blob, e.blobOff, e.blobLen = nil, math.MaxInt64-3, 100 }),
		"blob past the table":    with(func(e *rawEntry) { e.blob, e.blobOff, e.blobLen = nil, 8, 1<<30 }),
		"blob without an index":  with(func(e *rawEntry) { e.cps = 0 }),
		"index of an empty file": with(func(e *rawEntry) { e.size = 0 }),
	}
}

// TestSavedViewSizesChecked: every length and position of a saved file
// is checked before use; one that does not add up makes the file (or the
// index) unusable, never a huge allocation or a checkpoint out of range.
func TestSavedViewSizesChecked(t *testing.T) {
	for name, entries := range hostileEntries() {
		t.Run(name, func(t *testing.T) {
			data := rawViewSizes(entries)
			r := bytes.NewReader(data)
			saved, err := decodeViewSizes(r, int64(len(data)))
			if name == "valid" {
				require.NoError(t, err)
			}
			if err != nil {
				return
			}
			es := saved[entries[0].path]
			require.Len(t, es, 1)
			blob, err := readBlob(r, es[0])
			require.NoError(t, err)
			cps, err := decodeIndex(blob, es[0])
			if name == "valid" {
				require.NoError(t, err)
				assert.Equal(t, []checkpoint{{0, 0}, {100, 200}, {200, 400}}, cps)
				return
			}
			require.Error(t, err, "%+v", cps)
		})
	}
}

// TestHostileSavedIndexNeverCrashes: a saved file that matches a segment
// (same inode, size, mtime) but whose lengths and checkpoints are wrong
// (checkpoints inside batches, a rendered length too short or too long)
// gives wrong sizes or read errors, never a crash, and a mount measures
// afresh once the segment changes.
func TestHostileSavedIndexNeverCrashes(t *testing.T) {
	cfg := engine.DefaultConfig()
	cfg.MaxMessageBytes = 4 << 20
	data := t.TempDir()
	d, err := engine.OpenLogDir(vfs.OS, data, engine.LogDirOptions{Defaults: cfg})
	require.NoError(t, err)
	defer d.Close()
	tp, err := d.CreateTopic("h", 1)
	require.NoError(t, err)
	p, err := tp.Partition(0)
	require.NoError(t, err)
	recs := boundaryLog(t, p, 300<<10)
	want := renderAll(viewFormat{}, recs, 0)
	seg := p.Snapshot()
	logPath := seg.Segments[0].LogPath()
	seg.Release()
	id, ok := statID(vfs.OS, logPath)
	require.True(t, ok)
	rel, err := filepath.Rel(data, logPath)
	require.NoError(t, err)
	for _, rendered := range []int64{0, 10, int64(len(want)), int64(len(want)) + 1000, math.MaxInt64 / 4} {
		for _, fdelta := range []uint64{1, 13, 150, uint64(id.size) - 1} {
			e := rawEntry{path: rel, format: viewFormat{}.key(), size: id.size, inode: int64(id.inode), mtimeNs: id.mtimeNs,
				rendered: rendered, cps: 2, blob: checkpointBlob(uint64(max(rendered/2, 1)), fdelta)}
			if rendered == 0 {
				e.cps, e.blob = 0, nil
			}
			require.NoError(t, os.WriteFile(filepath.Join(data, ViewSizesFile), rawViewSizes([]rawEntry{e}), 0o644))
			f := newFsys(local.New(d), Options{Logger: slog.New(slog.DiscardHandler), ReadOnly: true})
			ps := newPartState(f, asPart(p))
			for _, from := range []int64{0, recs[3].Offset} {
				st, err := newViewState(context.Background(), ps, viewFormat{}, snapshotFrom(ps.p, backend.FromStart), func(*backend.Snapshot) (int64, error) { return from, nil })
				if err != nil {
					continue // EIO: the saved index points inside a batch
				}
				size := st.size()
				for _, off := range []int64{0, size / 3, size / 2, size - 1, size + 5} {
					var c cursor
					buf := make([]byte, 64<<10)
					for o := off; o >= 0 && o < size; {
						n, err := st.read(context.Background(), &c, buf, o)
						if err != nil || n == 0 {
							break
						}
						o += int64(n)
					}
					c.rd.free()
				}
				st.release()
			}
			f.sizes.close()
		}
	}
}

// wrapTable makes a ViewSizesFile of blobs and a table of count entries
// with a valid footer and table CRC, so the fuzzer reaches the entries.
func wrapTable(blobs, toc []byte, count uint32) []byte {
	out := append([]byte(viewSizesMagic), binary.LittleEndian.AppendUint32(nil, viewSizesVersion)...)
	out = append(out, blobs...)
	tocOff := len(out)
	out = append(out, toc...)
	out = binary.LittleEndian.AppendUint64(out, uint64(tocOff))
	out = binary.LittleEndian.AppendUint32(out, uint32(len(toc)))
	out = binary.LittleEndian.AppendUint32(out, count)
	out = binary.LittleEndian.AppendUint32(out, crc32.Checksum(toc, crcTable))
	out = append(out, viewSizesMagic...)
	return binary.LittleEndian.AppendUint32(out, viewSizesVersion)
}

// splitViewSizes is the inverse of wrapTable for a well-formed file.
func splitViewSizes(data []byte) (blobs, toc []byte, count uint32) {
	foot := data[len(data)-viewSizesFooter:]
	tocOff := int(binary.LittleEndian.Uint64(foot))
	return data[8:tocOff], data[tocOff : len(data)-viewSizesFooter], binary.LittleEndian.Uint32(foot[12:])
}

// FuzzViewSizesFile: whatever bytes the saved view-sizes file holds,
// decoding its table and its indexes never panics, never allocates more
// than the file's size, and what it accepts is consistent. raw is a whole
// file; blobs, toc and count make one with valid CRCs around them (the
// fuzzer could not reach the entries otherwise).
func FuzzViewSizesFile(f *testing.F) {
	f.Add([]byte("TFVS"), []byte{}, []byte{}, uint32(0))
	f.Fuzz(func(t *testing.T, raw, blobs, toc []byte, count uint32) {
		decodeAll(t, raw)
		decodeAll(t, wrapTable(blobs, toc, count))
	})
}
