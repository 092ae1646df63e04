package cli

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/topicfs/topicfs/internal/panics"
)

// mPanics counts the panics the mount recovered from (a request answered
// with EIO, a background task stopped), by where and op.
const mPanics = "topicfs_panics_total"

// panicCollector exports internal/panics' counts at scrape time.
type panicCollector struct{ desc *prometheus.Desc }

func newPanicCollector() *panicCollector {
	return &panicCollector{desc: prometheus.NewDesc(mPanics,
		"Panics recovered (each logged with its stack): where is fuse (a request, answered EIO), readahead, measure, notifier, append, viewsizes or policies; op the operation or task.",
		[]string{"where", "op"}, nil)}
}

func (c *panicCollector) Describe(ch chan<- *prometheus.Desc) { ch <- c.desc }

func (c *panicCollector) Collect(ch chan<- prometheus.Metric) {
	for _, n := range panics.Counts() {
		ch <- prometheus.MustNewConstMetric(c.desc, prometheus.CounterValue, float64(n.N), n.Where, n.Op)
	}
}
