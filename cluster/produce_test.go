package cluster

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/topicfs/topicfs/backend"
	"github.com/topicfs/topicfs/engine/record"
)

// Calls handed over without waiting are appended in call order, each
// call's records contiguous, and the memory reused between calls
// (recycle) never changes a record in flight: every value read back is
// the one sent. The caller's buffers are reused at once, as fusefs
// reuses a WRITE's.
func TestEnqueueKeepsOrderAndBytes(t *testing.T) {
	kc := newKfake(t)
	c, _ := openTest(t, kc, nil)
	ctx := context.Background()
	p := part(t, mkTopic(t, c, "queued", 1), 0)

	const calls, perCall = 60, 500
	var pend []backend.Pending
	buf := make([]byte, 0, 64<<10)
	var want []string
	for call := range calls {
		buf = buf[:0]
		if call%3 == 2 {
			recs := values(fmt.Sprintf("each%02d-", call), perCall)
			for i := range recs {
				want = append(want, string(recs[i].Value))
			}
			w, err := p.EnqueueEach(ctx, [][]record.Record{recs})
			require.NoError(t, err)
			pend = append(pend, w)
			continue
		}
		for i := range perCall {
			line := fmt.Sprintf("line%02d-%04d-%s", call, i, strings.Repeat("x", call))
			want = append(want, line)
			buf = append(append(buf, line...), '\n')
		}
		w, err := p.EnqueueLines(ctx, buf)
		require.NoError(t, err)
		pend = append(pend, w)
		clear(buf) // the caller's buffer is its own again
	}
	next := int64(0)
	for i, w := range pend {
		<-w.Done()
		first, last, err := w.Wait()
		require.NoError(t, err, "call %d", i)
		assert.Equal(t, next, first, "call %d starts where the one before it ended", i)
		assert.Equal(t, first+perCall-1, last, "call %d is contiguous", i)
		next = last + 1
	}
	got := consume(t, kc, "queued", 0, calls*perCall)
	require.Len(t, got, calls*perCall)
	for i, r := range got {
		if !assert.Equal(t, want[i], string(r.Value), "record %d", i) {
			break
		}
	}
}

// A call refused before it is handed over fails at once, and Wait of an
// empty call reports no records.
func TestEnqueueRefusals(t *testing.T) {
	kc := newKfake(t)
	c, _ := openTest(t, kc, nil)
	ctx := context.Background()
	p := part(t, mkTopic(t, c, "refused", 1), 0)

	_, err := p.EnqueueLines(ctx, []byte("no newline"))
	assert.Error(t, err)
	w, err := p.EnqueueEach(ctx, nil)
	require.NoError(t, err)
	first, last, err := w.Wait()
	require.NoError(t, err)
	assert.Greater(t, first, last, "no records")
	canceled, cancel := context.WithCancel(ctx)
	cancel()
	_, err = p.EnqueueLines(canceled, []byte("a\n"))
	assert.ErrorIs(t, err, context.Canceled)
}

// A partition added after the producer loaded the topic takes appends at
// once: the producer's metadata is refreshed first (it would otherwise
// fail every record with "invalid record partitioning choice" for
// minutes).
func TestAppendToAddedPartition(t *testing.T) {
	kc := newKfake(t)
	c, _ := openTest(t, kc, nil)
	ctx := context.Background()
	tp := mkTopic(t, c, "grown", 1)
	_, _, err := part(t, tp, 0).AppendLines(ctx, []byte("a\n"), 0)
	require.NoError(t, err)
	require.NoError(t, tp.AddPartitions(ctx, 2))
	first, last, err := part(t, tp, 1).AppendLines(ctx, []byte("b\nc\n"), 0)
	require.NoError(t, err)
	assert.Equal(t, [2]int64{0, 1}, [2]int64{first, last})
	got := consume(t, kc, "grown", 1, 2)
	require.Len(t, got, 2)
	assert.Equal(t, "c", string(got[1].Value))
}
