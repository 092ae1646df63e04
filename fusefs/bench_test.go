package fusefs

import (
	"context"
	"fmt"
	"github.com/topicfs/topicfs/backend"
	"math"
	"testing"

	"github.com/topicfs/topicfs/engine"
	"github.com/topicfs/topicfs/engine/record"
)

func BenchmarkRender(b *testing.B) {
	for _, size := range []int{16, 100, 1000} {
		r := record.Record{Offset: 123456, Timestamp: 1700000000000, Key: []byte("key-000042"), Value: make([]byte, size)}
		for i := range r.Value {
			r.Value[i] = 'a' + byte(i%26)
		}
		for _, f := range []struct {
			name string
			f    viewFormat
		}{{"plain", viewFormat{}}, {"keyed", viewFormat{printKey: true, separator: "\t"}}, {"json", viewFormat{json: true}}} {
			b.Run(fmt.Sprintf("%s/value=%d", f.name, size), func(b *testing.B) {
				var dst []byte
				dst = f.f.appendRecord(dst[:0], &r)
				b.SetBytes(int64(len(dst)))
				b.ReportAllocs()
				for b.Loop() {
					dst = f.f.appendRecord(dst[:0], &r)
				}
				b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "records/s")
			})
		}
	}
}

func BenchmarkParseLine(b *testing.B) {
	plain := []byte("key-000042\tsome value of a typical length for a log line, about a hundred bytes long...")
	js := appendJSONRecord(nil, &record.Record{Key: []byte("key-000042"), Value: plain[11:], Headers: []record.Header{{Key: "h", Value: []byte("v")}}})
	js = js[:len(js)-1]
	b.Run("plain-keyed", func(b *testing.B) {
		b.SetBytes(int64(len(plain)))
		for b.Loop() {
			if _, err := parsePlainLine(plain, lineConfig{parseKey: true, separator: "\t"}); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("json", func(b *testing.B) {
		b.SetBytes(int64(len(js)))
		for b.Loop() {
			if _, err := parseJSONLine(js); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// BenchmarkViewReadBigBatches reads a plain view of 100-byte records
// appended 1000 at a time (the mount-read row of topicfs bench) in 128
// KiB reads and in 1 MiB reads (a view's st_blksize, what cat uses).
func BenchmarkViewReadBigBatches(b *testing.B) {
	cfg := engine.DefaultConfig()
	cfg.SegmentBytes = 16 << 20
	p := openTestPartition(b, cfg)
	recs := make([]record.Record, 1000)
	for i := range recs {
		v := make([]byte, 100)
		for j := range v {
			v[j] = 'a' + byte((i+j)%26)
		}
		recs[i] = record.Record{Timestamp: -1, Value: v}
	}
	for range 300 {
		if _, _, err := p.Append(recs); err != nil {
			b.Fatal(err)
		}
	}
	ps := newPartState(newFsys(nil, Options{}), asPart(p))
	st, err := newViewState(context.Background(), ps, viewFormat{}, snapshotFrom(ps.p, backend.FromStart), func(*backend.Snapshot) (int64, error) { return 0, nil })
	if err != nil {
		b.Fatal(err)
	}
	defer st.release()
	for _, size := range []int{128 << 10, 1 << 20} {
		b.Run(fmt.Sprintf("read=%dKiB", size>>10), func(b *testing.B) {
			b.SetBytes(st.size())
			buf := make([]byte, size)
			for b.Loop() {
				var c cursor
				readWholeView(b, st, &c, buf, false)
				c.rd.free()
			}
		})
	}
}

// BenchmarkViewRead reads a whole view of a partition through viewState
// (index built), as cat does, in 128 KiB reads.
func BenchmarkViewRead(b *testing.B) {
	cfg := engine.DefaultConfig()
	cfg.SegmentBytes = 4 << 20
	p := openTestPartition(b, cfg)
	viewRecordsFixture(b, p, 50000)
	ps := newPartState(newFsys(nil, Options{}), asPart(p))
	for _, f := range []struct {
		name string
		f    viewFormat
	}{{"plain", viewFormat{}}, {"json", viewFormat{json: true}}} {
		b.Run(f.name, func(b *testing.B) {
			st, err := newViewState(context.Background(), ps, f.f, snapshotFrom(ps.p, backend.FromStart), func(*backend.Snapshot) (int64, error) { return 0, nil })
			if err != nil {
				b.Fatal(err)
			}
			defer st.release()
			b.SetBytes(st.size())
			buf := make([]byte, 128<<10)
			for b.Loop() {
				var c cursor
				readWholeView(b, st, &c, buf, false)
				c.rd.free() // as a handle's release does
			}
		})
	}
}

// BenchmarkRenderBatch renders one uncompressed batch of 1000 100-byte
// records as a plain view, decoded through Batch.RecordsInto (values alias
// the batch) and through Batch.Records.
// letterBatch is an uncompressed batch of 1000 records with 100-byte
// values of letters.
func letterBatch(b *testing.B) record.Batch {
	recs := make([]record.Record, 1000)
	for i := range recs {
		v := make([]byte, 100)
		for j := range v {
			v[j] = 'a' + byte((i+j)%26)
		}
		recs[i] = record.Record{Offset: int64(i), Timestamp: 1700000000000, Value: v}
	}
	return mustBatch(b, recs)
}

func BenchmarkRenderBatch(b *testing.B) {
	batch := letterBatch(b)
	raw := batch.Raw
	var (
		out []byte
		sc  renderScratch
		rs  []record.Record
		err error
	)
	b.Run("recordsinto", func(b *testing.B) {
		b.SetBytes(int64(len(raw)))
		b.ReportAllocs()
		for b.Loop() {
			recs, dec, err := batch.RecordsInto(sc.recs[:0], sc.dec)
			if err != nil {
				b.Fatal(err)
			}
			sc.recs, sc.dec = recs[:0], dec
			out = out[:0]
			for i := range recs {
				out = appendPlainRecord(out, &recs[i], viewFormat{})
			}
		}
	})
	b.Run("records", func(b *testing.B) {
		b.SetBytes(int64(len(raw)))
		b.ReportAllocs()
		for b.Loop() {
			if rs, err = batch.Records(rs[:0]); err != nil {
				b.Fatal(err)
			}
			out = out[:0]
			for i := range rs {
				out = appendPlainRecord(out, &rs[i], viewFormat{})
			}
		}
	})
}

// BenchmarkMeasureBatch: a segment's first measure (the first stat of a
// view after mounting) of a batch of 1000 text records, per format.
func BenchmarkMeasureBatch(b *testing.B) {
	batch := func(words []string) record.Batch {
		recs := make([]record.Record, 1000)
		for i := range recs {
			var v []byte
			for j := 0; len(v) < 99; j++ {
				v = append(v, words[(i*7+j)%len(words)]...)
				v = append(v, ' ')
			}
			recs[i] = record.Record{Offset: int64(i), Timestamp: 1700000000000, Value: v[:99]}
		}
		return mustBatch(b, recs)
	}
	text := batch([]string{"alpha", "beta", "gamma", "delta", "x=1", "y:2", "12345", "zeta;"})
	escapes := batch([]string{"alpha", "beta", "gamma", "delta", "x=1", "y:2", "\"q\"", "tab\there"})
	for _, f := range []struct {
		name  string
		f     viewFormat
		batch record.Batch
	}{{"plain", viewFormat{}, text}, {"json", viewFormat{json: true}, text}, {"json-escapes", viewFormat{json: true}, escapes}} {
		b.Run(f.name, func(b *testing.B) {
			batch := f.batch
			raw := batch.Raw
			var sc renderScratch
			b.SetBytes(int64(len(raw)))
			for b.Loop() {
				if _, err := measureBatchRange(&batch, f.f, math.MaxInt64, nil, &sc); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// mustBatch encodes recs as one uncompressed batch.
func mustBatch(b *testing.B, recs []record.Record) record.Batch {
	raw, err := record.Encode(nil, record.NewBatchSpec(0), recs)
	if err != nil {
		b.Fatal(err)
	}
	batch, err := record.Parse(raw)
	if err != nil {
		b.Fatal(err)
	}
	return batch
}

// BenchmarkPutPlainRaw: the plain view's renderer over an uncompressed batch
// of 1000 records with 100-byte values, into a 1 MiB READ buffer.
func BenchmarkPutPlainRaw(b *testing.B) {
	batch := letterBatch(b)
	data := batch.Raw[record.HeaderSize:]
	count := int(batch.RecordCount)
	dst := make([]byte, 1<<20)
	b.SetBytes(int64(len(data)))
	for b.Loop() {
		if _, p, m := putPlainRaw(dst, 0, data, 0, count, ""); m != count || p != len(data) {
			b.Fatalf("rendered %d records to %d", m, p)
		}
	}
}

// BenchmarkWalkPlainRaw: the walk a seek into a batch makes (the records
// before a by-offset view's first one), over a whole uncompressed batch of
// 1000 records with 100-byte values held in the CPU's caches.
func BenchmarkWalkPlainRaw(b *testing.B) {
	batch := letterBatch(b)
	data := batch.Raw[record.HeaderSize:]
	count := int(batch.RecordCount)
	b.SetBytes(int64(len(data)))
	for b.Loop() {
		if p, done, _, ok := walkPlainRaw(data, 0, count, "", math.MaxInt64, math.MaxInt64); !ok || done != count || p != len(data) {
			b.Fatalf("walked %d records to %d", done, p)
		}
	}
}
