package cluster

import (
	"cmp"
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"log/slog"
	"math"
	"os"
	"path/filepath"
	"sort"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/topicfs/topicfs/backend"
	"github.com/topicfs/topicfs/engine"
	"github.com/topicfs/topicfs/engine/index"
	"github.com/topicfs/topicfs/engine/record"
	"github.com/topicfs/topicfs/engine/vfs"
)

// visible reads a snapshot as a view does: every batch of every segment
// through ReadBatch, the records in [LogStart, End), control batches
// skipped, records of aborted transactions (the segments' AbortedTxns)
// hidden.
func visible(t *testing.T, snap *backend.Snapshot) []decoded {
	t.Helper()
	aborted := map[int64][]index.AbortedTxn{}
	for _, s := range snap.Segments {
		for _, a := range s.AbortedTxns() {
			aborted[a.ProducerID] = append(aborted[a.ProducerID], a)
		}
	}
	var out []decoded
	for _, s := range snap.Segments {
		for pos := int64(0); pos < s.Size(); {
			b, err := s.ReadBatch(pos, nil)
			require.NoError(t, err)
			pos += int64(b.Size())
			for _, d := range decodeBatches(t, b.Raw) {
				hidden := false
				for _, a := range aborted[d.producer] {
					hidden = hidden || (d.txn && d.offset >= a.FirstOffset && d.offset <= a.LastOffset)
				}
				if !hidden && d.offset >= snap.Offsets.LogStart && d.offset < snap.Offsets.End {
					out = append(out, d)
				}
			}
		}
	}
	return out
}

// committed drops the records of aborted transactions.
func committed(all []sent) []sent {
	var out []sent
	for _, s := range all {
		if !s.aborted {
			out = append(out, s)
		}
	}
	return out
}

// fetchCounter counts the fetch requests the cluster answers.
func fetchCounter(tc *testCluster) *kfake.FaultHandle {
	return tc.c.Fault(kfake.Fault{Keys: []kmsg.Key{kmsg.Fetch}, Observe: true, Count: -1})
}

func quietLogger() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

func newMirror(t *testing.T, fsys vfs.FS, dir string, opts MirrorOptions) *Mirror {
	t.Helper()
	m, err := OpenMirror(fsys, dir, opts)
	require.NoError(t, err)
	t.Cleanup(func() { m.Close() })
	return m
}

func snapshot(t *testing.T, mp *MirrorPartition, src Source, from, end int64) *backend.Snapshot {
	t.Helper()
	snap, err := mp.Snapshot(context.Background(), src, from, end)
	require.NoError(t, err)
	return snap
}

// TestMirrorFetchesOnlyGrowth: the first Snapshot from the start fetches
// the partition once; after it grows, the next fetches the growth only
// (whatever broker leads by then), and one with nothing new fetches
// nothing. Every record reads back as produced.
func TestMirrorFetchesOnlyGrowth(t *testing.T) {
	tc := newTestCluster(t)
	p := tc.producer(t, "t", "none", "")
	all := produceBatches(t, p, "a", 20, 10)
	f := NewFetcher(tc.cl, FetchOptions{MaxBytes: 2 << 10})
	src := f.Partition("t", 0)
	m := newMirror(t, vfs.OS, t.TempDir(), MirrorOptions{SegmentBytes: 4 << 10, Logger: quietLogger()})
	mp, err := m.Partition("cluster-1", "t", 0)
	require.NoError(t, err)
	fetches := fetchCounter(tc)

	snap := snapshot(t, mp, src, backend.FromStart, 200)
	assert.Equal(t, backend.Offsets{LogStart: 0, End: 200}, snap.Offsets)
	checkRecords(t, all, visible(t, snap), 0)
	first := fetches.Hits()
	firstBytes := mp.Stats().FetchedBytes
	assert.Greater(t, first, 2, "several responses of 2 KiB")
	assert.Greater(t, len(snap.Segments), 2)
	snap.Release()

	tc.c.ShufflePartitionLeaders()
	all = append(all, produceBatches(t, p, "b", 2, 10)...)
	snap = snapshot(t, mp, src, backend.FromStart, 220)
	checkRecords(t, all, visible(t, snap), 0)
	grown := mp.Stats().FetchedBytes - firstBytes
	assert.LessOrEqual(t, fetches.Hits()-first, 2, "the growth is one or two fetches (a refused one after the election)")
	assert.Less(t, grown*5, firstBytes, "only the growth was fetched")
	snap.Release()

	before := fetches.Hits()
	snap = snapshot(t, mp, src, 150, 220)
	checkRecords(t, all, visible(t, snap), 150)
	assert.Equal(t, before, fetches.Hits(), "nothing new: no fetch")
	assert.Zero(t, mp.Stats().Restarts)
	snap.Release()
}

// TestMirrorOlderOffsetRestarts: a copy made for the last records (the
// cheap by-offset/-N: from HW-10) fetches about that much; a Snapshot from
// older records restarts the copy at them and fetches them, while the
// earlier snapshot still reads its own segments.
func TestMirrorOlderOffsetRestarts(t *testing.T) {
	tc := newTestCluster(t)
	p := tc.producer(t, "t", "none", "")
	all := produceBatches(t, p, "a", 30, 10)
	f := NewFetcher(tc.cl, FetchOptions{MaxBytes: 2 << 10})
	m := newMirror(t, vfs.NewMem(), "/cache", MirrorOptions{SegmentBytes: 4 << 10, Logger: quietLogger()})
	mp, err := m.Partition("c", "t", 0)
	require.NoError(t, err)
	fetches := fetchCounter(tc)

	tail := snapshot(t, mp, f.Partition("t", 0), 295, 300)
	assert.Equal(t, 1, fetches.Hits(), "the last records are one fetch")
	assert.Equal(t, int64(1), mp.Stats().Restarts, "the empty copy restarts at 295")
	holding, err := f.Fetch(context.Background(), "t", 0, 295, ReadUncommitted)
	require.NoError(t, err)
	start, end := mp.Range()
	assert.Equal(t, []int64{int64(binary.BigEndian.Uint64(holding.Batches)), 300}, []int64{start, end},
		"the copy starts at the batch holding 295")
	checkRecords(t, all, visible(t, tail), 295)

	snap := snapshot(t, mp, f.Partition("t", 0), 100, 300)
	checkRecords(t, all, visible(t, snap), 100)
	assert.Equal(t, int64(2), mp.Stats().Restarts)
	start, _ = mp.Range()
	assert.Equal(t, int64(100), start)
	checkRecords(t, all, visible(t, tail), 295) // its segments outlive the restart
	tail.Release()
	snap.Release()

	// A start past the copy's end by little: the gap is fetched, the copy
	// stays one range.
	all = append(all, produceBatches(t, p, "b", 3, 10)...)
	snap = snapshot(t, mp, f.Partition("t", 0), 320, 330)
	checkRecords(t, all, visible(t, snap), 320)
	start, end = mp.Range()
	assert.Equal(t, []int64{100, 330}, []int64{start, end})
	assert.Equal(t, int64(2), mp.Stats().Restarts)
	snap.Release()

	_, err = mp.Snapshot(context.Background(), f.Partition("t", 0), 20, 10)
	assert.ErrorIs(t, err, backend.ErrOffsetOutOfRange)
}

// TestMirrorCap: past RetentionBytes the oldest segments go, but not while
// a reader holds them; a Snapshot from records the cap dropped fetches
// them again.
func TestMirrorCap(t *testing.T) {
	tc := newTestCluster(t)
	p := tc.producer(t, "t", "none", "")
	all := produceBatches(t, p, "a", 60, 20)
	const segBytes, limit = 8 << 10, 24 << 10
	f := NewFetcher(tc.cl, FetchOptions{MaxBytes: 4 << 10})
	m := newMirror(t, vfs.NewMem(), "/cache", MirrorOptions{SegmentBytes: segBytes, RetentionBytes: limit, Logger: quietLogger()})
	mp, err := m.Partition("c", "t", 0)
	require.NoError(t, err)
	snap := snapshot(t, mp, f.Partition("t", 0), backend.FromStart, 1200)
	assert.Greater(t, mp.SizeBytes(), int64(2*limit), "a reader's range is kept whole while it reads")
	checkRecords(t, all, visible(t, snap), 0)
	// A view keeps one segment after the snapshot goes: the older ones
	// go, it and the newer ones stay.
	held := snap.Segments[len(snap.Segments)/2]
	held.Retain()
	snap.Release()
	start, end := mp.Range()
	assert.Equal(t, held.BaseOffset(), start, "deleted up to the segment the view holds")
	assert.Equal(t, int64(1200), end)
	held.Release()
	assert.LessOrEqual(t, mp.SizeBytes(), int64(limit+segBytes))
	assert.Positive(t, mp.Stats().SegmentsDeleted)
	start, _ = mp.Range()
	assert.Greater(t, start, held.BaseOffset())

	snap = snapshot(t, mp, f.Partition("t", 0), 0, 1200)
	checkRecords(t, all, visible(t, snap), 0)
	assert.Equal(t, int64(1), mp.Stats().Restarts)
	snap.Release()
}

// TestMirrorReadCommitted: a read_committed reader's end is the last
// stable offset; the copy goes past it for the ABORT marker of a
// transaction begun below it, so the aborted records stay hidden, and
// nothing at or past the end shows.
func TestMirrorReadCommitted(t *testing.T) {
	tc := newTestCluster(t)
	plain := tc.producer(t, "t", "gzip", "")
	tx1 := tc.producer(t, "t", "lz4", "tx1")
	tx2 := tc.producer(t, "t", "none", "tx2")
	var all []sent
	all = append(all, produce(t, plain, "p0", 3)...)
	all = append(all, produceTxn(t, tx1, "c1", 3, true)...)
	require.NoError(t, tx1.BeginTransaction())
	doomed := produce(t, tx1, "x", 3) // aborted below, after tx2 began
	require.NoError(t, tx2.BeginTransaction())
	open := produce(t, tx2, "open", 2)
	all = append(all, produce(t, plain, "p1", 2)...) // between: past the last stable offset
	require.NoError(t, tx1.EndTransaction(context.Background(), kgo.TryAbort))
	for _, d := range doomed {
		d.aborted, d.txn = true, true
		all = append(all, d)
	}
	sortSent(all)
	f := NewFetcher(tc.cl, FetchOptions{})
	res, err := f.Fetch(context.Background(), "t", 0, 0, ReadCommitted)
	require.NoError(t, err)
	lso, hw := res.LastStableOffset, res.HighWatermark
	require.Equal(t, open[0].offset, lso)

	m := newMirror(t, vfs.NewMem(), "/cache", MirrorOptions{SegmentBytes: 400, Logger: quietLogger()}) // the marker in a segment of its own
	mp, err := m.Partition("c", "t", 0)
	require.NoError(t, err)
	// A copy first made up to the last stable offset only.
	snap := snapshot(t, mp, stopAt{f.Partition("t", 0), lso}, 0, lso)
	snap.Release()
	snap = snapshot(t, mp, f.Partition("t", 0), 0, lso)
	var want []sent
	for _, s := range committed(all) {
		if s.offset < lso {
			want = append(want, s)
		}
	}
	checkRecords(t, want, visible(t, snap), 0)
	_, end := mp.Range()
	assert.Greater(t, end, lso, "fetched past the last stable offset for the marker")
	snap.Release()

	// read_uncommitted: up to the high watermark, the open transaction's
	// records included, the aborted ones hidden.
	snap = snapshot(t, mp, f.Partition("t", 0), 0, hw)
	want = append(committed(all), open...)
	sortSent(want)
	checkRecords(t, want, visible(t, snap), 0)
	snap.Release()
	require.NoError(t, tx2.EndTransaction(context.Background(), kgo.TryCommit))
}

func sortSent(s []sent) {
	sort.Slice(s, func(i, j int) bool { return s[i].offset < s[j].offset })
}

// stopAt is a Source whose fetches return nothing at or past end, as a
// read_committed fetch stops at the last stable offset.
type stopAt struct {
	Source
	end int64
}

func (s stopAt) Fetch(ctx context.Context, offset int64, maxBytes int32) (*FetchResult, error) {
	res, err := s.Source.Fetch(ctx, offset, maxBytes)
	if err != nil {
		return nil, err
	}
	out := *res
	out.Batches = nil
	for raw := res.Batches; len(raw) > 0; {
		size := record.LogOverhead + int(binary.BigEndian.Uint32(raw[8:]))
		if int64(binary.BigEndian.Uint64(raw)) >= s.end {
			break
		}
		out.Batches = append(out.Batches, raw[:size]...)
		raw = raw[size:]
	}
	out.HighWatermark = s.end
	return &out, nil
}

// TestMirrorTopicRecreated: a topic deleted and created again under the
// same name has another id; the copy notices at its next fetch and starts
// over with the new topic's records.
func TestMirrorTopicRecreated(t *testing.T) {
	tc := newTestCluster(t)
	p := tc.producer(t, "t", "none", "")
	old := produce(t, p, "old", 10)
	f := NewFetcher(tc.cl, FetchOptions{})
	m := newMirror(t, vfs.NewMem(), "/cache", MirrorOptions{Logger: quietLogger()})
	mp, err := m.Partition("c", "t", 0)
	require.NoError(t, err)
	snap := snapshot(t, mp, f.Partition("t", 0), 0, 10)
	checkRecords(t, old, visible(t, snap), 0)
	snap.Release()

	ctx := context.Background()
	del := kmsg.NewPtrDeleteTopicsRequest()
	del.TopicNames = []string{"t"}
	dt := kmsg.NewDeleteTopicsRequestTopic()
	dt.Topic = kmsg.StringPtr("t")
	del.Topics = append(del.Topics, dt)
	_, err = del.RequestWith(ctx, tc.cl)
	require.NoError(t, err)
	create := kmsg.NewPtrCreateTopicsRequest()
	ct := kmsg.NewCreateTopicsRequestTopic()
	ct.Topic, ct.NumPartitions, ct.ReplicationFactor = "t", 1, 3
	create.Topics = append(create.Topics, ct)
	_, err = create.RequestWith(ctx, tc.cl)
	require.NoError(t, err)
	fresh := produce(t, tc.producer(t, "t", "none", ""), "new", 15)

	snap = snapshot(t, mp, f.Partition("t", 0), 0, 15)
	checkRecords(t, fresh, visible(t, snap), 0)
	assert.Equal(t, int64(1), mp.Stats().Restarts)
	snap.Release()
}

// TestMirrorReopen: a copy closed cleanly is used again without a fetch;
// one that was not (a crash) is discarded and fetched again.
func TestMirrorReopen(t *testing.T) {
	tc := newTestCluster(t)
	all := produce(t, tc.producer(t, "t", "snappy", ""), "a", 50)
	f := NewFetcher(tc.cl, FetchOptions{})
	dir := t.TempDir()
	m, err := OpenMirror(vfs.OS, dir, MirrorOptions{Logger: quietLogger()})
	require.NoError(t, err)
	mp, err := m.Partition("c", "t", 0)
	require.NoError(t, err)
	snapshot(t, mp, f.Partition("t", 0), 0, 50).Release()
	m2, err := OpenMirror(vfs.OS, dir, MirrorOptions{Logger: quietLogger()})
	require.NoError(t, err)
	_, err = m2.Partition("c", "t", 0)
	assert.ErrorIs(t, err, engine.ErrLocked, "one process per cluster directory")
	require.NoError(t, m.Close())

	fetches := fetchCounter(tc)
	m = newMirror(t, vfs.OS, dir, MirrorOptions{Logger: quietLogger()})
	mp, err = m.Partition("c", "t", 0)
	require.NoError(t, err)
	snap := snapshot(t, mp, f.Partition("t", 0), 0, 50)
	checkRecords(t, all, visible(t, snap), 0)
	assert.Zero(t, fetches.Hits())
	snap.Release()

	// Not closed: the next open finds no marker.
	crashed := t.TempDir()
	mc, err := OpenMirror(vfs.OS, crashed, MirrorOptions{Logger: quietLogger()})
	require.NoError(t, err)
	mp, err = mc.Partition("c", "t", 0)
	require.NoError(t, err)
	snapshot(t, mp, f.Partition("t", 0), 0, 50).Release()
	mp.p.Close()          // the files as a killed process leaves them
	mc.locks["c"].Close() // the lock dies with the process
	m = newMirror(t, vfs.OS, crashed, MirrorOptions{Logger: quietLogger()})
	mp, err = m.Partition("c", "t", 0)
	require.NoError(t, err)
	start, end := mp.Range()
	assert.Equal(t, []int64{0, 0}, []int64{start, end}, "discarded")
	snap = snapshot(t, mp, f.Partition("t", 0), 0, 50)
	checkRecords(t, all, visible(t, snap), 0)
	snap.Release()
	assert.NoFileExists(t, filepath.Join(crashed, "c", "t-0", cleanFile))
}

// fakeSource is a cluster partition in memory: batches at increasing
// offsets (with gaps), served maxBytes at a time.
type fakeSource struct {
	batches  [][]byte
	start    int64
	id       [16]byte
	maxBytes int
	fetches  atomic.Int64
}

func (s *fakeSource) hw() int64 {
	if len(s.batches) == 0 {
		return s.start
	}
	b, _ := record.Parse(s.batches[len(s.batches)-1])
	return b.NextOffset()
}

func (s *fakeSource) Fetch(_ context.Context, offset int64, maxBytes int32) (*FetchResult, error) {
	s.fetches.Add(1)
	hw := s.hw()
	if offset < s.start || offset > hw {
		return nil, fmt.Errorf("%w: %d", backend.ErrOffsetOutOfRange, offset)
	}
	res := &FetchResult{NextOffset: offset, HighWatermark: hw, LastStableOffset: hw, LogStartOffset: s.start, TopicID: s.id}
	for _, raw := range s.batches {
		b, _ := record.Parse(raw)
		if b.NextOffset() <= offset {
			continue
		}
		if len(res.Batches) > 0 && len(res.Batches)+len(raw) > min(s.maxBytes, int(cmp.Or(maxBytes, math.MaxInt32))) {
			break
		}
		res.Batches = append(res.Batches, raw...)
		res.NextOffset = b.NextOffset()
	}
	return res, nil
}

func (s *fakeSource) LogStartOffset(context.Context) (int64, error) { return s.start, nil }

// fakeLog makes n groups of batches: plain ones with offset gaps after
// them, and transactions of producer 7, every third aborted.
func fakeLog(t *testing.T, n int) (batches [][]byte, want []sent) {
	t.Helper()
	off := int64(0)
	add := func(spec record.BatchSpec, recs []record.Record) {
		raw, err := record.Encode(nil, spec, recs)
		require.NoError(t, err)
		batches = append(batches, raw)
	}
	for g := range n {
		spec := record.NewBatchSpec(off)
		txn := g%2 == 1
		if txn {
			spec.Transactional, spec.ProducerID, spec.ProducerEpoch, spec.BaseSequence = true, 7, 0, 0
		}
		var recs []record.Record
		for i := range 4 {
			r := record.Record{Offset: off + int64(i), Timestamp: 1_700_000_000_000 + off,
				Key: fmt.Appendf(nil, "k%d", off+int64(i)), Value: fmt.Appendf(nil, "group %d record %d", g, i)}
			recs = append(recs, r)
			want = append(want, sent{offset: r.Offset, key: string(r.Key), value: string(r.Value), txn: txn, aborted: txn && g%3 == 0})
		}
		add(spec, recs)
		off += 4
		if txn {
			mspec := record.NewBatchSpec(off)
			mspec.Transactional, mspec.Control, mspec.ProducerID, mspec.ProducerEpoch = true, true, 7, 0
			typ := byte(1)
			if g%3 == 0 {
				typ = 0
			}
			add(mspec, []record.Record{{Offset: off, Timestamp: 1_700_000_000_000, Key: []byte{0, 0, 0, typ}, Value: []byte{0, 0, 0, 0, 0, 0}}})
			off++
		} else {
			off += 3 // compacted away
		}
	}
	return batches, committed(want)
}

// TestMirrorCrashAtEveryOp: whatever file operation a crash stops a
// mirror at (filling, restarting, capping, closing), the copy opened
// afterwards serves exactly the source's records, aborted ones hidden:
// never a damaged or stale byte.
func TestMirrorCrashAtEveryOp(t *testing.T) {
	batches, want := fakeLog(t, 24)
	opts := MirrorOptions{SegmentBytes: 700, RetentionBytes: 2000, Logger: quietLogger()}
	ctx := context.Background()
	scenario := func(fs vfs.FS) (st MirrorStats) {
		m, err := OpenMirror(fs, "/cache", opts)
		if err != nil {
			return st
		}
		defer m.Close()
		mp, err := m.Partition("c", "t", 0)
		if err != nil {
			return st
		}
		src := &fakeSource{batches: batches[:len(batches)/2], maxBytes: 500, id: [16]byte{1}}
		// Half the log; all of it (the cap drops the oldest); the tail;
		// all again (a restart at 0).
		for step := range 4 {
			if step == 1 {
				src.batches = batches
			}
			from := int64(0)
			if step == 2 {
				from = src.hw() - 5
			}
			snap, err := mp.Snapshot(ctx, src, from, src.hw())
			if err != nil {
				return st
			}
			snap.Release()
		}
		return mp.Stats()
	}
	counter := vfs.NewCounter()
	st := scenario(vfs.NewErrorFS(vfs.NewMem(), counter))
	require.Positive(t, st.SegmentsDeleted)
	require.Equal(t, int64(2), st.Restarts, "the cap dropped the start before each later Snapshot from 0")
	require.Greater(t, counter.Count(), int64(50))
	for i := range counter.Count() {
		mem := vfs.NewMem()
		scenario(vfs.NewErrorFS(mem, vfs.CrashAt(i)))
		m, err := OpenMirror(mem.Crash(), "/cache", opts)
		require.NoError(t, err, "crash at op %d", i)
		mp, err := m.Partition("c", "t", 0)
		require.NoError(t, err, "crash at op %d", i)
		src := &fakeSource{batches: batches, maxBytes: 500, id: [16]byte{1}}
		snap, err := mp.Snapshot(ctx, src, 0, src.hw())
		require.NoError(t, err, "crash at op %d", i)
		checkRecords(t, want, visible(t, snap), 0)
		snap.Release()
		require.NoError(t, m.Close())
	}
}

// TestMirrorUncleanCopyDiscarded: a copy that was not closed cleanly is
// not trusted, even where a recovery scan would keep it: after a power
// loss the pages of an unsynced .log reach the disk in any order, and a
// scan that keeps the intact batches around a damaged one would leave a
// hole that reads like compaction. The copy is fetched again whole.
func TestMirrorUncleanCopyDiscarded(t *testing.T) {
	batches, want := fakeLog(t, 12)
	mem := vfs.NewMem()
	src := &fakeSource{batches: batches, maxBytes: 1 << 20}
	m, err := OpenMirror(mem, "/cache", MirrorOptions{Logger: quietLogger()})
	require.NoError(t, err)
	mp, err := m.Partition("c", "t", 0)
	require.NoError(t, err)
	snapshot(t, mp, src, 0, src.hw()).Release()
	require.NoError(t, mp.p.Close()) // the files a killed process leaves: no marker
	require.NoError(t, m.locks["c"].Close())
	log, err := mem.OpenFile("/cache/c/t-0/00000000000000000000.log", os.O_RDWR, 0)
	require.NoError(t, err)
	_, err = log.WriteAt(make([]byte, 40), int64(len(batches[0])+len(batches[1])+20)) // a page never written
	require.NoError(t, err)
	require.NoError(t, log.Close())

	m = newMirror(t, mem, "/cache", MirrorOptions{Logger: quietLogger()})
	mp, err = m.Partition("c", "t", 0)
	require.NoError(t, err)
	snap := snapshot(t, mp, src, 0, src.hw())
	checkRecords(t, want, visible(t, snap), 0)
	snap.Release()
}

// growing is a source whose partition grows at every fetch with another
// batch of a transaction that never ends.
type growing struct{ fakeSource }

func (g *growing) Fetch(ctx context.Context, offset int64, maxBytes int32) (*FetchResult, error) {
	if g.fetches.Load() > 50 {
		return nil, fmt.Errorf("runaway: %d fetches", g.fetches.Load())
	}
	res, err := g.fakeSource.Fetch(ctx, offset, maxBytes)
	spec := record.NewBatchSpec(g.hw())
	spec.Transactional, spec.ProducerID, spec.ProducerEpoch, spec.BaseSequence = true, 9, 0, 0
	raw, _ := record.Encode(nil, spec, []record.Record{{Offset: g.hw(), Value: []byte("more")}})
	g.batches = append(g.batches, raw)
	return res, err
}

// TestMirrorOpenTransactionBounded: a transaction open below end makes
// the copy fetch past end for its marker, but no further than the high
// watermark the first fetch saw, however fast the partition grows.
func TestMirrorOpenTransactionBounded(t *testing.T) {
	batches, _ := fakeLog(t, 4)
	src := &growing{fakeSource{batches: batches, maxBytes: 100}}
	end := src.hw()
	m := newMirror(t, vfs.NewMem(), "/cache", MirrorOptions{Logger: quietLogger()})
	mp, err := m.Partition("c", "t", 0)
	require.NoError(t, err)
	snapshot(t, mp, src, 0, end).Release() // reaches end; the growth opened a transaction past it
	snap := snapshot(t, mp, src, 0, end+2)
	_, copyEnd := mp.Range()
	assert.Less(t, src.fetches.Load(), int64(20))
	assert.Less(t, copyEnd, src.hw())
	assert.Equal(t, end+2, snap.Offsets.End)
	snap.Release()
}

// TestMirrorPartitionNames: a cluster id must be one path element, a topic
// a Kafka topic name; RemoveTopic drops a topic's copies, open or not.
func TestMirrorPartitionNames(t *testing.T) {
	mem := vfs.NewMem()
	m := newMirror(t, mem, "/cache", MirrorOptions{Logger: quietLogger()})
	for _, c := range []struct{ cluster, topic string }{{"", "t"}, {"..", "t"}, {"a/b", "t"}, {"c", "a/b"}, {"c", ".."}} {
		_, err := m.Partition(c.cluster, c.topic, 0)
		assert.Error(t, err, "%q %q", c.cluster, c.topic)
	}
	_, err := m.Partition("c", "t", -1)
	assert.ErrorIs(t, err, backend.ErrUnknownPartition)
	src := &fakeSource{batches: func() [][]byte { b, _ := fakeLog(t, 2); return b }(), maxBytes: 1 << 20}
	for _, p := range []int32{0, 1} {
		mp, err := m.Partition("c", "t", p)
		require.NoError(t, err)
		snapshot(t, mp, src, 0, src.hw()).Release()
	}
	other, err := m.Partition("c", "t-x", 0)
	require.NoError(t, err)
	snapshot(t, other, src, 0, src.hw()).Release()
	require.NoError(t, m.RemoveTopic("c", "t"))
	for _, d := range []string{"/cache/c/t-0", "/cache/c/t-1"} {
		_, err := mem.Stat(d)
		assert.ErrorIs(t, err, os.ErrNotExist, d)
	}
	_, err = mem.Stat("/cache/c/t-x-0")
	assert.NoError(t, err)
	mp, err := m.Partition("c", "t", 0)
	require.NoError(t, err)
	start, end := mp.Range()
	assert.Equal(t, []int64{0, 0}, []int64{start, end}, "a fresh copy")
	require.NoError(t, m.Close())
	_, err = m.Partition("c", "t", 0)
	assert.ErrorIs(t, err, backend.ErrClosed)
}

// sizes records the sizes a fill asks for.
type sizes struct {
	fakeSource
	asked []int32
}

func (s *sizes) Fetch(ctx context.Context, offset int64, maxBytes int32) (*FetchResult, error) {
	s.asked = append(s.asked, maxBytes)
	return s.fakeSource.Fetch(ctx, offset, maxBytes)
}

// TestMirrorFetchRamp: a fill's first fetches ask for little (a reader of
// the last records needs a batch or two), the later ones for the source's
// default.
func TestMirrorFetchRamp(t *testing.T) {
	batches, want := fakeLog(t, 3000)
	src := &sizes{fakeSource: fakeSource{batches: batches, maxBytes: 1 << 30}}
	m := newMirror(t, vfs.NewMem(), "/cache", MirrorOptions{Logger: quietLogger()})
	mp, err := m.Partition("c", "t", 0)
	require.NoError(t, err)
	snap := snapshot(t, mp, src, 0, src.hw())
	checkRecords(t, want, visible(t, snap), 0)
	snap.Release()
	assert.Equal(t, []int32{64 << 10, 256 << 10, 0}, src.asked, "the third fetch takes the rest")
	snap = snapshot(t, mp, src, src.hw()-3, src.hw())
	snap.Release()
	assert.Len(t, src.asked, 3, "held already: no fetch")
}

// TestMirrorCleanCloseSurvivesPowerLoss: a copy is written without fsyncs
// (Mirror.cache), so Close must make it durable before it marks it clean:
// after a power loss right after Close the copy is trusted, serves every
// record, and fetches nothing.
func TestMirrorCleanCloseSurvivesPowerLoss(t *testing.T) {
	batches, want := fakeLog(t, 24)
	opts := MirrorOptions{SegmentBytes: 700, Logger: quietLogger()}
	ctx := context.Background()
	mem := vfs.NewMem()
	m, err := OpenMirror(mem, "/cache", opts)
	require.NoError(t, err)
	mp, err := m.Partition("c", "t", 0)
	require.NoError(t, err)
	src := &fakeSource{batches: batches, maxBytes: 500, id: [16]byte{1}}
	snap, err := mp.Snapshot(ctx, src, 0, src.hw())
	require.NoError(t, err)
	snap.Release()
	require.NoError(t, m.Close())

	m, err = OpenMirror(mem.Crash(), "/cache", opts)
	require.NoError(t, err)
	defer m.Close()
	mp, err = m.Partition("c", "t", 0)
	require.NoError(t, err)
	again := &fakeSource{batches: batches, maxBytes: 500, id: [16]byte{1}}
	snap, err = mp.Snapshot(ctx, again, 0, again.hw())
	require.NoError(t, err)
	defer snap.Release()
	checkRecords(t, want, visible(t, snap), 0)
	assert.Zero(t, mp.Stats().Fetches, "the clean copy was trusted, not fetched again")
}

// TestMirrorMaxOpen: past MaxOpen copies, the least recently used one no
// reader holds is closed cleanly; asked for again it reopens without a
// fetch. A copy a reader holds stays open.
func TestMirrorMaxOpen(t *testing.T) {
	batches, want := fakeLog(t, 6)
	ctx := context.Background()
	m := newMirror(t, vfs.NewMem(), "/cache", MirrorOptions{MaxOpen: 2, Logger: quietLogger()})
	src := &fakeSource{batches: batches, maxBytes: 500, id: [16]byte{1}}
	open := func(p int32) *MirrorPartition {
		mp, err := m.Partition("c", "t", p)
		require.NoError(t, err)
		return mp
	}
	held, err := open(0).Snapshot(ctx, src, 0, src.hw())
	require.NoError(t, err)
	defer held.Release()
	first1 := open(1)
	snap, err := first1.Snapshot(ctx, src, 0, src.hw())
	require.NoError(t, err)
	snap.Release()
	open(2) // closes copy 1: copy 0 is held
	m.mu.Lock()
	_, has0 := m.parts[mirrorKey{"c", "t", 0}]
	_, has1 := m.parts[mirrorKey{"c", "t", 1}]
	n := len(m.parts)
	m.mu.Unlock()
	assert.True(t, has0, "a held copy stays open")
	assert.False(t, has1, "the least recently used idle copy was closed")
	assert.Equal(t, 2, n)
	_, err = first1.Snapshot(ctx, src, 0, src.hw())
	assert.ErrorIs(t, err, backend.ErrClosed, "the closed copy's handle answers ErrClosed (callers ask the Mirror again)")

	again := open(1)
	snap, err = again.Snapshot(ctx, src, 0, src.hw())
	require.NoError(t, err)
	checkRecords(t, want, visible(t, snap), 0)
	snap.Release()
	assert.Zero(t, again.Stats().Fetches, "reopened from its clean copy")
}

// TestMirrorUseKeepsTheCopyOpen: a copy in use (Mirror.Use) is not closed
// to make room for others, even before its reader holds any segment.
func TestMirrorUseKeepsTheCopyOpen(t *testing.T) {
	batches, want := fakeLog(t, 6)
	ctx := context.Background()
	m := newMirror(t, vfs.NewMem(), "/cache", MirrorOptions{MaxOpen: 1, Logger: quietLogger()})
	src := &fakeSource{batches: batches, maxBytes: 500, id: [16]byte{1}}
	err := m.Use("c", "t", 0, func(mp *MirrorPartition) error {
		for p := int32(1); p <= 3; p++ { // others opened meanwhile
			_, err := m.Partition("c", "t", p)
			require.NoError(t, err)
		}
		snap, err := mp.Snapshot(ctx, src, 0, src.hw())
		if err != nil {
			return err
		}
		checkRecords(t, want, visible(t, snap), 0)
		snap.Release()
		return nil
	})
	require.NoError(t, err, "the copy in use was not closed")
}
