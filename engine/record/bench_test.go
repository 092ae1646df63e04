package record

import (
	"bytes"
	"fmt"
	"testing"
)

// Append throughput target: the engine must append >= 3M records/s of
// 100-byte values uncompressed, so Encode of 1000 such records must take a
// few tens of µs.
var benchCodecs = []Codec{None, LZ4, Zstd, Gzip, Snappy}

func BenchmarkEncode(b *testing.B) {
	for _, size := range []int{100, 1024} {
		recs := valueRecords(1000, size, 0, 1_700_000_000_000)
		raw := 0
		for i := range recs {
			raw += len(recs[i].Value)
		}
		for _, c := range benchCodecs {
			b.Run(fmt.Sprintf("%s/1000x%dB", c, size), func(b *testing.B) {
				spec := NewBatchSpec(0)
				spec.Codec = c
				buf := make([]byte, 0, EncodedSizeUpperBound(recs)+1024)
				b.SetBytes(int64(raw))
				b.ReportAllocs()
				for b.Loop() {
					out, err := Encode(buf[:0], spec, recs)
					if err != nil {
						b.Fatal(err)
					}
					buf = out
				}
				b.ReportMetric(float64(len(recs))*float64(b.N)/b.Elapsed().Seconds(), "records/s")
				b.ReportMetric(float64(len(buf)), "batch-bytes")
			})
		}
	}
}

func BenchmarkRecords(b *testing.B) {
	for _, size := range []int{100, 1024} {
		recs := valueRecords(1000, size, 0, 1_700_000_000_000)
		raw := 0
		for i := range recs {
			raw += len(recs[i].Value)
		}
		for _, c := range benchCodecs {
			b.Run(fmt.Sprintf("%s/1000x%dB", c, size), func(b *testing.B) {
				enc := mustEncode(b, c, recs)
				batch, err := Parse(enc)
				if err != nil {
					b.Fatal(err)
				}
				dst := make([]Record, 0, len(recs))
				b.SetBytes(int64(raw))
				b.ReportAllocs()
				for b.Loop() {
					out, err := batch.Records(dst[:0])
					if err != nil || len(out) != len(recs) {
						b.Fatal(err)
					}
				}
				b.ReportMetric(float64(len(recs))*float64(b.N)/b.Elapsed().Seconds(), "records/s")
			})
			b.Run(fmt.Sprintf("into/%s/1000x%dB", c, size), func(b *testing.B) {
				enc := mustEncode(b, c, recs)
				batch, err := Parse(enc)
				if err != nil {
					b.Fatal(err)
				}
				dst := make([]Record, 0, len(recs))
				var scratch []byte
				b.SetBytes(int64(raw))
				b.ReportAllocs()
				for b.Loop() {
					var out []Record
					out, scratch, err = batch.RecordsInto(dst[:0], scratch)
					if err != nil || len(out) != len(recs) {
						b.Fatal(err)
					}
				}
				b.ReportMetric(float64(len(recs))*float64(b.N)/b.Elapsed().Seconds(), "records/s")
			})
		}
	}
}

// BenchmarkReadAtVerify is the recovery path: frame, CRC, no decode.
func BenchmarkReadAtVerify(b *testing.B) {
	recs := valueRecords(1000, 100, 0, 1_700_000_000_000)
	var file []byte
	for i := 0; i < 16; i++ {
		var err error
		spec := NewBatchSpec(int64(i * 1000))
		for j := range recs {
			recs[j].Offset = int64(i*1000 + j)
		}
		if file, err = Encode(file, spec, recs); err != nil {
			b.Fatal(err)
		}
	}
	r := bytes.NewReader(file)
	buf := make([]byte, 0, 256<<10)
	b.SetBytes(int64(len(file)))
	b.ReportAllocs()
	for b.Loop() {
		for pos := int64(0); pos < int64(len(file)); {
			bt, err := ReadAt(r, pos, int64(len(file)), buf)
			if err != nil {
				b.Fatal(err)
			}
			if err := bt.Verify(); err != nil {
				b.Fatal(err)
			}
			pos += int64(bt.Size())
		}
	}
}
