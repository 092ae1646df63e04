package policies

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestKeepRecord(t *testing.T) {
	m := newMap(t, 24*100)
	m.Put([]byte("a"), 10)
	m.Put([]byte("b"), 12)
	m.UpdateLatestOffset(20)
	const now = 1000
	tests := []struct {
		name    string
		offset  int64
		key     []byte
		value   []byte
		horizon int64
		want    bool
	}{
		{"past latest offset kept", 21, nil, nil, -1, true},
		{"null key dropped", 5, nil, []byte("v"), -1, false},
		{"older than map dropped", 9, []byte("a"), []byte("v"), -1, false},
		{"latest kept", 10, []byte("a"), []byte("v"), -1, true},
		{"key not mapped kept", 3, []byte("zz"), []byte("v"), -1, true},
		{"tombstone without horizon kept", 12, []byte("b"), nil, -1, true},
		{"tombstone before horizon kept", 12, []byte("b"), nil, now + 1, true},
		{"tombstone at horizon dropped", 12, []byte("b"), nil, now, false},
		{"tombstone past horizon dropped", 12, []byte("b"), nil, now - 1, false},
		{"value past horizon kept", 10, []byte("a"), []byte("v"), now - 1, true},
		{"superseded tombstone dropped", 8, []byte("b"), nil, -1, false},
		{"empty key is a key", 15, []byte{}, []byte("v"), -1, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.want, keepRecord(m, tt.offset, tt.key, tt.value, tt.horizon, now))
			if tt.key != nil {
				h := m.Hash(tt.key)
				m.Touch(h)
				assert.Equal(t, tt.want, keepHashed(m, tt.offset, tt.key, h, tt.value, tt.horizon, now), "with the key's hash")
				assert.Equal(t, m.Get(tt.key), m.GetHashed(tt.key, h))
			}
		})
	}
}

func TestTxnTracker(t *testing.T) {
	// Producer 1: aborted txn over [10, 20] with marker at 21.
	// Producer 2: committed txn over [12, 14] with marker at 15.
	tr := newTxnTracker([]abortedTxn{{ProducerID: 1, FirstOffset: 10, LastOffset: 21}})
	assert.False(t, tr.onDataBatch(3, 5, false), "non-transactional batch")
	assert.True(t, tr.onDataBatch(1, 11, true), "batch of aborted txn")
	assert.False(t, tr.onDataBatch(2, 13, true), "batch of committed txn")
	assert.False(t, tr.onControlBatch(2, 15, true, controlCommit), "commit marker kept while its batches remain")
	assert.True(t, tr.onDataBatch(1, 18, true))
	assert.False(t, tr.onControlBatch(1, 21, true, controlAbort), "abort marker kept while its batches remain")

	// A later round: the aborted batches are gone, only markers remain.
	tr = newTxnTracker([]abortedTxn{{ProducerID: 1, FirstOffset: 10, LastOffset: 21}})
	assert.True(t, tr.onControlBatch(2, 15, true, controlCommit), "commit marker of an emptied txn may go")
	assert.True(t, tr.onControlBatch(1, 21, true, controlAbort), "abort marker of an emptied txn may go")
	assert.True(t, tr.onControlBatch(1, 30, false, 0), "empty control batch may go")
	assert.False(t, tr.onControlBatch(-1, 31, true, 2), "other control types stay")

	// Transactional batches after the abort marker are a new transaction.
	assert.False(t, tr.onDataBatch(1, 40, true))
}
