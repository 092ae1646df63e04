package engine

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/topicfs/topicfs/engine/vfs"
)

func TestAppendReadReopen(t *testing.T) {
	fs := vfs.NewMem()
	cfg := testConfig()
	cfg.SegmentBytes = 4096
	p := openTest(t, fs, "/d/t-0", cfg)
	for i := 0; i < 50; i++ {
		first, last, err := p.Append(makeRecs(i*20, 20, 1000+int64(i*20)))
		require.NoError(t, err)
		assert.Equal(t, int64(i*20), first)
		assert.Equal(t, int64(i*20+19), last)
	}
	assert.Equal(t, int64(1000), p.LogEndOffset())
	assert.Greater(t, len(p.Segments()), 1, "segment.bytes forces rolls")
	got := readAll(t, p)
	require.Equal(t, seq(0, 1000), offsetsOf(got))
	assert.Equal(t, "value-000123", string(got[123].Value))
	require.NoError(t, p.Close())

	p = openTest(t, fs, "/d/t-0", cfg)
	defer p.Close()
	assert.Equal(t, int64(1000), p.LogEndOffset())
	require.Equal(t, seq(0, 1000), offsetsOf(readAll(t, p)))
	_, _, err := p.Append(makeRecs(1000, 1, time.Now().UnixMilli()))
	require.NoError(t, err)
	assert.Equal(t, int64(1001), p.LogEndOffset())
}
