package peers

import (
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"testing"
	"time"
	"unsafe"

	"github.com/nats-io/nats-server/v2/server"

	"github.com/topicfs/topicfs/engine"
	"github.com/topicfs/topicfs/engine/record"
	"github.com/topicfs/topicfs/engine/vfs"
)

// NATS's file store is reached through its unexported constructor and
// methods: the server exports no way to open one outside JetStream.

//go:linkname newFileStore github.com/nats-io/nats-server/v2/server.newFileStore
func newFileStore(fcfg server.FileStoreConfig, cfg server.StreamConfig) (unsafe.Pointer, error)

//go:linkname fsStoreMsg github.com/nats-io/nats-server/v2/server.(*fileStore).StoreMsg
func fsStoreMsg(fs unsafe.Pointer, subj string, hdr, msg []byte, ttl int64) (uint64, int64, error)

//go:linkname fsLoadMsg github.com/nats-io/nats-server/v2/server.(*fileStore).LoadMsg
func fsLoadMsg(fs unsafe.Pointer, seq uint64, sm *server.StoreMsg) (*server.StoreMsg, error)

//go:linkname fsStop github.com/nats-io/nats-server/v2/server.(*fileStore).Stop
func fsStop(fs unsafe.Pointer) error

// msgOffset is where StoreMsg keeps the message (an unexported field).
var msgOffset = func() uintptr {
	f, ok := reflect.TypeOf(server.StoreMsg{}).FieldByName("msg")
	if !ok {
		panic("server.StoreMsg has no msg field")
	}
	return f.Offset
}()

func storedMsg(sm *server.StoreMsg) []byte {
	return *(*[]byte)(unsafe.Add(unsafe.Pointer(sm), msgOffset))
}

// records is how many 100-byte values each store holds.
const records = 600_000

func values(i int) []byte {
	v := make([]byte, 100)
	for j := range v {
		v[j] = 'a' + byte((i+j)%26)
	}
	return v
}

func report(b *testing.B, lat []time.Duration) {
	slices.Sort(lat)
	q := func(f float64) float64 { return float64(lat[int(f*float64(len(lat)-1))].Nanoseconds()) }
	b.ReportMetric(q(0.5), "p50-ns")
	b.ReportMetric(q(0.99), "p99-ns")
}

// BenchmarkPointReadPeers reads 100-byte values at random positions, warm
// (every value read once before), from NATS's file store (one message per
// value, its default block size), from topicfs's engine (batches of about
// 16 KiB and 1 MiB) and with a raw pread of the value's bytes from the
// engine's .log file. p50-ns and p99-ns are per read.
func BenchmarkPointReadPeers(b *testing.B) {
	b.Run("nats-filestore", func(b *testing.B) {
		dir := b.TempDir()
		fs, err := newFileStore(server.FileStoreConfig{StoreDir: dir}, server.StreamConfig{Name: "bench", Subjects: []string{"s"}, Storage: server.FileStorage})
		if err != nil {
			b.Fatal(err)
		}
		defer fsStop(fs)
		for i := range records {
			if _, _, err := fsStoreMsg(fs, "s", nil, values(i), 0); err != nil {
				b.Fatal(err)
			}
		}
		var sm server.StoreMsg
		for seq := uint64(1); seq <= records; seq++ {
			if _, err := fsLoadMsg(fs, seq, &sm); err != nil {
				b.Fatal(err)
			}
		}
		rng := rand.New(rand.NewPCG(1, 2))
		lat := make([]time.Duration, 0, 1<<20)
		for b.Loop() {
			seq := 1 + rng.Uint64N(records)
			t0 := time.Now()
			m, err := fsLoadMsg(fs, seq, &sm)
			lat = append(lat, time.Since(t0))
			if err != nil || len(storedMsg(m)) != 100 {
				b.Fatalf("seq %d: %v", seq, err)
			}
		}
		report(b, lat)
	})
	for _, batch := range []int{16 << 10, 1 << 20} {
		p := enginePartition(b, batch)
		b.Run(fmt.Sprintf("engine/batch=%dKiB", batch>>10), func(b *testing.B) {
			var r engine.PointReader
			for o := int64(0); o < records; o += 16 {
				if _, err := r.ReadRecord(p, o); err != nil {
					b.Fatal(err)
				}
			}
			rng := rand.New(rand.NewPCG(1, 2))
			lat := make([]time.Duration, 0, 1<<20)
			for b.Loop() {
				o := rng.Int64N(records)
				t0 := time.Now()
				rec, err := r.ReadRecord(p, o)
				lat = append(lat, time.Since(t0))
				if err != nil || len(rec.Value) != 100 {
					b.Fatalf("offset %d: %v", o, err)
				}
			}
			report(b, lat)
		})
		if batch == 16<<10 {
			b.Run("raw-pread", func(b *testing.B) {
				f, err := os.Open(filepath.Join(p.Dir(), "00000000000000000000.log"))
				if err != nil {
					b.Fatal(err)
				}
				defer f.Close()
				fi, _ := f.Stat()
				buf := make([]byte, 109)
				rng := rand.New(rand.NewPCG(1, 2))
				lat := make([]time.Duration, 0, 1<<20)
				for b.Loop() {
					pos := rng.Int64N(fi.Size() - 109)
					t0 := time.Now()
					_, err := f.ReadAt(buf, pos)
					lat = append(lat, time.Since(t0))
					if err != nil {
						b.Fatal(err)
					}
				}
				report(b, lat)
			})
		}
		p.Close()
	}
}

// enginePartition appends records 100-byte values in batches of about
// batch bytes to a fresh partition.
func enginePartition(b *testing.B, batch int) *engine.Partition {
	cfg := engine.DefaultConfig()
	cfg.MaxMessageBytes = 2 << 20
	p, err := engine.OpenPartition(vfs.OS, filepath.Join(b.TempDir(), "p-0"), "p", 0,
		engine.PartitionOptions{Config: cfg, RecoveryPoint: -1, LogStartOffset: -1, FirstDirty: -1})
	if err != nil {
		b.Fatal(err)
	}
	per := batch / 109
	recs := make([]record.Record, 0, per)
	for i := range records {
		recs = append(recs, record.Record{Timestamp: -1, Value: values(i)})
		if len(recs) == per || i == records-1 {
			if _, _, err := p.Append(recs); err != nil {
				b.Fatal(err)
			}
			recs = recs[:0]
		}
	}
	return p
}
