package bench

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestKafkaBaselines checks the cluster rows' baselines against the file
// they send: the producer appends every line as a record, the consumer
// renders them back byte for byte, and the tail renders the last lines.
// (The cluster rows themselves need the topicfs binary: CI runs them with
// `topicfs bench --quick`.)
func TestKafkaBaselines(t *testing.T) {
	ctx := context.Background()
	k, err := startKafka()
	require.NoError(t, err)
	defer k.close()
	path := filepath.Join(t.TempDir(), "lines")
	// Past two chunks, whose ends fall inside lines.
	n, err := newPool(5).writeLines(path, produceChunk*5/2, viewValueSize+1)
	require.NoError(t, err)
	file, err := os.ReadFile(path)
	require.NoError(t, err)

	require.NoError(t, k.createTopic(ctx, "t"))
	require.NoError(t, k.fill(ctx, "t", path, n))
	require.Error(t, k.checkEnd(ctx, "t", n+1), "a wrong count is noticed")

	var out bytes.Buffer
	d, _, err := kgoReadOnce(ctx, k, "t", n, &out)
	require.NoError(t, err)
	assert.Positive(t, d)
	assert.Equal(t, file, out.Bytes())

	tl, err := k.newTail(ctx, "t")
	require.NoError(t, err)
	defer tl.close()
	out.Reset()
	require.NoError(t, tl.run(ctx, tailN, &out))
	assert.Equal(t, file[len(file)-tailN*(viewValueSize+1):], out.Bytes())

	require.NoError(t, k.deleteTopic(ctx, "t"))
	_, err = k.endOffset(ctx, "t")
	assert.Error(t, err, "the topic is gone")
}
