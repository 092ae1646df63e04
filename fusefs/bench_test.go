package fusefs

import (
	"context"
	"fmt"
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

// BenchmarkViewRead reads a whole view of a partition through viewState
// (index built), as cat does, in 128 KiB reads.
func BenchmarkViewRead(b *testing.B) {
	cfg := engine.DefaultConfig()
	cfg.SegmentBytes = 4 << 20
	p := openTestPartition(b, cfg)
	viewRecordsFixture(b, p, 50000)
	ps := newPartState(newFsys(nil, Options{}), p)
	for _, f := range []struct {
		name string
		f    viewFormat
	}{{"plain", viewFormat{}}, {"json", viewFormat{json: true}}} {
		b.Run(f.name, func(b *testing.B) {
			st, err := newViewState(context.Background(), ps, f.f, func(*engine.Snapshot) (int64, error) { return 0, nil })
			if err != nil {
				b.Fatal(err)
			}
			defer st.release()
			b.SetBytes(st.size())
			buf := make([]byte, 128<<10)
			for b.Loop() {
				var c cursor
				for off := int64(0); ; {
					n, err := st.read(context.Background(), &c, buf, off)
					if err != nil {
						b.Fatal(err)
					}
					if n == 0 {
						break
					}
					off += int64(n)
				}
			}
		})
	}
}
