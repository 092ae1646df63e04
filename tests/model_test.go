package tests

// TestModel drives a real mount with random operations and compares every
// view with an in-memory model (modelutil_test.go) after each step.
//
// Knobs (environment):
//
//	TOPICFS_MODEL_SEED=N      the seed (default: a fixed one; `make model` picks a new one)
//	TOPICFS_MODEL_OPS=N       operations per run (default 40)
//	TOPICFS_MODEL_DURATION=D  run new seeds for this long (Go duration) instead
//	TOPICFS_MODEL_REPLAY=F    run the operations of file F (JSON, one per line)
//	TOPICFS_MODEL_SHRINK=D    how long a failure may be shrunk (default 3m; 0: no shrinking)
//
// Every operation is logged (go test -v shows them). On a failure the test
// shrinks the operation list (each candidate on a fresh mount), prints the
// shortest list that still fails and writes it to a file that
// TOPICFS_MODEL_REPLAY runs again.
//
// Semantics the model encodes (README "The mount" and "Limits and
// guarantees"):
//   - each '\n'-terminated line written to append is one record; with
//     parse.key it is key, key.separator, value, and null.marker stands for
//     null; append.jsonl lines are JSON objects, a missing "value" is EINVAL
//     and an explicit null a tombstone;
//   - a line whose record is above max.message.bytes stores nothing of
//     itself: the write that ends it (and perhaps earlier ones) fails with
//     EMSGSIZE, lines before and after it are stored;
//   - records are visible within linger.ms, and always once close() (of any
//     descriptor of the file) or fsync() returned; with linger.ms=0 once the
//     write returned;
//   - a final unterminated line becomes a record when the last descriptor
//     of the open file is released, not at each close of a shared one;
//   - views render every record (value, or key separator value with
//     print.key; null.marker for null), their size is the rendered length,
//     and an open view reads further as the log grows;
//   - a clean remount keeps everything; after kill -9 every record whose
//     close() returned is kept, and of records still in an open file some
//     prefix.

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"math/rand"
	"os"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// modelOp is one step. Which fields matter depends on K.
type modelOp struct {
	K    string `json:"k"`              // kind, see exec
	F    string `json:"f,omitempty"`    // file, view, config name or probe
	V    string `json:"v,omitempty"`    // config value
	N    int    `json:"n,omitempty"`    // a count, offset or index
	Lens []int  `json:"lens,omitempty"` // line lengths
	Tail int    `json:"tail,omitempty"` // bytes of an unterminated line after them
	Cuts []int  `json:"cuts,omitempty"` // write(2) sizes, cycled; none: one write
	Seed int64  `json:"seed,omitempty"` // of the bytes
	Flag bool   `json:"flag,omitempty"`
}

func (o modelOp) String() string {
	b, _ := json.Marshal(o)
	return string(b)
}

const modelDefaultSeed = 20261202

// stepDeadline bounds one operation and its checks (a remount, a kill -9
// and a waited-for final record included); past it the mount is hung.
const stepDeadline = 2 * harnessDeadline

func TestModel(t *testing.T) {
	requireFUSE(t)
	shrinkFor := 3 * time.Minute
	if v := os.Getenv("TOPICFS_MODEL_SHRINK"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil {
			t.Fatalf("TOPICFS_MODEL_SHRINK: %v", err)
		}
		shrinkFor = d
	}
	if path := os.Getenv("TOPICFS_MODEL_REPLAY"); path != "" {
		ops := readOps(t, path)
		t.Logf("replaying %d operations of %s", len(ops), path)
		if n, err := runModel(t, ops, nil, 0); err != nil {
			reportModelFailure(t, 0, ops[:n+1], err, shrinkFor)
		}
		return
	}
	var (
		seed  = int64(modelDefaultSeed)
		nops  = envInt("TOPICFS_MODEL_OPS", 40)
		until time.Time
	)
	if v := os.Getenv("TOPICFS_MODEL_SEED"); v != "" {
		s, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			t.Fatalf("TOPICFS_MODEL_SEED: %v", err)
		}
		seed = s
	}
	if v := os.Getenv("TOPICFS_MODEL_DURATION"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil {
			t.Fatalf("TOPICFS_MODEL_DURATION: %v", err)
		}
		until = time.Now().Add(d)
		if os.Getenv("TOPICFS_MODEL_SEED") == "" {
			seed = time.Now().UnixNano()
		}
	}
	for {
		// One subtest per seed: without -v only a failing seed's log
		// (every operation) is printed.
		ok := t.Run(fmt.Sprintf("seed=%d", seed), func(t *testing.T) {
			t.Logf("model: seed %d, %d operations (TOPICFS_MODEL_SEED=%d TOPICFS_MODEL_OPS=%d reproduces this run)", seed, nops, seed, nops)
			rng := rand.New(rand.NewSource(seed))
			var ops []modelOp
			n, err := runModel(t, nil, func(r *modelRun) (modelOp, bool) {
				if len(ops) == nops {
					return modelOp{}, false
				}
				op := genOp(rng, r)
				ops = append(ops, op)
				return op, true
			}, 0)
			if err != nil {
				reportModelFailure(t, seed, ops[:n+1], err, shrinkFor)
			}
		})
		if !ok || until.IsZero() || time.Now().After(until) {
			return
		}
		seed++
	}
}

// reportModelFailure shrinks a failing operation list and fails the test
// with the shortest one found.
func reportModelFailure(t *testing.T, seed int64, ops []modelOp, err error, budget time.Duration) {
	t.Helper()
	t.Logf("model: FAILED (seed %d) at operation %d: %v", seed, len(ops)-1, err)
	best, bestErr := shrinkOps(t, ops, err, budget)
	f, ferr := os.CreateTemp("", fmt.Sprintf("topicfs-model-%d-*.ops", seed))
	where := ""
	if ferr == nil {
		for _, op := range best {
			fmt.Fprintln(f, op)
		}
		_ = f.Close()
		where = fmt.Sprintf("\nreplay: TOPICFS_MODEL_REPLAY=%s go test -race -count=1 -run '^TestModel$' ./tests/", f.Name())
	}
	var b strings.Builder
	for i, op := range best {
		fmt.Fprintf(&b, "  %3d %s\n", i, op)
	}
	t.Fatalf("model: seed %d fails; shortest operation list found (%d of %d operations) fails with:\n  %v\noperations:\n%s%s",
		seed, len(best), len(ops), bestErr, b.String(), where)
}

// shrinkOps removes chunks of operations (halves, then quarters, ...) while
// the rest still fails the same way on a fresh mount, for at most budget.
func shrinkOps(t *testing.T, ops []modelOp, err error, budget time.Duration) ([]modelOp, error) {
	end := time.Now().Add(budget)
	best, bestErr := ops, err
	sig := failureSignature(err)
	for chunk := len(best) / 2; chunk >= 1 && time.Now().Before(end); chunk /= 2 {
		for i := 0; i+chunk <= len(best) && time.Now().Before(end); {
			cand := append(append([]modelOp{}, best[:i]...), best[i+chunk:]...)
			if n, err := runModel(t, cand, nil, 1); err != nil && failureSignature(err) == sig {
				best, bestErr = cand[:n+1], err
				t.Logf("model: shrunk to %d operations", len(best))
				continue
			}
			i += chunk
		}
	}
	return best, bestErr
}

// failureSignature is what two failures of the same bug have in common:
// the start of the message, without numbers.
func failureSignature(err error) string {
	s := strings.Map(func(r rune) rune {
		if r >= '0' && r <= '9' {
			return -1
		}
		return r
	}, err.Error())
	if i := strings.IndexAny(s, "\n\""); i >= 0 {
		s = s[:i]
	}
	return s[:min(len(s), 48)]
}

func readOps(t *testing.T, path string) []modelOp {
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var ops []modelOp
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		if strings.TrimSpace(sc.Text()) == "" {
			continue
		}
		var op modelOp
		if err := json.Unmarshal(sc.Bytes(), &op); err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		ops = append(ops, op)
	}
	return ops
}

// modelRun is one run: a mount, the model of its current topic, the open
// append file and the open views.
type modelRun struct {
	t     *testing.T
	m     *mountProc
	quiet int // 1: a shrinking run, log less

	topics int    // topics created so far
	topic  string // the current topic ("" before the first)
	cfg    modelCfg

	committed []mrec // records that must be visible
	floating  []mrec // records of the open append file that may be visible yet
	logBytes  int    // rendered bytes of the topic, roughly

	w       *modelWriter
	readers []*modelReader
}

type modelCfg struct {
	PrintKey, ParseKey bool
	Sep, Null          string
	Linger             int
	SegmentBytes       int
}

// maxRecord is the largest record batch the topic takes: as in Kafka, the
// smaller of max.message.bytes and segment.bytes (a batch never spans
// segments).
func (c modelCfg) maxRecord() int { return min(modelMaxMessage, c.SegmentBytes) }

func (c modelCfg) view() viewFmt { return viewFmt{PrintKey: c.PrintKey, Sep: c.Sep, Null: c.Null} }

// modelWriter is the open append file: its descriptors (dups of one open
// file description), its framing config and the unterminated line so far.
type modelWriter struct {
	file    string
	lc      lineCfg
	linger  int
	fds     []int
	partial []byte
	owed    []byte // append.jsonl: the bytes that complete the begun line
}

// modelReader is an open view being read further as the log grows.
type modelReader struct {
	f     *os.File
	name  string
	start int
	jsonl bool
	fmt   viewFmt
	got   []byte
}

// runModel runs ops (or, with next, the operations next returns) on a fresh
// mount. It returns the index of the failing operation and the failure.
func runModel(t *testing.T, ops []modelOp, next func(*modelRun) (modelOp, bool), quiet int) (int, error) {
	r := &modelRun{t: t, quiet: quiet}
	r.m = startMount(t, mountOpts{})
	defer r.stop()
	for i := 0; ; i++ {
		var op modelOp
		if next != nil {
			var ok bool
			if op, ok = next(r); !ok {
				return i, r.finalCheck()
			}
		} else if i < len(ops) {
			op = ops[i]
		} else {
			return i - 1, r.finalCheck()
		}
		if quiet == 0 {
			t.Logf("op %d: %s", i, op)
		}
		start := time.Now()
		// A request the mount never answers would block this test (and
		// the tool it runs) for ever: after stepDeadline, abort the FUSE
		// connection, which fails every pending request.
		var hung atomic.Bool
		watchdog := time.AfterFunc(stepDeadline, func() {
			hung.Store(true)
			_ = abortFUSEConnection(r.m.fuseConn)
		})
		err := r.exec(op)
		if err == nil {
			if op.K == "remount" || op.K == "kill" {
				err = r.checkAll()
			} else {
				err = r.check(i)
			}
			if err != nil {
				err = fmt.Errorf("after %s: %w", op.K, err)
			}
		}
		watchdog.Stop()
		if hung.Load() {
			err = fmt.Errorf("the mount did not answer within %v (FUSE connection aborted; it was spinning or blocked): %v", stepDeadline, err)
		}
		if err != nil {
			return i, r.withStderr(err)
		}
		if d := time.Since(start); quiet == 0 && d > time.Second {
			t.Logf("op %d took %v", i, d.Round(time.Millisecond))
		}
	}
}

// withStderr adds what the mount printed about a panic to err.
func (r *modelRun) withStderr(err error) error {
	s := r.m.Stderr()
	if i := strings.Index(s, "panic"); i >= 0 {
		return fmt.Errorf("%w\nmount stderr from its panic:\n%s", err, s[i:min(len(s), i+4000)])
	}
	if !r.m.Running() {
		return fmt.Errorf("%w\n(the mount process exited)", err)
	}
	return err
}

func (r *modelRun) finalCheck() error {
	if r.topic == "" {
		return nil
	}
	if err := r.closeWriter(); err != nil {
		return err
	}
	return r.checkAll()
}

// stop ends the run's mount without failing the test (a shrinking run may
// leave a broken one).
func (r *modelRun) stop() {
	r.dropReaders()
	if r.w != nil {
		for _, fd := range r.w.fds {
			_ = unix.Close(fd)
		}
		r.w = nil
	}
	if r.m.Running() {
		_ = r.m.Cmd.Process.Signal(syscall.SIGTERM)
	}
	r.m.Wait()
	if isMounted(r.m.Dir) {
		lazyUnmount(r.m.Dir)
	}
}

func (r *modelRun) path(elem ...string) string {
	return r.m.Path(append([]string{r.topic}, elem...)...)
}

// exec runs one operation against the mount and the model. Operations that
// do not apply to the current state (possible in a shrunk list) do nothing.
func (r *modelRun) exec(op modelOp) error {
	if r.topic == "" && op.K != "topic" {
		return nil
	}
	switch op.K {
	case "topic":
		return r.newTopic()
	case "open":
		return r.open(op)
	case "dup":
		if r.w != nil {
			fd, err := unix.Dup(r.w.fds[0])
			if err != nil {
				return err
			}
			r.w.fds = append(r.w.fds, fd)
		}
		return nil
	case "write":
		return r.write(op)
	case "long":
		return r.long(op)
	case "bad":
		return r.bad(op)
	case "close":
		return r.closeFd(op.N)
	case "fsync":
		return r.fsync()
	case "shell":
		return r.shell(op)
	case "config":
		return r.config(op)
	case "reader":
		return r.openReader(op)
	case "read":
		return r.read(op.N)
	case "probe":
		return r.probe(op)
	case "remount":
		if err := r.closeWriter(); err != nil {
			return err
		}
		r.dropReaders()
		r.m.Remount()
		return nil
	case "kill":
		return r.kill()
	}
	return fmt.Errorf("unknown operation %q", op.K)
}

func (r *modelRun) newTopic() error {
	if err := r.closeWriter(); err != nil {
		return err
	}
	r.dropReaders()
	r.topics++
	r.topic = fmt.Sprintf("t%d", r.topics)
	r.cfg = modelCfg{Sep: "\t", Linger: 5, SegmentBytes: 1 << 30}
	r.committed, r.floating, r.logBytes = nil, nil, 0
	if err := os.Mkdir(r.path(), 0o755); err != nil {
		return err
	}
	return r.writeConfig(fmt.Sprintf("max.message.bytes=%d\n", modelMaxMessage))
}

func (r *modelRun) writeConfig(text string) error {
	f, err := os.OpenFile(r.path("config"), os.O_WRONLY|os.O_TRUNC, 0)
	if err != nil {
		return err
	}
	if _, err := f.WriteString(text); err != nil {
		_ = f.Close()
		return fmt.Errorf("config %q: %w", text, err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("config %q: close: %w", text, err)
	}
	return nil
}

func (r *modelRun) config(op modelOp) error {
	switch op.F {
	case "print.key", "key.separator", "null.marker":
		// Open views keep the format they were opened with: check and
		// close them first.
		if err := r.readAll(); err != nil {
			return err
		}
		r.dropReaders()
	}
	if err := r.writeConfig(op.F + "=" + op.V + "\n"); err != nil {
		return err
	}
	switch op.F {
	case "print.key":
		r.cfg.PrintKey = op.V == "true"
	case "parse.key":
		r.cfg.ParseKey = op.V == "true"
	case "key.separator":
		r.cfg.Sep = op.V
	case "null.marker":
		r.cfg.Null = op.V
	case "linger.ms":
		r.cfg.Linger, _ = strconv.Atoi(op.V)
	case "segment.bytes":
		r.cfg.SegmentBytes, _ = strconv.Atoi(op.V)
	}
	return nil
}

func (r *modelRun) open(op modelOp) error {
	if r.w != nil {
		return nil
	}
	flags := unix.O_WRONLY | unix.O_APPEND | unix.O_CLOEXEC
	if op.Flag {
		flags = unix.O_WRONLY | unix.O_TRUNC | unix.O_CLOEXEC // as the shell's >
	}
	fd, err := unix.Open(r.path(op.F), flags, 0)
	if err != nil {
		return fmt.Errorf("open %s: %w", op.F, err)
	}
	r.w = &modelWriter{
		file:   op.F,
		lc:     lineCfg{ParseKey: r.cfg.ParseKey, Sep: r.cfg.Sep, Null: r.cfg.Null, JSONL: strings.HasSuffix(op.F, ".jsonl")},
		linger: r.cfg.Linger,
		fds:    []int{fd},
	}
	return nil
}

// writeAll writes b with one write(2) (more only if the kernel takes less).
func writeAll(fd int, b []byte) error {
	for len(b) > 0 {
		n, err := unix.Write(fd, b)
		if err != nil {
			return err
		}
		if n <= 0 {
			return io.ErrShortWrite
		}
		b = b[n:]
	}
	return nil
}

// chunks cuts b into write(2) sizes: cuts cycled, the last chunk the rest
// (at most maxChunks chunks, so tiny cuts stay cheap).
func chunks(b []byte, cuts []int) [][]byte {
	const maxChunks = 48
	var out [][]byte
	for i := 0; len(b) > 0; i++ {
		n := len(b)
		if len(cuts) > 0 && cuts[i%len(cuts)] > 0 && i < maxChunks-1 {
			n = min(n, cuts[i%len(cuts)])
		}
		out = append(out, b[:n])
		b = b[n:]
	}
	return out
}

// accept adds records appended through the open file: visible at once with
// linger.ms=0, else within linger.ms.
func (r *modelRun) accept(recs ...mrec) {
	for i := range recs {
		r.logBytes += len(r.cfg.view().render(nil, &recs[i])) + 60
	}
	if r.w != nil && r.w.linger == 0 {
		r.committed = append(r.committed, recs...)
		return
	}
	r.floating = append(r.floating, recs...)
}

// settle makes the records of the open file committed (after a close or
// fsync returned).
func (r *modelRun) settle() {
	r.committed = append(r.committed, r.floating...)
	r.floating = nil
}

// write writes whole lines and maybe an unterminated rest, at the op's cut
// points, through the file's descriptors in turn. Every line is valid and
// fits, so every write must succeed.
func (r *modelRun) write(op modelOp) error {
	w := r.w
	if w == nil {
		return nil
	}
	data, owed := genWriteData(op, w)
	lines, rest := splitLines(append(append([]byte{}, w.partial...), data...))
	var recs []mrec
	for _, l := range lines {
		rec, ok := w.lc.parse(l)
		if !ok || rec.recordSize() > r.cfg.maxRecord() {
			return nil // not applicable here (a shrunk list)
		}
		recs = append(recs, rec)
	}
	if len(rest) > modelMaxMessage/2 {
		return nil
	}
	for i, c := range chunks(data, op.Cuts) {
		if err := writeAll(w.fds[i%len(w.fds)], c); err != nil {
			return fmt.Errorf("write(2) #%d of %d bytes: %w", i, len(c), err)
		}
	}
	w.partial, w.owed = rest, owed
	r.accept(recs...)
	return nil
}

// genWriteData makes the bytes of a write op: first what completes the begun
// line (append.jsonl), then lines of the op's lengths, then Tail bytes of a
// begun line. For append.jsonl it also returns what completes that line.
func genWriteData(op modelOp, w *modelWriter) (data, owed []byte) {
	rng := rand.New(rand.NewSource(op.Seed))
	var b []byte
	if w.lc.JSONL {
		b = append(b, w.owed...)
		for _, n := range op.Lens {
			l, _ := genJSONLine(rng, n)
			b = append(append(b, l...), '\n')
		}
		if op.Tail > 0 {
			l, _ := genJSONLine(rng, op.Tail)
			cut := 1 + rng.Intn(len(l))
			b = append(b, l[:cut]...)
			owed = append(append([]byte{}, l[cut:]...), '\n')
		}
		return b, owed
	}
	line := func(n int) []byte {
		if !w.lc.ParseKey {
			return genBytes(rng, n, "")
		}
		var k []byte
		switch rng.Intn(6) {
		case 0:
			k = []byte(w.lc.Null)
		default:
			k = genBytes(rng, 1+rng.Intn(8), w.lc.Sep)
		}
		v := genBytes(rng, n, "")
		if rng.Intn(6) == 0 {
			v = []byte(w.lc.Null)
		}
		return append(append(k, w.lc.Sep...), v...)
	}
	for _, n := range op.Lens {
		b = append(append(b, line(n)...), '\n')
	}
	if op.Tail > 0 {
		t := line(op.Tail)
		b = append(b, t[:min(len(t), op.Tail)]...)
	}
	return b, nil
}
