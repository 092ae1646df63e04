package tests

// The crash harness: concurrent writers (some fsyncing every batch), readers
// and background retention/compaction run against a real mount that is
// SIGKILLed at random moments, lazily unmounted and mounted again on the same
// data directory, over and over.
//
// After every remount it verifies, through records.jsonl:
//   - every record acknowledged by a successful fsync (or by close before a
//     clean SIGTERM stop) is present exactly once (non-compacted topics);
//   - offsets strictly increase (and are contiguous from 0 where nothing is
//     ever deleted);
//   - every record is one some writer wrote (payloads are self-checking);
//   - on the retention topic the acknowledged records still there are a suffix
//     of what was acknowledged, and the newest is always there;
//   - on the compacted topic each key's last record is at least as new as the
//     last acknowledged write of that key;
//
// and during the run no reader ever got bytes that were not a written record.
// Every tenth cycle stops cleanly instead and runs `topicfs check DIR`.
//
// Knobs: TOPICFS_CRASH_CYCLES (default 33: 30 SIGKILLs, 3 clean stops),
// TOPICFS_CRASH_SEED.

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

const crashConfig = `
"segment.bytes" = 16384
"index.interval.bytes" = 1024
"segment.index.bytes" = 65536
"retention.ms" = -1
"retention.check.interval.ms" = 100
"file.delete.delay.ms" = 200
"linger.ms" = 2
"num.partitions" = 2

[topics.ret]
"retention.bytes" = 49152

[topics.cmp]
"cleanup.policy" = "compact"
"parse.key" = true
"segment.bytes" = 8192
"min.cleanable.dirty.ratio" = 0.01
"delete.retention.ms" = 500
`

// crashWriter is one writer identity; its sequence numbers continue across
// cycles so every payload it ever writes is unique.
type crashWriter struct {
	id     int
	topic  string
	file   string // path below the mountpoint
	fsync  bool   // f.Sync() after every batch
	reopen bool   // open and close the file for every batch
	keyed  bool   // lines are key \t value (parse.key topic)

	attempted atomic.Int64 // seqs < attempted were handed to write(2)
	synced    atomic.Int64 // seqs < synced were acknowledged by a successful fsync
	closed    atomic.Int64 // seqs < closed were written and closed without error
	// acked are the ranges [lo, hi) of seqs that must survive: per cycle,
	// from the cycle's first seq up to the last fsync acknowledgement (or up
	// to the last successful close before a clean stop). Seqs between ranges
	// were in flight at a SIGKILL and may be gone. Test goroutine only.
	acked      [][2]int
	cycleStart int
}

// ack records [cycleStart, hi) as acknowledged.
func (w *crashWriter) ack(hi int) {
	if hi > w.cycleStart {
		w.acked = append(w.acked, [2]int{w.cycleStart, hi})
	}
}

// ackedSeqs lists every acknowledged seq, oldest first.
func (w *crashWriter) ackedSeqs() []int {
	var out []int
	for _, r := range w.acked {
		for s := r[0]; s < r[1]; s++ {
			out = append(out, s)
		}
	}
	return out
}

// lastAckedOfKey returns the newest acknowledged seq whose key is seq%cmpKeys == k.
func (w *crashWriter) lastAckedOfKey(k int) (int, bool) {
	for i := len(w.acked) - 1; i >= 0; i-- {
		lo, hi := w.acked[i][0], w.acked[i][1]
		s := hi - 1 - ((hi-1-k)%cmpKeys+cmpKeys)%cmpKeys
		if s >= lo {
			return s, true
		}
	}
	return 0, false
}

const cmpKeys = 16

// crashKey is the key of a keyed writer's record seq; every fifth round of
// keys is a tombstone.
func crashKey(w, seq int) string  { return fmt.Sprintf("k%02d-%02d", w, seq%cmpKeys) }
func crashTombstone(seq int) bool { return (seq/cmpKeys)%5 == 4 }

func (w *crashWriter) line(seq int) string {
	if !w.keyed {
		return relPayload(w.id, seq) + "\n"
	}
	if crashTombstone(seq) {
		return crashKey(w.id, seq) + "\t\n" // null.marker "" = tombstone
	}
	return crashKey(w.id, seq) + "\t" + relPayload(w.id, seq) + "\n"
}

// run writes batches until stop is closed or an error happens.
func (w *crashWriter) run(mnt string, rng *rand.Rand, stop <-chan struct{}, fail func(string, error)) {
	path := filepath.Join(mnt, w.file)
	var f *os.File
	defer func() {
		if f != nil {
			if err := f.Close(); err != nil {
				fail(fmt.Sprintf("writer %d close %s", w.id, w.file), err)
				return
			}
			w.closed.Store(w.attempted.Load())
		}
	}()
	for {
		select {
		case <-stop:
			return
		default:
		}
		var err error
		if f == nil {
			if f, err = os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0); err != nil {
				f = nil
				fail(fmt.Sprintf("writer %d open %s", w.id, w.file), err)
				return
			}
		}
		start := int(w.attempted.Load())
		n := 1 + rng.IntN(15)
		var buf bytes.Buffer
		for s := start; s < start+n; s++ {
			buf.WriteString(w.line(s))
		}
		w.attempted.Store(int64(start + n))
		b := buf.Bytes()
		if rng.IntN(4) == 0 && len(b) > 2 {
			cut := 1 + rng.IntN(len(b)-1) // split a line across two write(2)s
			if _, err = f.Write(b[:cut]); err == nil {
				_, err = f.Write(b[cut:])
			}
		} else {
			_, err = f.Write(b)
		}
		if err != nil {
			fail(fmt.Sprintf("writer %d write %s", w.id, w.file), err)
			return
		}
		if w.fsync {
			if err := f.Sync(); err != nil {
				fail(fmt.Sprintf("writer %d fsync %s", w.id, w.file), err)
				return
			}
			w.synced.Store(int64(start + n))
		}
		if w.reopen {
			err := f.Close()
			f = nil
			if err != nil {
				fail(fmt.Sprintf("writer %d close %s", w.id, w.file), err)
				return
			}
			w.closed.Store(int64(start + n))
		}
		if d := rng.IntN(4); d > 0 {
			time.Sleep(time.Duration(d) * time.Millisecond)
		}
	}
}

// crashRun holds the state of one crash test across cycles.
type crashRun struct {
	t       *testing.T
	m       *mountProc
	writers []*crashWriter
	byID    map[int]*crashWriter

	killed    atomic.Bool
	mu        sync.Mutex
	failures  []string
	linesRead atomic.Int64
	readsDone atomic.Int64
	seeks     atomic.Int64

	// plainEnd[p] is how many records plain/p held at the last verify:
	// offsets below it exist forever (nothing is deleted from plain).
	plainEnd [2]int64
	history  []string // per-cycle accounting, printed when the test fails
}

func (r *crashRun) fail(what string, err error) {
	if r.killed.Load() {
		return // the server is gone: every access fails now, as it should
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.failures) < 50 {
		r.failures = append(r.failures, fmt.Sprintf("%s: %v", what, err))
	}
}

// validLine checks one line read from a plain view of topic.
func (r *crashRun) validLine(topic, line string) error {
	if topic == "cmp" && line == "" {
		return nil // a tombstone prints the empty null.marker
	}
	w, seq, ok := relParsePayload(line)
	if !ok {
		return fmt.Errorf("line %.80q (%d bytes) is not a written record", line, len(line))
	}
	wr := r.byID[w]
	if wr == nil || wr.topic != topic {
		return fmt.Errorf("line %q belongs to no writer of topic %s", line, topic)
	}
	if int64(seq) >= wr.attempted.Load() {
		return fmt.Errorf("line %q was never written (writer %d attempted %d)", line, w, wr.attempted.Load())
	}
	if wr.keyed && crashTombstone(seq) {
		return fmt.Errorf("line %q is the value of a tombstone write", line)
	}
	return nil
}

// readWhole reads a view from start to end again and again.
func (r *crashRun) readWhole(topic, path string, stop <-chan struct{}) {
	for {
		select {
		case <-stop:
			return
		default:
		}
		data, err := os.ReadFile(path)
		if err != nil {
			r.fail("read "+path, err)
			return
		}
		if len(data) > 0 && data[len(data)-1] != '\n' {
			r.fail("read "+path, fmt.Errorf("view ends inside a line: %q", tailBytes(data, 60)))
		}
		for _, l := range linesOf(string(data)) {
			if err := r.validLine(topic, l); err != nil {
				r.fail("read "+path, err)
				return
			}
		}
		r.linesRead.Add(int64(len(linesOf(string(data)))))
		r.readsDone.Add(1)
		time.Sleep(5 * time.Millisecond)
	}
}

// seekReader opens by-offset/N.jsonl at random N below what plain/p is known
// to hold and checks that the view starts exactly at N.
func (r *crashRun) seekReader(p int, rng *rand.Rand, stop <-chan struct{}) {
	end := r.plainEnd[p]
	if end == 0 {
		return
	}
	buf := make([]byte, 4096)
	for {
		select {
		case <-stop:
			return
		default:
		}
		n := rng.Int64N(end)
		path := r.m.Path("plain", fmt.Sprint(p), "by-offset", fmt.Sprintf("%d.jsonl", n))
		f, err := os.Open(path)
		if err != nil {
			r.fail("open "+path, err)
			return
		}
		k, err := io.ReadAtLeast(f, buf, 1)
		f.Close()
		if err != nil {
			r.fail("read "+path, err)
			return
		}
		line, _, found := bytes.Cut(buf[:k], []byte("\n"))
		if !found {
			continue // a long first line; the whole-view readers cover content
		}
		recs, err := parseJSONL(append(line, '\n'))
		if err != nil || len(recs) != 1 || recs[0].Offset != n {
			r.fail("read "+path, fmt.Errorf("first line %q does not hold offset %d (%v)", line, n, err))
			return
		}
		if v, _ := recs[0].ValueString(); r.validLine("plain", v) != nil {
			r.fail("read "+path, r.validLine("plain", v))
			return
		}
		r.seeks.Add(1)
		time.Sleep(2 * time.Millisecond)
	}
}

// follow keeps one view open and reads what it grows by, like tail -f.
func (r *crashRun) follow(topic, path string, stop <-chan struct{}) {
	f, err := os.Open(path)
	if err != nil {
		r.fail("open "+path, err)
		return
	}
	defer f.Close()
	buf := make([]byte, 64<<10)
	var partial []byte
	for {
		n, err := f.Read(buf)
		if n > 0 {
			partial = append(partial, buf[:n]...)
			for {
				i := bytes.IndexByte(partial, '\n')
				if i < 0 {
					break
				}
				if verr := r.validLine(topic, string(partial[:i])); verr != nil {
					r.fail("follow "+path, verr)
					return
				}
				r.linesRead.Add(1)
				partial = partial[i+1:]
			}
		}
		if errors.Is(err, io.EOF) || (err == nil && n == 0) {
			select {
			case <-stop:
				return
			case <-time.After(10 * time.Millisecond):
			}
			continue
		}
		if err != nil {
			r.fail("follow "+path, err)
			return
		}
	}
}

func TestCrashKillCycles(t *testing.T) {
	cycles := envInt("TOPICFS_CRASH_CYCLES", 33) // 30 SIGKILLs + 3 clean stops
	seed := uint64(envInt("TOPICFS_CRASH_SEED", int(time.Now().UnixNano()%1e12)))
	t.Logf("crash test: %d cycles, seed %d (set TOPICFS_CRASH_SEED to replay)", cycles, seed)
	rng := rand.New(rand.NewPCG(seed, 1))

	m := startMount(t, mountOpts{Config: crashConfig})
	var r *crashRun
	t.Cleanup(func() {
		// Keep the evidence: a failed run leaves a copy of its data dir.
		if t.Failed() {
			if r != nil {
				t.Logf("history:\n%s", strings.Join(r.history, "\n"))
			}
			keep := filepath.Join(os.TempDir(), fmt.Sprintf("topicfs-crash-%d", seed))
			_ = os.RemoveAll(keep)
			if out, err := exec.Command("cp", "-a", m.Data, keep).CombinedOutput(); err == nil {
				t.Logf("data dir of the failed run kept in %s", keep)
			} else {
				t.Logf("could not keep the data dir: %v %s", err, out)
			}
		}
	})
	for _, topic := range []string{"plain", "ret", "cmp"} {
		require.NoError(t, os.Mkdir(m.Path(topic), 0o755), "mkdir topic %s", topic)
		for _, p := range []string{"0", "1"} {
			_, err := os.Stat(m.Path(topic, p, "records"))
			require.NoError(t, err, "num.partitions=2 from mount.toml must give partition %s", p)
		}
	}
	cfg, err := os.ReadFile(m.Path("ret", "config"))
	require.NoError(t, err)
	require.Contains(t, string(cfg), "retention.bytes=49152", "[topics.ret] from mount.toml applies to a topic made by mkdir")
	cfg, err = os.ReadFile(m.Path("cmp", "config"))
	require.NoError(t, err)
	require.Contains(t, string(cfg), "cleanup.policy=compact")
	require.Contains(t, string(cfg), "parse.key=true")

	r = &crashRun{t: t, m: m, byID: map[int]*crashWriter{}}
	r.writers = []*crashWriter{
		{id: 0, topic: "plain", file: "plain/0/append", fsync: true},
		{id: 1, topic: "plain", file: "plain/1/append", fsync: true, reopen: true},
		{id: 2, topic: "plain", file: "plain/append", fsync: true},
		{id: 3, topic: "plain", file: "plain/0/append", reopen: true},
		{id: 4, topic: "ret", file: "ret/0/append", fsync: true},
		{id: 5, topic: "ret", file: "ret/1/append", fsync: true, reopen: true},
		{id: 6, topic: "cmp", file: "cmp/0/append", fsync: true, keyed: true},
		{id: 7, topic: "cmp", file: "cmp/append", fsync: true, reopen: true, keyed: true},
	}
	for _, w := range r.writers {
		r.byID[w.id] = w
	}

	var verified, crashImagesRejected, checks int
	kills, hungKills, firstHang := 0, 0, ""
	var crashImagesChecked int
	var timeMount, timeVerify, timeCheck time.Duration
	for c := 0; c < cycles; c++ {
		graceful := c%10 == 9
		r.killed.Store(false)
		stop := make(chan struct{})
		var wg sync.WaitGroup
		for _, w := range r.writers {
			wg.Add(1)
			go func(w *crashWriter, wrng *rand.Rand) {
				defer wg.Done()
				w.run(m.Dir, wrng, stop, r.fail)
			}(w, rand.New(rand.NewPCG(seed+uint64(c), uint64(w.id))))
		}
		for _, v := range []struct{ topic, file string }{{"plain", "plain/0/records"}, {"ret", "ret/0/records"}, {"cmp", "cmp/0/records"}, {"ret", "ret/1/records"}} {
			wg.Add(1)
			go func(topic, path string) { defer wg.Done(); r.readWhole(topic, path, stop) }(v.topic, m.Path(v.file))
		}
		for _, v := range []struct{ topic, file string }{{"plain", "plain/1/records"}, {"cmp", "cmp/1/records"}} {
			wg.Add(1)
			go func(topic, path string) { defer wg.Done(); r.follow(topic, path, stop) }(v.topic, m.Path(v.file))
		}

		for p := 0; p < 2; p++ {
			wg.Add(1)
			go func(p int, srng *rand.Rand) { defer wg.Done(); r.seekReader(p, srng, stop) }(p, rand.New(rand.NewPCG(seed+uint64(c), 100+uint64(p))))
		}

		time.Sleep(time.Duration(30+rng.IntN(600)) * time.Millisecond)

		if graceful {
			close(stop)
			wg.Wait()
			m.Stop()
			for _, w := range r.writers {
				w.ack(max(int(w.synced.Load()), int(w.closed.Load())))
			}
			if requireCheckPasses(t, m.Data) {
				checks++
			}
		} else {
			r.killed.Store(true)
			if stacks, hung := crashKill(m); hung {
				hungKills++
				if firstHang == "" {
					firstHang = stacks
				}
			}
			kills++
			close(stop)
			wg.Wait()
			lazyUnmount(m.Dir)
			for _, w := range r.writers {
				w.ack(int(w.synced.Load()))
			}
			// The crash image itself: a torn tail is expected here and is
			// recovery's job, so this is reported, not asserted.
			if c%5 == 0 { // every fifth image: the checker is slow under -race
				t0 := time.Now()
				if res := runCheck(t, m.Data); !res.Missing && res.Code != 0 {
					crashImagesRejected++
				}
				crashImagesChecked++
				timeCheck += time.Since(t0)
			}
		}
		r.mu.Lock()
		failures := append([]string(nil), r.failures...)
		r.mu.Unlock()
		require.Empty(t, failures, "cycle %d: errors while the mount was alive", c)

		hist := fmt.Sprintf("cycle %d %s: acked/attempted", c, map[bool]string{true: "stop", false: "kill"}[graceful])
		for _, w := range r.writers {
			hist += fmt.Sprintf(" w%d=%v/%d", w.id, w.acked[max(0, len(w.acked)-1):], w.attempted.Load())
			w.cycleStart = int(w.attempted.Load())
		}
		r.history = append(r.history, hist)
		t0 := time.Now()
		m.Remount()
		t1 := time.Now()
		verified = r.verify(c, c%5 == 4 || c == cycles-1)
		timeMount += t1.Sub(t0)
		timeVerify += time.Since(t1)
		r.history = append(r.history, fmt.Sprintf("  after remount: plain ends %v", r.plainEnd))
		if testing.Verbose() && (c%10 == 0 || c == cycles-1) {
			t.Logf("cycle %d/%d (%s): %d acknowledged records verified, %d lines read so far",
				c+1, cycles, map[bool]string{true: "clean stop", false: "SIGKILL"}[graceful], verified, r.linesRead.Load())
		}
	}
	m.Stop()
	if requireCheckPasses(t, m.Data) {
		checks++
	}
	var attempted int64
	for _, w := range r.writers {
		attempted += w.attempted.Load()
	}
	summary := fmt.Sprintf("crash: %d cycles (%d SIGKILL, %d clean), %d records written, %d acknowledged records verified present at the end, %d lines read and validated by concurrent readers (%d whole reads, %d by-offset seeks), %d offline checks passed, %d of %d crash images flagged by check before recovery; time in remounts %v, verifies %v, crash-image checks %v",
		cycles, kills, cycles-kills, attempted, verified, r.linesRead.Load(), r.readsDone.Load(), r.seeks.Load(), checks, crashImagesRejected, crashImagesChecked, timeMount.Round(time.Millisecond), timeVerify.Round(time.Millisecond), timeCheck.Round(time.Millisecond))
	t.Log(summary)
	reportSummary(summary)
	if hungKills > 0 {
		// A known kernel/FUSE interaction, reported rather than failed: see
		// crashKill.
		msg := fmt.Sprintf("FINDING: %d of %d SIGKILLed mounts could not exit until their FUSE connection was aborted; first one's blocked threads:\n%s", hungKills, kills, firstHang)
		t.Log(msg)
		reportSummary(msg)
	}
}

// crashKill SIGKILLs the mount and waits for it to exit. A process killed
// while its notifier thread is inside a FUSE invalidation (NotifyContent ->
// fuse_reverse_inval_inode, waiting for a page lock that a reader's pending
// READ holds) cannot exit: that thread is in uninterruptible sleep, the
// READ can only be answered by the dead process, and its /dev/fuse fd is not
// released until it exits. Then crashKill aborts the FUSE connection (what
// `umount -f` or fusectl's abort does for a user), which fails the READ and
// lets the process go, and reports hung=true with the blocked threads'
// kernel stacks.
func crashKill(m *mountProc) (stacks string, hung bool) {
	m.t.Helper()
	if !m.Running() {
		m.Wait()
		return "", false
	}
	_ = m.Cmd.Process.Kill()
	select {
	case <-m.done:
		return "", false
	case <-time.After(5 * time.Second):
	}
	stacks = kernelStacks(m.Cmd.Process.Pid)
	if err := abortFUSEConnection(m.fuseConn); err != nil {
		m.t.Logf("aborting FUSE connection %d: %v", m.fuseConn, err)
	}
	m.Wait()
	return stacks, true
}

// verify reads every partition's records.jsonl and checks the invariants
// listed at the top of this file. It returns how many acknowledged records
// it found where they must be.
//
// full reads the plain topic through records.jsonl (checking its offsets);
// otherwise through its plain records view.
func (r *crashRun) verify(cycle int, full bool) int {
	t := r.t
	t.Helper()
	present := map[int]map[int]bool{} // writer -> seq -> present
	lastOfKey := map[string]jsonRec{} // cmp: key -> last record
	for _, w := range r.writers {
		present[w.id] = map[int]bool{}
	}
	for _, topic := range []string{"plain", "ret", "cmp"} {
		seen := map[string]int64{}
		for _, p := range []string{"0", "1"} {
			path := r.m.Path(topic, p, "records.jsonl")
			var recs []jsonRec
			var err error
			if topic == "plain" && !full {
				// Nothing is deleted from plain, so line i is offset i once
				// a full check has seen offsets 0,1,2,...; the plain view is
				// much cheaper than JSON under -race.
				path = r.m.Path(topic, p, "records")
				var data []byte
				if data, err = os.ReadFile(path); err == nil {
					recs, err = plainRecs(data)
				}
			} else {
				recs, err = readJSONL(path)
			}
			require.NoError(t, err, "cycle %d: read %s after remount", cycle, path)
			if topic == "plain" {
				r.plainEnd[map[string]int{"0": 0, "1": 1}[p]] = int64(len(recs))
			}
			for i, rec := range recs {
				if i > 0 {
					require.Greater(t, rec.Offset, recs[i-1].Offset, "cycle %d: %s offsets must strictly increase", cycle, path)
				}
				if topic == "plain" {
					require.Equal(t, int64(i), rec.Offset, "cycle %d: %s: nothing is ever deleted, so offsets are 0,1,2,...", cycle, path)
				}
				if topic == "cmp" {
					k, ok := rec.KeyString()
					require.True(t, ok, "cycle %d: %s offset %d has no key", cycle, path, rec.Offset)
					lastOfKey[k] = rec
					if rec.IsTombstone() {
						continue
					}
				}
				v, ok := rec.ValueString()
				require.True(t, ok, "cycle %d: %s offset %d: value %s is not a string", cycle, path, rec.Offset, rec.Value)
				require.NoError(t, r.validLine(topic, v), "cycle %d: %s offset %d", cycle, path, rec.Offset)
				if prev, dup := seen[v]; dup {
					t.Fatalf("cycle %d: %s: record %q appears twice (offsets %d and %d)", cycle, topic, v, prev, rec.Offset)
				}
				seen[v] = rec.Offset
				w, seq, _ := relParsePayload(v)
				if topic == "cmp" {
					k, _ := rec.KeyString()
					require.Equal(t, crashKey(w, seq), k, "cycle %d: %s offset %d: key does not match value", cycle, path, rec.Offset)
				}
				present[w][seq] = true
			}
		}
	}

	verified := 0
	for _, w := range r.writers {
		switch w.topic {
		case "plain":
			for _, rg := range w.acked {
				for s := rg[0]; s < rg[1]; s++ {
					if !present[w.id][s] {
						t.Fatalf("cycle %d: acknowledged record %q (writer %d via %s) is missing after remount; acknowledged %v, present %s", cycle, relPayload(w.id, s), w.id, w.file, w.acked, seqRanges(present[w.id]))
					}
					verified++
				}
			}
		case "ret":
			seqs := w.ackedSeqs()
			if len(seqs) == 0 {
				continue
			}
			last := seqs[len(seqs)-1]
			if !present[w.id][last] {
				t.Fatalf("cycle %d: newest acknowledged record %q of %s is missing (retention keeps the newest retention.bytes)", cycle, relPayload(w.id, last), w.file)
			}
			i := len(seqs) - 1
			for i > 0 && present[w.id][seqs[i-1]] {
				i--
			}
			for _, s := range seqs[:i] {
				if present[w.id][s] {
					t.Fatalf("cycle %d: %s: acknowledged record %q is present but the later acknowledged %q is not: retention must delete a prefix; acknowledged %v, present %s", cycle, w.file, relPayload(w.id, s), relPayload(w.id, seqs[i-1]), w.acked, seqRanges(present[w.id]))
				}
			}
			verified += len(seqs) - i
		case "cmp":
			for k := 0; k < cmpKeys; k++ {
				lastMust, ok := w.lastAckedOfKey(k)
				if !ok {
					continue
				}
				key := crashKey(w.id, k)
				rec, ok := lastOfKey[key]
				if ok && !rec.IsTombstone() {
					v, _ := rec.ValueString()
					_, seq, _ := relParsePayload(v)
					if seq < lastMust {
						t.Fatalf("cycle %d: key %s: last record %q is older than the acknowledged %s", cycle, key, v, strings.TrimSpace(w.line(lastMust)))
					}
				} else {
					// Deleted or a tombstone: some tombstone of this key at or
					// after the last acknowledged write must have been written.
					found := false
					for s := lastMust; int64(s) < w.attempted.Load(); s += cmpKeys {
						if crashTombstone(s) {
							found = true
							break
						}
					}
					if !found {
						t.Fatalf("cycle %d: key %s: no live value, but the acknowledged %q was never deleted by a later tombstone", cycle, key, strings.TrimSpace(w.line(lastMust)))
					}
				}
				verified++
			}
		}
	}
	return verified
}

// TestDiskFullENOSPC runs the mount on a data directory inside a small tmpfs
// that is almost full: appends fail with ENOSPC (at write, fsync or close),
// reads keep working, every record acknowledged before the fault survives a
// restart, and once space is freed appends work again.
func TestDiskFullENOSPC(t *testing.T) {
	requireFUSE(t)
	root, data := smallTmpfs(t, "8m")
	m := startMount(t, mountOpts{Data: data, Config: `
"segment.bytes" = 262144
"segment.index.bytes" = 65536
"linger.ms" = 1
"num.partitions" = 1
`})
	m.Sh(t, `mkdir $MNT/full`)

	// Leave about 1 MiB free.
	var st syscall.Statfs_t
	require.NoError(t, syscall.Statfs(root, &st))
	free := int64(st.Bavail) * st.Bsize
	ballast := filepath.Join(root, "ballast")
	require.NoError(t, os.WriteFile(ballast, bytes.Repeat([]byte{'b'}, int(free-(1<<20))), 0o644))

	acked := 0
	attempted := 0
	var faultErr error
	f, err := os.OpenFile(m.Path("full", "0", "append"), os.O_WRONLY|os.O_APPEND, 0)
	require.NoError(t, err)
	for attempted < 200000 && faultErr == nil {
		var buf bytes.Buffer
		for i := 0; i < 100; i++ {
			buf.WriteString(relPayload(0, attempted+i) + "\n")
		}
		attempted += 100
		if _, err := f.Write(buf.Bytes()); err != nil {
			faultErr = fmt.Errorf("write: %w", err)
		} else if err := f.Sync(); err != nil {
			faultErr = fmt.Errorf("fsync: %w", err)
		} else {
			acked = attempted
		}
	}
	if err := f.Close(); err != nil && faultErr == nil {
		faultErr = fmt.Errorf("close: %w", err)
	}
	require.Error(t, faultErr, "a 1 MiB-free disk never filled after %d records", attempted)
	require.ErrorIs(t, faultErr, syscall.ENOSPC, "a full disk reports ENOSPC")
	t.Logf("disk full after %d acknowledged records: %v", acked, faultErr)
	// The operator learns of it from the log, not only the writer.
	require.Eventually(t, func() bool {
		return strings.Contains(m.Stderr(), "no space left on device") && strings.Contains(m.Stderr(), "topic=full partition=0")
	}, harnessDeadline, 10*time.Millisecond, "a warning names the full partition; stderr:\n%s", m.Stderr())

	// Through the shell: cat reports the error of its write or close.
	big := filepath.Join(t.TempDir(), "big.txt")
	var bb bytes.Buffer
	for i := 0; i < 20000; i++ {
		bb.WriteString(relPayload(1, i) + "\n")
	}
	require.NoError(t, os.WriteFile(big, bb.Bytes(), 0o644))
	_, errOut, err := m.ShErr(`cat ` + big + ` >> $MNT/full/0/append`)
	require.Error(t, err, "cat into a full disk must fail")
	assert.Contains(t, errOut, msgENOSPC)
	_, errOut, err = m.ShErr(`dd if=` + big + ` of=$MNT/full/0/append oflag=append conv=notrunc,fsync bs=64k status=none`)
	require.Error(t, err, "dd conv=fsync into a full disk must fail")
	assert.Contains(t, errOut, msgENOSPC)
	// bash's echo reports only write(2) errors, not close(2) ones: a record
	// it reports as written must not be silently dropped.
	_, errOut, err = m.ShErr(`echo again-echo >> $MNT/full/0/append`)
	if err != nil {
		assert.Contains(t, errOut, msgENOSPC, "echo into a full disk")
	} else {
		assert.Contains(t, linesOf(m.Sh(t, `cat $MNT/full/0/records`)), "again-echo",
			"echo into a full disk exited 0, so its record must be in the log (not silently dropped)")
	}

	// Reads keep working and show every acknowledged record.
	verifyFull := func(stage string) {
		recs, err := readJSONL(m.Path("full", "0", "records.jsonl"))
		require.NoError(t, err, "%s: records.jsonl", stage)
		seen := map[string]bool{}
		next := 0
		for i, r := range recs {
			if i > 0 {
				require.Greater(t, r.Offset, recs[i-1].Offset, "%s: offsets increase", stage)
			}
			v, _ := r.ValueString()
			require.False(t, seen[v], "%s: %q appears twice", stage, v)
			seen[v] = true
			if w, seq, ok := relParsePayload(v); ok && w == 0 {
				require.Equal(t, next, seq, "%s: writer 0's records are in order without gaps", stage)
				next++
				continue
			}
			if _, _, ok := relParsePayload(v); !ok && !strings.HasPrefix(v, "again-") {
				if torn := tornPayload(v); torn != "" {
					t.Errorf("%s: offset %d holds %q, a torn prefix of the written record %q: the rest of its line was in a write that failed", stage, r.Offset, v, torn)
					continue
				}
				t.Fatalf("%s: %q at offset %d was never written", stage, v, r.Offset)
			}
		}
		require.GreaterOrEqual(t, next, acked, "%s: every acknowledged record is present", stage)
	}
	verifyFull("while the disk is full")

	// Free space: appends work again on the same mount.
	require.NoError(t, os.Remove(ballast))
	m.Sh(t, `echo again-1 >> $MNT/full/0/append`)
	assert.Equal(t, "again-1\n", m.Sh(t, `tail -n 1 $MNT/full/0/records`), "appends work again once space is freed")
	verifyFull("after freeing space")

	m.Stop()
	requireCheckPasses(t, data)
	m.Remount()
	verifyFull("after restart")
	m.Sh(t, `echo again-2 >> $MNT/full/0/append`)
	assert.Equal(t, "again-2\n", m.Sh(t, `tail -n 1 $MNT/full/0/records`))
	m.Stop()
	msg := fmt.Sprintf("ENOSPC: %d records acknowledged before the fault, all present after restart", acked)
	t.Log(msg)
	reportSummary(msg)
}

// seqRanges renders a set of sequence numbers as "0-99 120-130".
func seqRanges(set map[int]bool) string {
	var seqs []int
	for s := range set {
		seqs = append(seqs, s)
	}
	slices.Sort(seqs)
	var b strings.Builder
	for i := 0; i < len(seqs); {
		j := i
		for j+1 < len(seqs) && seqs[j+1] == seqs[j]+1 {
			j++
		}
		fmt.Fprintf(&b, "%d-%d ", seqs[i], seqs[j])
		i = j + 1
	}
	return strings.TrimSpace(b.String())
}

// tornPayload returns the payload that v is a strict prefix of, if v starts
// like a payload (wNN-SSSSSSS-) but was cut short.
func tornPayload(v string) string {
	if len(v) < 12 || v[0] != 'w' || v[3] != '-' || v[11] != '-' {
		return ""
	}
	var w, seq int
	if _, err := fmt.Sscanf(v[:11], "w%02d-%07d", &w, &seq); err != nil {
		return ""
	}
	if p := relPayload(w, seq); len(v) < len(p) && strings.HasPrefix(p, v) {
		return p
	}
	return ""
}
