package bench

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"slices"
	"strconv"
	"time"
)

// offsetReadSize is what one read(2) of the by-offset row and its
// plain-file baseline asks for: enough for the first line, the same on
// both sides.
const offsetReadSize = 64 << 10

// openFirstLine opens path, reads until the first '\n' and closes it,
// returning the line length without '\n'.
func openFirstLine(path string, buf []byte) (int, error) {
	f, err := os.Open(path)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	got := 0
	for {
		n, err := f.Read(buf[got:])
		if i := bytes.IndexByte(buf[got:got+n], '\n'); i >= 0 {
			return got + i, nil
		}
		got += n
		if err == io.EOF || got == len(buf) {
			return 0, fmt.Errorf("%s: no line in the first %d bytes", path, got)
		}
		if err != nil {
			return 0, err
		}
	}
}

// plainFirstLine opens path, preads buf at pos (where a line starts),
// finds the line's end and closes the file: the plain-file counterpart of
// openFirstLine on a view.
func plainFirstLine(path string, pos int64, buf []byte) (int, error) {
	f, err := os.Open(path)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	n, err := f.ReadAt(buf, pos)
	if i := bytes.IndexByte(buf[:n], '\n'); i >= 0 {
		return i, nil
	}
	if err == nil {
		err = fmt.Errorf("no line in %d bytes", n)
	}
	return 0, fmt.Errorf("%s at %d: %w", path, pos, err)
}

// offsetSide is one side of the by-offset rows: what one open costs
// (open, first line, close), timed at random lines.
type offsetSide struct {
	name    string
	records int64
	rng     *rand.Rand
	open    func(line int64, buf []byte) (int, error)
	lat     []time.Duration
}

// offsetRounds is how many interleaved rounds the sides of the by-offset
// rows are timed in.
const offsetRounds = 4

// timeOpens times the sides in offsetRounds interleaved rounds of opens
// each (after warmup untimed opens per side) and sorts their latencies.
func timeOpens(ctx context.Context, sides []*offsetSide, opens, lineLen int) error {
	buf := make([]byte, offsetReadSize)
	const warmup = 20
	per := max(opens/offsetRounds, 1)
	for round := range offsetRounds + 1 {
		for _, s := range sides {
			n := per
			if round == 0 {
				n = warmup
			}
			for range n {
				if ctx.Err() != nil {
					return ctx.Err()
				}
				line := s.rng.Int64N(s.records)
				start := time.Now()
				k, err := s.open(line, buf)
				d := time.Since(start)
				if err != nil {
					return errorf(s.name, err)
				}
				if k != lineLen-1 {
					return fmt.Errorf("%s: line %d is %d bytes, want %d", s.name, line, k, lineLen-1)
				}
				if round > 0 {
					s.lat = append(s.lat, d)
				}
			}
		}
	}
	for _, s := range sides {
		slices.Sort(s.lat)
	}
	return nil
}

// mountOffset times open of by-offset/N at random N + reading its first
// line + close, on a small and a large partition, beside open + pread +
// close of a plain file of the same lines (the small partition's size),
// the three interleaved in rounds.
func mountOffset(ctx context.Context, r *runner) (rows []Row, err error) {
	v, err := r.viewData(ctx, topicLarge)
	if err != nil {
		return nil, err
	}
	lineLen := v.valueSize + 1
	plain := r.path("plain-lines")
	lines, err := newPool(9).writeLines(plain, v.built[topicSmall].logBytes, lineLen)
	if err != nil {
		return nil, errorf("plain file", err)
	}
	defer os.Remove(plain)
	m, err := r.startMount(ctx, v.dir, nil)
	if err != nil {
		return nil, err
	}
	defer func() {
		if serr := m.stop(); err == nil {
			err = serr
		}
	}()
	view := func(topic string, seed uint64) *offsetSide {
		return &offsetSide{name: topic, records: v.built[topic].records, rng: rand.New(rand.NewPCG(seed, 42)),
			open: func(line int64, buf []byte) (int, error) {
				return openFirstLine(m.path(topic, "0", "by-offset", strconv.FormatInt(line, 10)), buf)
			}}
	}
	small, large := view(topicSmall, 1), view(topicLarge, 2)
	base := &offsetSide{name: "plain file", records: lines, rng: rand.New(rand.NewPCG(3, 42)),
		open: func(line int64, buf []byte) (int, error) { return plainFirstLine(plain, line*int64(lineLen), buf) }}
	if err := timeOpens(ctx, []*offsetSide{small, large, base}, r.sizes.Opens, lineLen); err != nil {
		return nil, err
	}
	us := func(d time.Duration) float64 { return float64(d) / float64(time.Microsecond) }
	for _, s := range []*offsetSide{large, small} {
		topic := s.name
		for _, q := range []struct {
			name   string
			q      float64
			target float64 // µs
		}{{"median", 0.5, 60}, {"p99", 0.99, 300}} {
			row := Row{
				Workload: "mount-offset",
				Name:     fmt.Sprintf("by-offset open+line+close %s, %s", q.name, fmtBytes(v.built[topic].logBytes)),
				Value:    Figure{V: us(quantile(s.lat, q.q)), Unit: "µs", Extra: fmt.Sprintf("%s records", fmtCount(s.records))},
				BaseName: "plain file",
				Baseline: Figure{V: us(quantile(base.lat, q.q)), Unit: "µs"},
				Target:   fmt.Sprintf("≤ %g µs", q.target),
			}
			row.ratio()
			met := row.Value.V <= q.target
			row.Met = &met
			rows = append(rows, row)
		}
	}
	ratio := Row{
		Workload: "mount-offset",
		Name:     fmt.Sprintf("by-offset p99 %s against %s", fmtBytes(v.built[topicLarge].logBytes), fmtBytes(v.built[topicSmall].logBytes)),
		Value:    Figure{V: us(quantile(large.lat, 0.99)), Unit: "µs"},
		BaseName: fmtBytes(v.built[topicSmall].logBytes),
		Baseline: Figure{V: us(quantile(small.lat, 0.99)), Unit: "µs"},
		Note: fmt.Sprintf("%d random offsets per partition after 20 warm-up opens, the plain file (%s of %d-byte lines, open + pread of %s at a line + close) timed as often, in %d interleaved rounds; every open reads %s and finds the first line; .log files in the page cache",
			len(large.lat), fmtBytes(v.built[topicSmall].logBytes), lineLen, fmtBytes(offsetReadSize), offsetRounds, fmtBytes(offsetReadSize)),
	}
	ratio.ratio()
	ratio.ratioAtMost(2)
	return append(rows, ratio), nil
}

// fmtCount formats a count like 2.49 M.
func fmtCount(n int64) string {
	switch {
	case n >= 1e6:
		return fmtNum(float64(n)/1e6) + " M"
	case n >= 1e3:
		return fmtNum(float64(n)/1e3) + " k"
	}
	return strconv.FormatInt(n, 10)
}
