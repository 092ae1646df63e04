package policies

import (
	"fmt"
	"os"
	"runtime"
	"runtime/debug"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/topicfs/topicfs/engine/record"
	"github.com/topicfs/topicfs/engine/vfs"
)

// cleanerKeys is the number of distinct keys of the memory test:
// TOPICFS_CLEANER_KEYS, else defaultCleanerKeys (smaller under -race, see
// race_test.go), else 100k with -short.
func cleanerKeys(t testing.TB) int {
	if s := os.Getenv("TOPICFS_CLEANER_KEYS"); s != "" {
		n, err := strconv.Atoi(s)
		require.NoError(t, err)
		return n
	}
	if testing.Short() {
		return 100_000
	}
	return defaultCleanerKeys
}

// heapSampler records the peak HeapAlloc while it runs.
type heapSampler struct {
	peak atomic.Uint64
	stop chan struct{}
	wg   sync.WaitGroup
}

func startHeapSampler() *heapSampler {
	h := &heapSampler{stop: make(chan struct{})}
	h.wg.Add(1)
	go func() {
		defer h.wg.Done()
		var ms runtime.MemStats
		for {
			runtime.ReadMemStats(&ms)
			if ms.HeapAlloc > h.peak.Load() {
				h.peak.Store(ms.HeapAlloc)
			}
			select {
			case <-h.stop:
				return
			case <-time.After(time.Millisecond):
			}
		}
	}()
	return h
}

func (h *heapSampler) Stop() uint64 {
	close(h.stop)
	h.wg.Wait()
	return h.peak.Load()
}

// procStatusKiB returns a "Vm…:" field of /proc/self/status in bytes, or -1.
func procStatusKiB(field string) int64 {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return -1
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, field+":"); ok {
			n, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			if err != nil {
				return -1
			}
			return n << 10
		}
	}
	return -1
}

// resetPeakRSS makes VmHWM restart from the current RSS (Linux
// /proc/self/clear_refs "5"); it reports whether it could.
func resetPeakRSS() bool {
	return os.WriteFile("/proc/self/clear_refs", []byte("5"), 0) == nil
}

// TestCleanerMemoryBounded cleans a partition of many distinct keys and
// checks that the heap grows by no more than a constant (the offset map,
// the only thing that grows with keys, lives off the Go heap; batches are
// streamed and decoded into reused buffers) and, without the race detector,
// that the resident set grows by no more than the offset map (the dedupe
// buffer and a probe tag per 24-byte entry) plus that constant. The map is smaller than the key count, so the cleaning goes
// in several runs, each stopping where the map filled.
func TestCleanerMemoryBounded(t *testing.T) {
	keys := cleanerKeys(t)
	// A map of 8 bytes per key (under a third of the keys per run): 8 MB
	// for 1M keys, 333,333 slots, 300,000 keys per run.
	buffer := max(int64(keys)*8, 1<<20)
	const slack = 16 << 20 // read/encode buffers, GC headroom, engine bookkeeping
	clk := newClock()
	dir := t.TempDir()
	d := openLogDir(t, vfs.OS, dir, clk, map[string]string{
		"cleanup.policy": "compact", "segment.bytes": strconv.Itoa(16 << 20),
	})
	p := createPartition(t, d, "many", nil)

	const chunk = 5000
	value := []byte("0123456789abcdef")
	recs := make([]record.Record, chunk)
	for i := 0; i < keys; i += chunk {
		n := min(chunk, keys-i)
		for j := 0; j < n; j++ {
			recs[j] = record.Record{Key: fmt.Appendf(nil, "key-%09d", i+j), Value: value, Timestamp: -1}
		}
		_, _, err := p.Append(recs[:n])
		require.NoError(t, err)
	}
	// Rewrite half the keys so that cleaning drops something.
	for i := 0; i < keys/2; i += chunk {
		n := min(chunk, keys/2-i)
		for j := 0; j < n; j++ {
			recs[j] = record.Record{Key: fmt.Appendf(nil, "key-%09d", (i+j)*2), Value: value, Timestamp: -1}
		}
		_, _, err := p.Append(recs[:n])
		require.NoError(t, err)
	}
	require.NoError(t, p.Roll())
	var logBytes int64
	for _, si := range p.Segments() {
		logBytes += si.Size
	}

	s := NewScheduler(d, Options{Now: clk.Now, Logger: testLogger(t), DedupeBufferSize: buffer, CleanerThreads: 1})
	defer s.Stop()
	recs = nil

	old := debug.SetGCPercent(10)
	defer debug.SetGCPercent(old)
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	baseline := ms.HeapAlloc
	rssReset := resetPeakRSS()
	rssBefore := procStatusKiB("VmRSS")
	h := startHeapSampler()
	start := time.Now()
	var runs, mapped, dropped int64
	var bytesIn int64
	for {
		run, err := s.CleanPartition(p, true)
		require.NoError(t, err)
		require.NotNil(t, run)
		runs++
		mapped += run.MappedKeys
		assert.Equal(t, int64(float64(buffer/OffsetMapSlotSize)*LoadFactor), run.MapCapacityKeys, "Kafka's maxDesiredMapSize")
		dropped += run.RecordsDropped
		bytesIn += run.BytesIn
		if !run.MapFull {
			break
		}
	}
	elapsed := time.Since(start)
	peak := h.Stop()
	growth := int64(peak) - int64(baseline)
	rssPeak := procStatusKiB("VmHWM")
	rssGrowth := rssPeak - rssBefore
	t.Logf("%d keys, %d log bytes: %d cleaning runs, %d keys mapped, %d records dropped, %.1f MB read in %v (%.1f MB/s); heap baseline %.1f MiB, peak %.1f MiB, growth %.1f MiB; RSS before %.1f MiB, peak %.1f MiB, growth %.1f MiB (peak reset %v); dedupe buffer %.1f MiB",
		keys, logBytes, runs, mapped, dropped, float64(bytesIn)/1e6, elapsed, float64(bytesIn)/1e6/elapsed.Seconds(),
		float64(baseline)/(1<<20), float64(peak)/(1<<20), float64(growth)/(1<<20),
		float64(rssBefore)/(1<<20), float64(rssPeak)/(1<<20), float64(rssGrowth)/(1<<20), rssReset, float64(buffer)/(1<<20))
	assert.Equal(t, int64(keys/2), dropped, "every rewritten key's old record dropped")
	assert.LessOrEqual(t, growth, int64(slack), "heap growth within a constant (map off-heap)")
	if !raceEnabled && rssReset && rssBefore > 0 && rssPeak > 0 {
		// The race detector's shadow memory inflates RSS; only check without it.
		assert.LessOrEqual(t, rssGrowth, buffer+buffer/OffsetMapSlotSize+slack, "RSS growth within the offset map + constant")
	}
	assert.Greater(t, runs, int64(1), "the map filled and cleaning went on in later runs")
}
