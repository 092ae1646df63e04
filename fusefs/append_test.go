package fusefs

import (
	"context"
	"fmt"
	"github.com/topicfs/topicfs/backend"
	"github.com/topicfs/topicfs/backend/local"
	"io"
	"math/rand"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/hanwen/go-fuse/v2/fuse"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/topicfs/topicfs/engine"
	"github.com/topicfs/topicfs/engine/record"
	"github.com/topicfs/topicfs/engine/vfs"
)

// fakeLog records appends and fails them on demand.
type fakeLog struct {
	backend.Partition // only AppendEach and the names are used
	fail              error
	got               []string
}

func (f *fakeLog) Topic() string { return "fake" }
func (f *fakeLog) ID() int       { return 0 }

func (g *groupLog) Topic() string { return "group" }
func (g *groupLog) ID() int       { return 0 }

func (f *fakeLog) AppendEach(_ context.Context, groups [][]record.Record) (int64, int64, error) {
	if f.fail != nil {
		return 0, 0, f.fail
	}
	n := 0
	for _, recs := range groups {
		for _, r := range recs {
			f.got = append(f.got, string(r.Value))
		}
		n += len(recs)
	}
	return 0, int64(n) - 1, nil
}

func newTestHandle(p backend.Partition, maxMessage int64) *appendHandle {
	return &appendHandle{
		fsys: newFsys(nil, Options{}), fixed: 0, fixedLog: p,
		maxMessage: maxMessage, checkSize: true, batchSize: 1 << 20,
	}
}

func TestAppendHandleFramingAndErrors(t *testing.T) {
	p := &fakeLog{}
	h := newTestHandle(p, 100)
	write := func(s string) syscall.Errno {
		n, errno := h.write([]byte(s))
		if errno == 0 {
			require.Equal(t, uint32(len(s)), n)
		}
		return errno
	}
	require.Zero(t, write("a\nbe"))
	require.Zero(t, write("gin\nmid"))
	assert.Equal(t, []string{"a", "begin"}, p.got, "lines split across writes are whole records")

	// A failing write leaves no trace; a retry of the same bytes continues.
	p.fail = syscall.ENOSPC
	assert.Equal(t, syscall.ENOSPC, write("dle\nnext\n"))
	p.fail = nil
	require.Zero(t, write("dle\nnext\n"))
	assert.Equal(t, []string{"a", "begin", "middle", "next"}, p.got)

	// A line begun before a failed write is not committed at close.
	require.Zero(t, write("torn-"))
	p.fail = syscall.ENOSPC
	assert.Equal(t, syscall.ENOSPC, write("rest\n"))
	p.fail = nil
	assert.Zero(t, h.release())
	assert.Equal(t, []string{"a", "begin", "middle", "next"}, p.got, "no torn record")

	// A final line without '\n' is a record at release, not at flush.
	require.Zero(t, write("last"))
	assert.Zero(t, h.flush())
	assert.NotEqual(t, "last", p.got[len(p.got)-1], "FLUSH leaves a final line without '\\n'")
	assert.Zero(t, h.release())
	assert.Equal(t, "last", p.got[len(p.got)-1])

	// Too long: nothing of the line is stored (appendline.go).
	n := len(p.got)
	long := string(make([]byte, 150))
	assert.Equal(t, syscall.EMSGSIZE, write(long[:60]+"\n"+long[:20]), "a complete line over max.message.bytes")
	assert.Equal(t, syscall.EMSGSIZE, write(long), "an unterminated line that can never fit")
	assert.Equal(t, syscall.EMSGSIZE, write(long), "a retry of it")
	assert.Equal(t, syscall.EMSGSIZE, write("end\nlost\n"), "the rest of the line, whose newline ends it")
	require.Zero(t, write("ok\n"))
	assert.Equal(t, []string{"ok"}, p.got[n:])
	assert.Zero(t, h.flush())
}

func TestRecordSizeMatchesEncoder(t *testing.T) {
	for _, r := range []record.Record{
		{Value: []byte("v")},
		{Key: []byte("key"), Value: make([]byte, 300)},
		{Value: nil, Headers: []record.Header{{Key: "h", Value: []byte("x")}, {Key: "n", Value: nil}}},
		{Key: []byte{}, Value: make([]byte, 70000)},
	} {
		b, err := record.Encode(nil, record.NewBatchSpec(0), []record.Record{r})
		require.NoError(t, err)
		assert.Equal(t, int64(len(b)), recordSize(&r))
	}
}

// groupLog is a partition with AppendEach: it records every call's groups
// (one batch each) and fails them on demand.
type groupLog struct {
	backend.Partition // only AppendEach and the names are used
	mu                sync.Mutex
	fail              error
	calls             [][][]string
}

func (g *groupLog) AppendEach(_ context.Context, groups [][]record.Record) (int64, int64, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.fail != nil {
		return 0, 0, g.fail
	}
	var call [][]string
	n := 0
	for _, recs := range groups {
		var batch []string
		for _, r := range recs {
			batch = append(batch, string(r.Value))
		}
		call = append(call, batch)
		n += len(recs)
	}
	g.calls = append(g.calls, call)
	return 0, int64(n) - 1, nil
}

func (g *groupLog) setFail(err error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.fail = err
}

func (g *groupLog) values() []string {
	g.mu.Lock()
	defer g.mu.Unlock()
	var out []string
	for _, call := range g.calls {
		for _, batch := range call {
			out = append(out, batch...)
		}
	}
	return out
}

// TestAppendHandleOneEngineCallPerWrite: the full batches of one WRITE
// reach the partition in one AppendEach call, each batch ending at the
// record that reaches batch.size; what is left waits for linger.ms or
// close, or (linger.ms 0) goes in the same call.
func TestAppendHandleOneEngineCallPerWrite(t *testing.T) {
	line := func(i int) string { return fmt.Sprintf("%03d-%s", i, strings.Repeat("v", 16)) } // 20 bytes
	size := recordSize(&record.Record{Value: []byte(line(0))})
	for _, tc := range []struct {
		name   string
		linger time.Duration
		want   [][]int // per call, the batch sizes
	}{
		{"linger", time.Hour, [][]int{{4, 4}, {4, 4}, {3}}},
		{"no linger", 0, [][]int{{4, 4, 2}, {4, 4, 1}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := &groupLog{}
			h := newTestHandle(g, 1000)
			h.batchSize, h.linger = 4*size-1, tc.linger // full at the 4th record
			var want []string
			write := func(from, to int) {
				var b strings.Builder
				for i := from; i < to; i++ {
					b.WriteString(line(i) + "\n")
					want = append(want, line(i))
				}
				n, errno := h.write([]byte(b.String()))
				require.Zero(t, errno)
				require.Equal(t, uint32(b.Len()), n)
			}
			write(0, 10)
			write(10, 19)
			require.Zero(t, h.flush())
			var got [][]int
			for _, call := range g.calls {
				var sizes []int
				for _, batch := range call {
					sizes = append(sizes, len(batch))
				}
				got = append(got, sizes)
			}
			assert.Equal(t, tc.want, got)
			assert.Equal(t, want, g.values(), "every record once, in order")
		})
	}
}

// TestAppendHandleBackgroundError: with linger.ms the full batches of a
// WRITE are appended after it returns; their failure is the errno of a
// later write (at the latest the one that must wait for room) or of close,
// and nothing of the refused write is applied.
func TestAppendHandleBackgroundError(t *testing.T) {
	g := &groupLog{}
	h := newTestHandle(g, 1000)
	h.batchSize, h.linger = 1, time.Hour // every record is a full batch
	g.setFail(syscall.ENOSPC)
	refused := false
	for i := 0; i <= maxJobs && !refused; i++ {
		n, errno := h.write([]byte(fmt.Sprintf("w%d-1\nw%d-2\n", i, i)))
		if errno == syscall.ENOSPC {
			refused = true
			break
		}
		require.Zero(t, errno, "validated lines are accepted; the append runs in the background")
		require.Equal(t, uint32(10), n)
	}
	require.True(t, refused, "a background failure is a later write's errno")
	if errno := h.flush(); errno != 0 {
		assert.Equal(t, syscall.ENOSPC, errno, "what was still in flight failed too")
	}
	g.setFail(nil)
	require.Zero(t, h.flush(), "reported once")
	_, errno := h.write([]byte("kept\npart"))
	require.Zero(t, errno)
	require.Zero(t, h.release())
	assert.Equal(t, []string{"kept", "part"}, g.values(), "nothing of the failed or refused writes")

	// At close the failure of the last background append is close's.
	g.setFail(syscall.ENOSPC)
	_, errno = h.write([]byte("x\n"))
	require.Zero(t, errno)
	assert.Equal(t, syscall.ENOSPC, h.flush())
	g.setFail(nil)
	assert.Zero(t, h.flush(), "reported once")
}

// TestAppendHandleTopicLevelBatches appends keyed and keyless lines in
// random chunks through a topic-level handle on a real log, with and
// without linger.ms: every record lands once, keyed ones in Kafka's
// partition for their key, in write order per partition, in batches of
// about batch.size; keyless ones spread over the partitions.
func TestAppendHandleTopicLevelBatches(t *testing.T) {
	for _, linger := range []time.Duration{time.Hour, 0} {
		t.Run(fmt.Sprint("linger ", linger), func(t *testing.T) {
			cfg := engine.DefaultConfig()
			d, err := engine.OpenLogDir(vfs.OS, t.TempDir(), engine.LogDirOptions{Defaults: cfg})
			require.NoError(t, err)
			t.Cleanup(func() { d.Close() })
			const parts = 4
			tp, err := d.CreateTopic("t", parts)
			require.NoError(t, err)
			h := &appendHandle{
				fsys: newFsys(local.New(d), Options{}), topic: asTopic(d, tp), fixed: -1,
				lc:         lineConfig{parseKey: true, separator: "\t", nullMarker: "NULL"},
				maxMessage: 1 << 20, checkSize: true, batchSize: 2000, linger: linger,
			}
			rng := rand.New(rand.NewSource(3))
			want := map[int][]string{} // keyed values by partition, in order
			keyless := 0
			var in strings.Builder
			for i := range 20000 {
				v := fmt.Sprintf("v%d-%s", i, strings.Repeat("x", rng.Intn(60)))
				if i%5 == 0 {
					fmt.Fprintf(&in, "NULL\t%s\n", v)
					keyless++
					continue
				}
				k := fmt.Sprintf("key-%d", rng.Intn(500))
				fmt.Fprintf(&in, "%s\t%s\n", k, v)
				id := partitionForKey([]byte(k), parts)
				want[id] = append(want[id], v)
			}
			data := in.String()
			for len(data) > 0 {
				n := min(len(data), 1+rng.Intn(200<<10))
				got, errno := h.write([]byte(data[:n]))
				require.Zero(t, errno)
				require.Equal(t, uint32(n), got)
				data = data[n:]
			}
			require.Zero(t, h.flush())

			gotKeyless := 0
			for id := range parts {
				p, err := tp.Partition(id)
				require.NoError(t, err)
				r := p.NewReader(0, engine.ReaderOptions{NoPrefetch: true})
				var keyed []string
				var recs []record.Record
				for {
					b, err := r.Next()
					if err == io.EOF {
						break
					}
					require.NoError(t, err)
					recs, err = b.Records(recs[:0])
					require.NoError(t, err)
					sz := int64(record.HeaderSize)
					for i := range recs {
						sz += recordSize(&recs[i]) - record.HeaderSize
						if recs[i].Key == nil {
							gotKeyless++
							continue
						}
						assert.Equal(t, id, partitionForKey(recs[i].Key, parts))
						keyed = append(keyed, string(recs[i].Value))
					}
					assert.Less(t, sz, 2*h.batchSize, "a batch ends at batch.size")
				}
				require.NoError(t, r.Close())
				assert.Equal(t, want[id], keyed, "partition %d", id)
			}
			assert.Equal(t, keyless, gotKeyless)
		})
	}
}

// TestAppendFileBlksize: append files ask for MaxWrite-sized writes, so
// cat and cp hand over 1 MiB per write(2), one WRITE each.
func TestAppendFileBlksize(t *testing.T) {
	a := &appendNode{fsys: newFsys(nil, Options{})}
	var out fuse.AttrOut
	require.Zero(t, a.Getattr(t.Context(), nil, &out))
	assert.Equal(t, uint32(maxWrite), out.Blksize)
	assert.Equal(t, uint32(syscall.S_IFREG), out.Mode&syscall.S_IFMT)
}

// flakyLog fails AppendEach calls at random (seeded).
type flakyLog struct {
	groupLog
	rng      *rand.Rand
	failures int
}

func (f *flakyLog) AppendEach(_ context.Context, groups [][]record.Record) (int64, int64, error) {
	f.mu.Lock()
	fail := f.rng.Intn(4) == 0
	if fail {
		f.failures++
	}
	f.mu.Unlock()
	if fail {
		return 0, 0, syscall.ENOSPC
	}
	return f.groupLog.AppendEach(context.Background(), groups)
}

// TestAppendHandleRandomFailures writes whole lines in random chunks while
// the partition fails a quarter of its appends (in the background with
// linger.ms, in Write without): records appear at most once and in order,
// never from a refused write, and every failure is reported by a write or
// a close.
func TestAppendHandleRandomFailures(t *testing.T) {
	for _, linger := range []time.Duration{time.Hour, 0} {
		t.Run(fmt.Sprint("linger ", linger), func(t *testing.T) {
			f := &flakyLog{rng: rand.New(rand.NewSource(11))}
			h := newTestHandle(f, 1000)
			h.batchSize, h.linger = 200, linger
			rng := rand.New(rand.NewSource(5))
			refused := map[string]bool{}
			var order []string // every line written, in order
			errors := 0
			for i := 0; i < 3000; {
				var chunk []string
				for n := 1 + rng.Intn(40); n > 0; n-- {
					chunk = append(chunk, fmt.Sprintf("l%d-%s", i, strings.Repeat("x", rng.Intn(30))))
					i++
				}
				order = append(order, chunk...)
				data := strings.Join(chunk, "\n") + "\n"
				n, errno := h.write([]byte(data))
				if errno != 0 {
					require.Equal(t, syscall.ENOSPC, errno)
					errors++
					for _, l := range chunk {
						refused[l] = true
					}
					continue
				}
				require.Equal(t, uint32(len(data)), n)
				if rng.Intn(50) == 0 {
					if h.flush() != 0 {
						errors++
					}
				}
			}
			if h.flush() != 0 {
				errors++
			}
			got := f.values()
			assert.NotEmpty(t, got)
			assert.Positive(t, errors, "failures are reported")
			assert.LessOrEqual(t, errors, f.failures, "only failures are reported")
			pos := 0
			for _, l := range got {
				assert.False(t, refused[l], "%s was in a refused write", l)
				for pos < len(order) && order[pos] != l {
					pos++
				}
				require.Less(t, pos, len(order), "%s out of order or twice", l)
				pos++
			}
		})
	}
}

// linesGroups cuts whole lines into groups of value-only records of about
// batchBytes each, as Partition.AppendLines cuts its batches.
func linesGroups(lines []byte, batchBytes int) [][]record.Record {
	var groups [][]record.Record
	var cur []record.Record
	size := 0
	for rest := lines; len(rest) > 0; {
		i := strings.IndexByte(string(rest), '\n')
		cur = append(cur, record.Record{Timestamp: -1, Value: rest[:i:i]})
		size += int(valueRecordSize(i))
		rest = rest[i+1:]
		if size >= batchBytes || len(rest) == 0 {
			groups, cur, size = append(groups, cur), nil, 0
		}
	}
	return groups
}

func (f *fakeLog) AppendLines(_ context.Context, lines []byte, batchBytes int) (int64, int64, error) {
	return f.AppendEach(context.Background(), linesGroups(lines, batchBytes))
}

func (g *groupLog) AppendLines(_ context.Context, lines []byte, batchBytes int) (int64, int64, error) {
	return g.AppendEach(context.Background(), linesGroups(lines, batchBytes))
}

func (f *flakyLog) AppendLines(_ context.Context, lines []byte, batchBytes int) (int64, int64, error) {
	return f.AppendEach(context.Background(), linesGroups(lines, batchBytes))
}

// linesLog counts the lines calls of a real partition.
type linesLog struct {
	*local.Partition
	encoded, lines atomic.Int64
}

func (l *linesLog) AppendEncoded(e *engine.EncodedLines) (int64, int64, error) {
	l.encoded.Add(1)
	return l.Partition.AppendEncoded(e)
}

func (l *linesLog) AppendLines(_ context.Context, lines []byte, batchBytes int) (int64, int64, error) {
	l.lines.Add(1)
	return l.Partition.AppendLines(context.Background(), lines, batchBytes)
}

// TestAppendHandleLinesPath: WRITEs bringing at least batch.size of bare
// lines to a partition-level file go to the engine as lines, encoded by
// Write on an uncompressed topic and by AppendLines on a compressed one
// (after the records pending from smaller WRITEs); lines split across
// WRITEs stay whole, and a too-long line refuses its WRITE with nothing
// appended.
func TestAppendHandleLinesPath(t *testing.T) {
	for _, codec := range []string{"none", "lz4"} {
		t.Run(codec, func(t *testing.T) { testAppendHandleLinesPath(t, codec) })
	}
}

func testAppendHandleLinesPath(t *testing.T, codec string) {
	cfg := engine.DefaultConfig()
	cfg.CompressionType = codec
	part := memPartition(t, cfg)
	ll := &linesLog{Partition: &local.Partition{Partition: part}}
	h := newTestHandle(ll, 4096)
	h.checkSize = codec == "none"
	h.batchSize, h.linger = 16<<10, time.Hour

	var want []string
	var stream strings.Builder
	for i := range 20 { // small WRITEs: pending records
		l := fmt.Sprintf("small-%d", i)
		want = append(want, l)
		n, errno := h.write([]byte(l + "\n"))
		require.Zero(t, errno)
		require.Equal(t, uint32(len(l)+1), n)
	}
	for i := range 15000 {
		l := fmt.Sprintf("line-%05d-%s", i, strings.Repeat("x", i%150))
		want = append(want, l)
		stream.WriteString(l + "\n")
	}
	data := stream.String()
	for off := 0; off < len(data); { // WRITEs of 40-90 KiB and 200-250 KiB (Write encodes half, its job the rest), cut inside lines
		size := 40<<10 + off%(50<<10)
		if (off/size)%3 == 1 {
			size += 160 << 10
		}
		end := min(off+size, len(data))
		n, errno := h.write([]byte(data[off:end]))
		require.Zero(t, errno)
		require.Equal(t, uint32(end-off), n)
		off = end
	}
	if codec == "none" {
		assert.Positive(t, ll.encoded.Load(), "big WRITEs were encoded by Write")
		assert.Zero(t, ll.lines.Load())
	} else {
		assert.Positive(t, ll.lines.Load(), "big WRITEs went to AppendLines")
		assert.Zero(t, ll.encoded.Load())
	}

	if codec == "none" {
		// A line over max.message.bytes: the lines before it are taken
		// with a short count, and the write that starts with it fails,
		// taking nothing (on a compressed topic the size on disk is known
		// only after compression: the engine checks it).
		bad := "ok-1\n" + strings.Repeat("y", 5000) + "\nok-2\n" + strings.Repeat("z", 20<<10) + "\n"
		n, errno := h.write([]byte(bad))
		require.Zero(t, errno)
		require.Equal(t, uint32(len("ok-1\n")), n)
		want = append(want, "ok-1")
		_, errno = h.write([]byte(bad[n:]))
		assert.Equal(t, syscall.EMSGSIZE, errno)
	}
	_, errno := h.write([]byte("tail\nend"))
	require.Zero(t, errno)
	want = append(want, "tail", "end")
	require.Zero(t, h.release())

	got := partitionValues(t, part, func(b *record.Batch, r *record.Record) {
		if b.RecordCount > 1 && codec == "none" {
			assert.LessOrEqual(t, b.Size(), 16<<10)
		}
		require.Nil(t, r.Key)
	})
	require.Equal(t, want, got)
}

// The fakes encode nothing ahead: their lines go to AppendLines.
func (f *fakeLog) EncodeLines(*engine.EncodedLines, []byte, int) error { return engine.ErrNotEncodable }
func (g *groupLog) EncodeLines(*engine.EncodedLines, []byte, int) error {
	return engine.ErrNotEncodable
}

// TestAppendJobEncodedTurnsCompressed: the lines a WRITE left to its job
// follow the lines Write encoded even when the topic turned compressed in
// between (the encoded ones are re-encoded, the rest appended as lines).
func TestAppendJobEncodedTurnsCompressed(t *testing.T) {
	cfg := engine.DefaultConfig()
	part := memPartition(t, cfg)
	var head, tail strings.Builder
	for i := range 300 {
		fmt.Fprintf(&head, "head-%d\n", i)
		fmt.Fprintf(&tail, "tail-%d\n", i)
	}
	job := &appendJob{encoded: true, linesLog: asPart(part), linesEng: part, lines: []byte(tail.String()), batchSize: 1024}
	require.NoError(t, part.EncodeLines(&job.enc, []byte(head.String()), 1024))
	c2 := cfg
	c2.CompressionType = "lz4"
	part.SetConfig(c2)
	job.appendEncoded()
	require.NoError(t, job.err)
	got := partitionValues(t, part, func(b *record.Batch, _ *record.Record) {
		assert.Equal(t, record.LZ4, b.Codec())
	})
	want := strings.Split(strings.TrimSuffix(head.String()+tail.String(), "\n"), "\n")
	require.Equal(t, want, got)
}

// memPartition opens a fresh partition on a MemFS, closed at the end of
// the test.
func memPartition(t *testing.T, cfg engine.Config) *engine.Partition {
	t.Helper()
	part, err := engine.OpenPartition(vfs.NewMem(), "/d/t-0", "t", 0, engine.PartitionOptions{
		Config: cfg, RecoveryPoint: -1, LogStartOffset: -1, FirstDirty: -1})
	require.NoError(t, err)
	t.Cleanup(func() { part.Close() })
	return part
}

// partitionValues returns the values of every record of part in order,
// calling check with each record and its batch.
func partitionValues(t *testing.T, part *engine.Partition, check func(*record.Batch, *record.Record)) []string {
	t.Helper()
	r := part.NewReader(0, engine.ReaderOptions{})
	defer r.Close()
	var got []string
	for {
		b, err := r.Next()
		if err == io.EOF {
			return got
		}
		require.NoError(t, err)
		recs, err := b.Records(nil)
		require.NoError(t, err)
		for i := range recs {
			check(b, &recs[i])
			got = append(got, string(recs[i].Value))
		}
	}
}
