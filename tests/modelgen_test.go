package tests

// TestModel's checks of the views and its generator of random operations
// (see model_test.go).

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"math/rand"
	"os"
	"os/exec"
	"strconv"
	"strings"
)

// check compares records (bytes and size) and, while the log is small or
// every fourth step, records.jsonl with the model after each operation.
func (r *modelRun) check(step int) error {
	if r.topic == "" {
		return nil
	}
	f := r.cfg.view()
	want := f.renderAll(r.committed)
	path := r.path("0", "records")
	got, err := os.ReadFile(path)
	if err != nil {
		return fmt.Errorf("read records: %w", err)
	}
	if _, err := matchPlain(got, want, f, r.floating); err != nil {
		return fmt.Errorf("records: %w", err)
	}
	if len(r.floating) == 0 {
		st, err := os.Stat(path)
		if err != nil {
			return err
		}
		if st.Size() != int64(len(want)) {
			return fmt.Errorf("records: size %d, rendered length %d", st.Size(), len(want))
		}
	}
	if r.logBytes < 512<<10 || step%4 == 0 {
		got, err := os.ReadFile(r.path("0", "records.jsonl"))
		if err != nil {
			return fmt.Errorf("read records.jsonl: %w", err)
		}
		if _, err := matchJSON(got, 0, r.committed, r.floating); err != nil {
			return fmt.Errorf("records.jsonl: %w", err)
		}
	}
	return nil
}

// checkAll runs every probe and reads every open view.
func (r *modelRun) checkAll() error {
	if r.topic == "" {
		return nil
	}
	if err := r.check(0); err != nil {
		return err
	}
	if err := r.readAll(); err != nil {
		return err
	}
	n := len(r.committed)
	for _, op := range []modelOp{
		{F: "wc"}, {F: "tail", N: 3}, {F: "head", N: 4097}, {F: "dd", N: 1},
		{F: "byoff", N: n / 2}, {F: "byoffjsonl", N: n / 3}, {F: "byoff", N: n}, {F: "jsonl"},
	} {
		op.K = "probe"
		if err := r.probe(op); err != nil {
			return err
		}
	}
	return nil
}

// probe reads a view with a shell tool (or by offset) and compares the
// output with the model. It needs a settled log (no records in flight).
func (r *modelRun) probe(op modelOp) error {
	if len(r.floating) > 0 {
		return nil
	}
	f := r.cfg.view()
	want := f.renderAll(r.committed)
	path := r.path("0", "records")
	run := func(name string, args ...string) ([]byte, error) {
		out, err := exec.Command(name, args...).Output()
		if err != nil {
			var ee *exec.ExitError
			if errors.As(err, &ee) {
				err = fmt.Errorf("%w: %s", err, ee.Stderr)
			}
			return nil, fmt.Errorf("%s %s: %w", name, strings.Join(args, " "), err)
		}
		return out, nil
	}
	var (
		got, exp []byte
		err      error
	)
	switch op.F {
	case "wc":
		if got, err = run("sh", "-c", `wc -l < "$1"`, "sh", path); err != nil {
			return err
		}
		got = bytes.TrimSpace(got)
		exp = []byte(strconv.Itoa(bytes.Count(want, []byte("\n"))))
	case "tail":
		got, err = run("tail", "-n", strconv.Itoa(op.N), path)
		exp = tailLines(want, op.N)
	case "head":
		got, err = run("head", "-c", strconv.Itoa(op.N), path)
		exp = want[:min(op.N, len(want))]
	case "dd":
		got, err = run("dd", "if="+path, "bs=4096", "skip="+strconv.Itoa(op.N), "status=none")
		exp = want[min(op.N*4096, len(want)):]
	case "byoff":
		off := op.N % (len(r.committed) + 1)
		p := r.path("0", "by-offset", strconv.Itoa(off))
		if got, err = os.ReadFile(p); err != nil {
			return fmt.Errorf("by-offset/%d: %w", off, err)
		}
		exp = f.renderAll(r.committed[off:])
		if st, err := os.Stat(p); err != nil || st.Size() != int64(len(exp)) {
			return fmt.Errorf("by-offset/%d: stat %v, rendered length %d", off, st, len(exp))
		}
	case "byoffjsonl", "jsonl":
		off, p := 0, r.path("0", "records.jsonl")
		if op.F == "byoffjsonl" {
			off = op.N % (len(r.committed) + 1)
			p = r.path("0", "by-offset", strconv.Itoa(off)+".jsonl")
		}
		if got, err = os.ReadFile(p); err != nil {
			return fmt.Errorf("%s: %w", p, err)
		}
		if _, err := matchJSON(got, off, r.committed, nil); err != nil {
			return fmt.Errorf("%s: %w", p, err)
		}
		if st, err := os.Stat(p); err != nil || st.Size() != int64(len(got)) {
			return fmt.Errorf("%s: stat %v, %d bytes read", p, st, len(got))
		}
		return nil
	default:
		return fmt.Errorf("unknown probe %q", op.F)
	}
	if err != nil {
		return err
	}
	if !bytes.Equal(got, exp) {
		return fmt.Errorf("probe %s %d: %d bytes differ from the model's %d at byte %d%s",
			op.F, op.N, len(got), len(exp), diffAt(got, exp), excerpt(got, exp))
	}
	return nil
}

// openReader opens a view and keeps it open; reads come later (read).
func (r *modelRun) openReader(op modelOp) error {
	if len(r.readers) >= 4 {
		return nil
	}
	rd := &modelReader{fmt: r.cfg.view()}
	switch op.F {
	case "records":
		rd.name = "records"
	case "records.jsonl":
		rd.name, rd.jsonl = "records.jsonl", true
	case "byoff", "byoffjsonl":
		rd.start = op.N % (len(r.committed) + 1)
		rd.name = "by-offset/" + strconv.Itoa(rd.start)
		if op.F == "byoffjsonl" {
			rd.name += ".jsonl"
			rd.jsonl = true
		}
	default:
		return fmt.Errorf("unknown view %q", op.F)
	}
	f, err := os.Open(r.path("0", rd.name))
	if err != nil {
		return fmt.Errorf("open %s: %w", rd.name, err)
	}
	rd.f = f
	r.readers = append(r.readers, rd)
	return nil
}

// read reads open view i further, to its current end, and compares
// everything it read since it was opened with the model.
func (r *modelRun) read(i int) error {
	if len(r.readers) == 0 {
		return nil
	}
	rd := r.readers[i%len(r.readers)]
	buf := make([]byte, 256<<10)
	for {
		n, err := rd.f.Read(buf)
		rd.got = append(rd.got, buf[:n]...)
		if err == io.EOF || n == 0 && err == nil {
			break
		}
		if err != nil {
			return fmt.Errorf("read %s (open since offset %d): %w", rd.name, rd.start, err)
		}
	}
	if rd.jsonl {
		if _, err := matchJSON(rd.got, rd.start, r.committed, r.floating); err != nil {
			return fmt.Errorf("%s, open while the log grew: %w", rd.name, err)
		}
		return nil
	}
	if _, err := matchPlain(rd.got, rd.fmt.renderAll(r.committed[rd.start:]), rd.fmt, r.floating); err != nil {
		return fmt.Errorf("%s, open while the log grew: %w", rd.name, err)
	}
	return nil
}

func (r *modelRun) readAll() error {
	for i := range r.readers {
		if err := r.read(i); err != nil {
			return err
		}
	}
	return nil
}

func (r *modelRun) dropReaders() {
	for _, rd := range r.readers {
		_ = rd.f.Close()
	}
	r.readers = nil
}

// Lengths around every buffer size of the code: 4 KiB (index interval,
// reader minimum), 16 KiB (batch.size), 64 KiB (chunks, checkpoints,
// submits), 128 KiB (the kernel's default read size), 1 MiB (WRITE size,
// read buffers) and max.message.bytes.
var modelBoundaries = []int{4096, 16384, 65536, 131072}

// genLen picks a line length: mostly short, often at a boundary ±1, up to
// limit.
func genLen(rng *rand.Rand, limit int) int {
	var n int
	switch k := rng.Intn(10); {
	case k < 4:
		n = rng.Intn(40)
	case k < 6:
		n = rng.Intn(3000)
	case k < 8:
		n = modelBoundaries[rng.Intn(len(modelBoundaries))] + rng.Intn(3) - 1
	case k < 9:
		n = limit - rng.Intn(2)
	default:
		n = rng.Intn(limit + 1)
	}
	return max(min(n, limit), 0)
}

// genCuts picks write(2) sizes: often one write, else sizes at boundaries.
func genCuts(rng *rand.Rand) []int {
	if rng.Intn(5) < 2 {
		return nil
	}
	sizes := []int{1, 2, 100, 4095, 4096, 4097, 65535, 65536, 65537, 131072, 1 << 20, 1<<20 + 1}
	cuts := make([]int, 1+rng.Intn(4))
	for i := range cuts {
		if rng.Intn(4) == 0 {
			cuts[i] = 1 + rng.Intn(300000)
		} else {
			cuts[i] = sizes[rng.Intn(len(sizes))]
		}
	}
	return cuts
}

// genWrite makes a write operation for the open file w.
func genWrite(rng *rand.Rand, w *modelWriter, cfg modelCfg, seed int64) modelOp {
	op := modelOp{K: "write", Seed: seed, Cuts: genCuts(rng)}
	limit := maxPlainValue() - (modelMaxMessage - cfg.maxRecord()) - 32 // room for a key
	if w.lc.JSONL {
		limit = min(limit, 100000)
	}
	if !w.lc.JSONL && !w.lc.ParseKey && rng.Intn(12) == 0 {
		// Exactly 1 MiB of lines, ±1, in one write(2).
		for i := 0; i < 256; i++ {
			op.Lens = append(op.Lens, 4095)
		}
		op.Lens[255] += rng.Intn(3) - 1
		op.Lens[0] = max(op.Lens[0]-len(w.partial), 0)
		op.Cuts = nil
		return op
	}
	total := 0
	for i := 0; i < 1+rng.Intn(12) && total < 1<<20; i++ {
		l := limit
		if i == 0 {
			l = limit - len(w.partial)
		}
		n := genLen(rng, l)
		if w.lc.JSONL && n > 20000 && rng.Intn(3) > 0 {
			n = rng.Intn(2000)
		}
		op.Lens = append(op.Lens, n)
		total += n
	}
	if rng.Intn(4) == 0 {
		op.Tail = 1 + genLen(rng, min(limit/2, 70000))
	}
	return op
}

var modelConfigs = map[string][]string{
	"segment.bytes":        {"1073741824", "1048576", "200000", "50000"},
	"print.key":            {"true", "false"},
	"parse.key":            {"true", "false"},
	"key.separator":        {":", "::", "\t"},
	"null.marker":          {"", "NULL"},
	"linger.ms":            {"0", "5", "50"},
	"batch.size":           {"16384", "1", "100000"},
	"index.interval.bytes": {"4096", "100"},
}

var modelConfigNames = []string{"segment.bytes", "print.key", "parse.key", "key.separator", "null.marker", "linger.ms", "batch.size", "index.interval.bytes"}

// genOp picks the next operation from the run's state. It is one weighted
// switch per state (writer open or not) on purpose: the weights are read
// and tuned together.
func genOp(rng *rand.Rand, r *modelRun) modelOp {
	seed := rng.Int63n(1 << 40)
	if r.topic == "" || r.logBytes > 2<<20 && r.w == nil {
		return modelOp{K: "topic"}
	}
	pick := rng.Intn(100)
	views := []string{"records", "records.jsonl", "byoff", "byoffjsonl"}
	probes := []modelOp{
		{K: "probe", F: "wc"}, {K: "probe", F: "tail", N: []int{0, 1, 3, 10, 1000}[rng.Intn(5)]},
		{K: "probe", F: "head", N: []int{0, 1, 4095, 4096, 4097, 65536, 131073, 1<<20 + 1}[rng.Intn(8)]},
		{K: "probe", F: "dd", N: []int{0, 1, 16, 32, 256}[rng.Intn(5)]},
		{K: "probe", F: "byoff", N: rng.Intn(1 << 20)}, {K: "probe", F: "byoffjsonl", N: rng.Intn(1 << 20)},
		{K: "probe", F: "jsonl"},
	}
	config := func() modelOp {
		name := modelConfigNames[rng.Intn(len(modelConfigNames))]
		vals := modelConfigs[name]
		return modelOp{K: "config", F: name, V: vals[rng.Intn(len(vals))]}
	}
	if w := r.w; w != nil {
		switch {
		case pick < 38:
			return genWrite(rng, w, r.cfg, seed)
		case pick < 46:
			n := []int{maxPlainValue() - 1, maxPlainValue(), maxPlainValue() + 1, maxPlainValue() + 2, 250000, 1<<20 + 3}[rng.Intn(6)]
			if w.lc.JSONL {
				n = []int{65536, 131072, 140000, maxPlainValue() + 1, 300000}[rng.Intn(5)]
			}
			cuts := []int{4096, 65536, 100000, 131072, 199999, 200001, 512 << 10}
			op := modelOp{K: "long", N: n, Seed: seed, Flag: rng.Intn(2) == 0}
			for i := 0; i < 1+rng.Intn(3); i++ {
				op.Cuts = append(op.Cuts, cuts[rng.Intn(len(cuts))])
			}
			return op
		case pick < 50:
			return modelOp{K: "bad", N: rng.Intn(6), Seed: seed}
		case pick < 55:
			return modelOp{K: "dup"}
		case pick < 68:
			return modelOp{K: "close", N: rng.Intn(4)}
		case pick < 72:
			return modelOp{K: "fsync"}
		case pick < 77:
			return modelOp{K: "reader", F: views[rng.Intn(len(views))], N: rng.Intn(1 << 20)}
		case pick < 83:
			return modelOp{K: "read", N: rng.Intn(4)}
		case pick < 88:
			return probes[rng.Intn(len(probes))]
		case pick < 91:
			return modelOp{K: "kill"}
		case pick < 95:
			return config()
		default:
			return genWrite(rng, w, r.cfg, seed)
		}
	}
	switch {
	case pick < 30:
		files := []string{"append", "0/append", "0/append", "append.jsonl", "0/append.jsonl"}
		return modelOp{K: "open", F: files[rng.Intn(len(files))], Flag: rng.Intn(2) == 0}
	case pick < 38:
		op := genWrite(rng, &modelWriter{lc: lineCfg{ParseKey: r.cfg.ParseKey, Sep: r.cfg.Sep, Null: r.cfg.Null}}, r.cfg, seed)
		op.K, op.F, op.Cuts = "shell", []string{"append", "0/append"}[rng.Intn(2)], nil
		return op
	case pick < 50:
		return config()
	case pick < 56:
		return modelOp{K: "reader", F: views[rng.Intn(len(views))], N: rng.Intn(1 << 20)}
	case pick < 64:
		return modelOp{K: "read", N: rng.Intn(4)}
	case pick < 86:
		return probes[rng.Intn(len(probes))]
	case pick < 91:
		return modelOp{K: "remount"}
	case pick < 96:
		return modelOp{K: "kill"}
	default:
		return modelOp{K: "open", F: "0/append"}
	}
}
