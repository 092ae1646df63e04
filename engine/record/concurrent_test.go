package record

import (
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
)

// TestConcurrentEncodeDecode exercises the pooled encoders/decoders from
// several goroutines (meaningful under -race).
func TestConcurrentEncodeDecode(t *testing.T) {
	var wg sync.WaitGroup
	for g := 0; g < 8; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 10; i++ {
				c := allCodecs[(g+i)%len(allCodecs)]
				recs := valueRecords(50+g, 200, int64(i*100), 1_700_000_000_000)
				spec := NewBatchSpec(recs[0].Offset)
				spec.Codec = c
				raw, err := Encode(nil, spec, recs)
				if !assert.NoError(t, err) {
					return
				}
				b, err := Parse(raw)
				if !assert.NoError(t, err) || !assert.NoError(t, b.Verify()) {
					return
				}
				got, err := b.Records(nil)
				if assert.NoError(t, err) {
					assert.Equal(t, recs, got)
				}
			}
		}()
	}
	wg.Wait()
}
