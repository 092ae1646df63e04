package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"time"

	"github.com/topicfs/topicfs/engine"
	"github.com/topicfs/topicfs/engine/record"
	"github.com/topicfs/topicfs/engine/vfs"
)

// pointReads is how many point reads each side of an engine point row
// times (in pointRounds interleaved rounds).
func (r *runner) pointReads() int {
	if r.opts.Quick {
		return 20_000
	}
	return 200_000
}

const pointRounds = 4

// pointBytes is the .log bytes of each engine point partition: the read
// partition's size, at most 256 MiB, whose records' positions (4 bytes
// each) stay well within the engine's memo budget, so every read after the
// warm-up is warm.
func (r *runner) pointBytes() int64 { return min(r.sizes.Read, 256<<20) }

// pointSpan is where a record's bytes lie in a partition's one .log file.
type pointSpan struct {
	off, pos int64
	n        int
}

// enginePoint times engine.PointReader.ReadRecord at random offsets of a
// partition of 100-byte values in batches of about 16 KiB and of about
// 1 MiB (warm: every batch read once before), beside a pread of exactly
// the same records' bytes from the .log file, the sides interleaved in
// rounds; it reports the median and the 99th percentile of each.
func enginePoint(ctx context.Context, r *runner) ([]Row, error) {
	var rows []Row
	for _, c := range []struct {
		batch      int
		name       string
		p50, p99us float64
	}{{16 << 10, "16 KiB", 1.5, 3}, {1 << 20, "1 MiB", 3, 6}} {
		if ctx.Err() != nil {
			return rows, ctx.Err()
		}
		eng, raw, err := r.pointLatencies(c.batch)
		if err != nil {
			return rows, errorf(c.name+" batches", err)
		}
		for _, q := range []struct {
			name   string
			q      float64
			target float64
		}{{"median", 0.5, c.p50}, {"p99", 0.99, c.p99us}} {
			v := float64(quantile(eng, q.q)) / 1e3
			row := Row{
				Workload: "engine-point",
				Name:     fmt.Sprintf("engine point read %s, %s batches", q.name, c.name),
				Value:    Figure{V: v, Unit: "µs"},
				BaseName: "pread of the record",
				Baseline: Figure{V: float64(quantile(raw, q.q)) / 1e3, Unit: "µs"},
				Target:   fmt.Sprintf("≤ %g µs", q.target),
			}
			row.ratio()
			met := v <= q.target
			row.Met = &met
			if c.batch == 1<<20 && q.name == "p99" {
				row.Note = fmt.Sprintf("engine.PointReader.ReadRecord at %d random offsets of %s of 100-byte values per batch size, warm (every batch read once before: checked, remembered, its records' positions kept; .log in the page cache, mapped); baseline: pread of exactly the record's bytes from the .log file at the same offsets, in the same interleaved rounds", len(eng), fmtBytes(r.pointBytes()))
			}
			rows = append(rows, row)
		}
	}
	return rows, nil
}

// pointLatencies builds a partition of batches of about batch bytes and
// returns the sorted latencies of the engine's point reads and of the raw
// preads of the same records.
func (r *runner) pointLatencies(batch int) (eng, raw []time.Duration, err error) {
	dir := r.path("point", fmt.Sprintf("b%d-0", batch))
	defer os.RemoveAll(filepath.Dir(dir))
	cfg := engine.DefaultConfig()
	cfg.MaxMessageBytes = 2 << 20
	part, err := engine.OpenPartition(vfs.OS, dir, "b", 0, newPartitionOptions(cfg))
	if err != nil {
		return nil, nil, err
	}
	defer part.Close()
	const size = 100
	per := max(batch/(size+9), 1)
	recs := make([]record.Record, per)
	p := newPool(5)
	for i := int64(0); i*int64(batch) < r.pointBytes(); i++ {
		chunk := p.chunk(i, per*size)
		for j := range per {
			recs[j] = record.Record{Timestamp: -1, Value: chunk[j*size : (j+1)*size : (j+1)*size]}
		}
		if _, _, err := part.Append(recs); err != nil {
			return nil, nil, err
		}
	}
	var pr engine.PointReader
	leo := part.LogEndOffset()
	for o := int64(0); o < leo; o += 64 { // warm: every batch checked, remembered, anchored
		if _, err := pr.ReadRecord(part, o); err != nil {
			return nil, nil, err
		}
	}
	rng := rand.New(rand.NewPCG(uint64(batch), 7))
	offs := make([]int64, r.pointReads())
	for i := range offs {
		offs[i] = rng.Int64N(leo)
	}
	spans, err := recordSpans(part, offs)
	if err != nil {
		return nil, nil, err
	}
	f, err := os.Open(filepath.Join(dir, "00000000000000000000.log"))
	if err != nil {
		return nil, nil, err
	}
	defer f.Close()
	buf := make([]byte, 64<<10)
	per = len(offs) / pointRounds
	for k := range pointRounds {
		for i := k * per; i < (k+1)*per; i++ {
			t0 := time.Now()
			rec, err := pr.ReadRecord(part, offs[i])
			eng = append(eng, time.Since(t0))
			if err != nil || rec.Offset != offs[i] || len(rec.Value) != size {
				return nil, nil, fmt.Errorf("offset %d: got %d, %d bytes: %v", offs[i], rec.Offset, len(rec.Value), err)
			}
		}
		for i := k * per; i < (k+1)*per; i++ {
			s := spans[i]
			t0 := time.Now()
			n, err := f.ReadAt(buf[:s.n], s.pos)
			raw = append(raw, time.Since(t0))
			if err != nil || n != s.n {
				return nil, nil, fmt.Errorf("pread of offset %d: %d bytes: %v", s.off, n, err)
			}
		}
	}
	slices.Sort(eng)
	slices.Sort(raw)
	return eng, raw, nil
}

// recordSpans returns where the records at offs (one segment of part) lie
// in its .log file, in the order of offs.
func recordSpans(part *engine.Partition, offs []int64) ([]pointSpan, error) {
	want := slices.Clone(offs)
	slices.Sort(want)
	at := map[int64]pointSpan{}
	rd := part.NewReader(part.LogStartOffset(), engine.ReaderOptions{})
	defer rd.Close()
	var pos int64
	for i := 0; i < len(want); {
		b, err := rd.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, err
		}
		if want[i] <= b.LastOffset() {
			for q := record.HeaderSize; q < len(b.Raw); {
				delta, end, err := record.RecordFrame(b.Raw, q)
				if err != nil {
					return nil, err
				}
				o := b.BaseOffset + int64(delta)
				for i < len(want) && want[i] == o {
					at[o] = pointSpan{off: o, pos: pos + int64(q), n: end - q}
					i++
				}
				q = end
			}
		}
		pos += int64(b.Size())
	}
	spans := make([]pointSpan, len(offs))
	for i, o := range offs {
		s, ok := at[o]
		if !ok {
			return nil, fmt.Errorf("offset %d not found in the .log", o)
		}
		spans[i] = s
	}
	return spans, nil
}
