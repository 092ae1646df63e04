package bench

import (
	"bufio"
	"math/rand/v2"
	"os"
	"strconv"
	"sync"
)

// poolSize is the length of the byte pool values are cut from: large enough
// that batches do not repeat within a compression window, small enough to
// stay in cache-friendly memory.
const poolSize = 8 << 20

// words make values that compress like log lines (zstd to about a third),
// not like zeros or noise.
var words = []string{
	"GET", "POST", "/api/v1/orders", "/api/v1/users", "/healthz", "200", "201", "404", "500",
	"user", "order", "shipped", "created", "cancelled", "latency_ms", "region", "eu-west-1",
	"us-east-2", "checkout", "cart", "payment", "accepted", "declined", "retry", "timeout",
	"session", "token", "id", "status", "amount", "EUR", "USD", "warehouse", "item", "sku",
}

// pool is a deterministic byte pool of printable text without '\n'.
type pool struct{ b []byte }

var pools struct {
	sync.Mutex
	m map[uint64]*pool
}

// newPool returns the pool for seed, generated once per process (pools are
// read-only).
func newPool(seed uint64) *pool {
	pools.Lock()
	defer pools.Unlock()
	if p, ok := pools.m[seed]; ok {
		return p
	}
	if pools.m == nil {
		pools.m = map[uint64]*pool{}
	}
	p := genPool(seed, poolSize)
	pools.m[seed] = p
	return p
}

// genPool generates size bytes of text from seed.
func genPool(seed uint64, size int) *pool {
	rng := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	b := make([]byte, 0, size+64)
	for len(b) < size {
		x := rng.Uint64() // one draw picks the token and its separator
		switch x & 7 {
		case 0, 1:
			b = strconv.AppendUint(b, (x>>8)%100_000, 10)
		case 2:
			for i := range 6 {
				b = append(b, byte('a'+(x>>(8+5*i))%26))
			}
		default:
			b = append(b, words[(x>>8)%uint64(len(words))]...)
		}
		b = append(b, " =,:;"[(x>>48)%5])
	}
	return &pool{b: b[:size]}
}

// chunk returns the i-th run of n bytes, wrapping around the pool. A batch
// of records whose values are consecutive size-byte slices of chunk(i,
// count*size) holds exactly the chunk's bytes.
func (p *pool) chunk(i int64, n int) []byte {
	per := int64(len(p.b) / n)
	off := (i % per) * int64(n)
	return p.b[off : off+int64(n)]
}

// writeLines writes a file of total bytes (rounded down to whole lines) of
// lineLen-byte lines (lineLen-1 characters and '\n').
func (p *pool) writeLines(path string, total int64, lineLen int) (lines int64, err error) {
	f, err := os.Create(path)
	if err != nil {
		return 0, err
	}
	w := bufio.NewWriterSize(f, 1<<20)
	n := total / int64(lineLen)
	for i := range n {
		w.Write(p.chunk(i, lineLen-1))
		w.WriteByte('\n')
	}
	if err := w.Flush(); err != nil {
		f.Close()
		return 0, err
	}
	return n, f.Close()
}
