package cli

import (
	"io"
	"log/slog"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/topicfs/topicfs/internal/panics"
)

// TestPanicMetric: every recovered panic shows in topicfs_panics_total,
// labelled by where and op.
func TestPanicMetric(t *testing.T) {
	reg := prometheus.NewRegistry()
	reg.MustRegister(newPanicCollector())
	value := func(where, op string) float64 {
		mfs, err := reg.Gather()
		require.NoError(t, err)
		for _, mf := range mfs {
			if mf.GetName() != mPanics {
				continue
			}
			for _, m := range mf.GetMetric() {
				labels := map[string]string{}
				for _, l := range m.GetLabel() {
					labels[l.GetName()] = l.GetValue()
				}
				if labels["where"] == where && labels["op"] == op {
					return m.GetCounter().GetValue()
				}
			}
		}
		return 0
	}
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	before := value("fuse", "metrictest")
	panics.Recovered(log, "fuse", "metrictest", "boom", []byte("stack"))
	panics.Recovered(log, "fuse", "metrictest", "boom", []byte("stack"))
	panics.Recovered(log, "policies", "metrictest", "boom", []byte("stack"))
	assert.Equal(t, before+2, value("fuse", "metrictest"))
	assert.Equal(t, 1.0, value("policies", "metrictest"))
}
