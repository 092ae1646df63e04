package policies

import (
	"testing"
	"time"

	"github.com/topicfs/topicfs/engine"
)

// FuzzOffsetMap drives an OffsetMap and a Go map with the same puts and
// gets: until the map is full every answer agrees; a put refused when full
// is for a new key only; LatestOffset is the largest offset put.
func FuzzOffsetMap(f *testing.F) {
	f.Add([]byte{1, 2, 3, 1, 2, 3, 9, 9, 9}, uint8(4))
	f.Add([]byte("the quick brown fox jumps over the lazy dog"), uint8(10))
	f.Fuzz(func(t *testing.T, ops []byte, slots uint8) {
		m := newMap(t, int64(slots)*OffsetMapSlotSize)
		model := map[string]int64{}
		latest := int64(-1)
		for i, op := range ops {
			key := []byte{op % 32}
			if op&0x80 != 0 { // get
				want, ok := model[string(key)]
				if !ok {
					want = -1
				}
				if got := m.Get(key); got != want {
					t.Fatalf("op %d: Get(%v) = %d, want %d", i, key, got, want)
				}
				continue
			}
			_, exists := model[string(key)]
			if m.Put(key, int64(i)) {
				model[string(key)] = int64(i)
				latest = int64(i)
			} else if exists || !m.Full() {
				t.Fatalf("op %d: Put(%v) refused (exists %v, full %v)", i, key, exists, m.Full())
			}
			if m.Len() != len(model) || m.Len() > m.MaxEntries() || m.LatestOffset() != latest {
				t.Fatalf("op %d: len %d model %d max %d latest %d want %d", i, m.Len(), len(model), m.MaxEntries(), m.LatestOffset(), latest)
			}
		}
	})
}

// FuzzRetentionPlan checks the invariants of RetentionPlan over arbitrary
// segment lists: it counts the active segment only when it holds bytes,
// gives a reason iff it deletes, and the oldest segment it keeps is
// deletable by none of the three passes.
func FuzzRetentionPlan(f *testing.F) {
	f.Add([]byte{10, 20, 30, 40, 50, 60}, int64(50), int64(1000), int64(-1))
	f.Add([]byte{255, 1, 255, 1}, int64(-1), int64(0), int64(2))
	f.Fuzz(func(t *testing.T, raw []byte, retBytes, retMs, logStart int64) {
		if len(raw) < 2 {
			return
		}
		now := time.UnixMilli(1_000_000)
		segs := make([]engine.SegmentInfo, len(raw)/2)
		for i := range segs {
			segs[i] = engine.SegmentInfo{
				BaseOffset: int64(i) * 10, NextOffset: int64(i)*10 + 10,
				Size: int64(raw[2*i]), MaxTimestamp: 1_000_000 - int64(raw[2*i+1])*1000,
				Active: i == len(segs)-1,
			}
		}
		cfg := engine.DefaultConfig()
		cfg.RetentionBytes, cfg.RetentionMs = retBytes, retMs
		n, reason := RetentionPlan(segs, cfg, logStart, now)
		if n < 0 || n > len(segs) || n == len(segs) && segs[n-1].Size == 0 {
			t.Fatalf("n = %d of %d segments: %v", n, len(segs), segs)
		}
		if (n > 0) != (reason != "") {
			t.Fatalf("n %d with reason %q", n, reason)
		}
		if n == 0 || n == len(segs) || n == len(segs)-1 && segs[n].Size == 0 {
			return
		}
		kept := segs[n]
		var rest int64
		for _, s := range segs[n:] {
			rest += s.Size
		}
		bytesWant := retBytes >= 0 && rest-kept.Size >= retBytes
		timeWant := retMs >= 0 && now.UnixMilli()-kept.MaxTimestamp > retMs
		startWant := logStart >= 0 && n+1 < len(segs) && segs[n+1].BaseOffset <= logStart
		// Each pass runs over what the earlier ones left and stops at the
		// first segment it may keep, so the oldest kept segment fails
		// every pass's test.
		if bytesWant || timeWant || startWant {
			t.Fatalf("kept segment %d is deletable (bytes %v time %v start %v): %v", n, bytesWant, timeWant, startWant, segs)
		}
	})
}
