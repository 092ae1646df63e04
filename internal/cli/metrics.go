package cli

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"net/http"
	"net/http/pprof"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/topicfs/topicfs/engine"
	"github.com/topicfs/topicfs/policies"
)

// Metric names, part of the operator-facing interface: renaming one breaks
// dashboards.
const (
	mLogSize          = "topicfs_log_size_bytes"
	mLogStart         = "topicfs_log_start_offset"
	mLogEnd           = "topicfs_log_end_offset"
	mSegments         = "topicfs_log_segments"
	mAppendRecords    = "topicfs_append_records_total"
	mAppendBytes      = "topicfs_append_bytes_total"
	mReadBytes        = "topicfs_read_bytes_total"
	mDirtyRatio       = "topicfs_cleaner_dirty_ratio"
	mCleanerRuns      = "topicfs_cleaner_runs_total"
	mRetentionSegs    = "topicfs_retention_deleted_segments_total"
	mRetentionBytes   = "topicfs_retention_deleted_bytes_total"
	mFlushes          = "topicfs_flushes_total"
	mRolls            = "topicfs_segment_rolls_total"
	mCorruptions      = "topicfs_corrupt_batches_total"
	mFuseOpDuration   = "topicfs_fuse_op_duration_seconds"
	mTopics           = "topicfs_topics"
	mPartitionLabels  = "partition"
	mTopicLabel       = "topic"
	metricsReadHeader = 10 * time.Second
)

// logDirCollector is a prometheus.Collector that reads engine and policy
// state at scrape time, so nothing is updated on the append path.
type logDirCollector struct {
	d     *engine.LogDir
	state func(topic string, partition int) (policies.PartitionState, bool) // nil on read-only mounts

	size, start, end, segments            *prometheus.Desc
	appendRecords, appendBytes, readBytes *prometheus.Desc
	flushes, rolls, corruptions           *prometheus.Desc
	dirtyRatio, cleanerRuns               *prometheus.Desc
	retSegments, retBytes                 *prometheus.Desc
	topics                                *prometheus.Desc
}

func newLogDirCollector(d *engine.LogDir, state func(string, int) (policies.PartitionState, bool)) *logDirCollector {
	labels := []string{mTopicLabel, mPartitionLabels}
	desc := func(name, help string) *prometheus.Desc { return prometheus.NewDesc(name, help, labels, nil) }
	return &logDirCollector{
		d:             d,
		state:         state,
		size:          desc(mLogSize, "Bytes of the partition's log segments (.log files) on disk."),
		start:         desc(mLogStart, "The partition's log start offset: the first retained offset."),
		end:           desc(mLogEnd, "The partition's log end offset: the next offset to be assigned."),
		segments:      desc(mSegments, "Number of segments in the partition's log, the active one included."),
		appendRecords: desc(mAppendRecords, "Records appended to the partition since the mount started."),
		appendBytes:   desc(mAppendBytes, "Bytes of record batches appended to the partition since the mount started."),
		readBytes:     desc(mReadBytes, "Bytes read from the partition's segments since the mount started."),
		flushes:       desc(mFlushes, "fsyncs of the partition's log since the mount started."),
		rolls:         desc(mRolls, "Segment rolls (a new active segment) since the mount started."),
		corruptions:   desc(mCorruptions, "Corrupt record batches readers found (each also logged, naming segment and position)."),
		dirtyRatio:    desc(mDirtyRatio, "Dirty ratio the log cleaner last computed: uncleaned bytes / (cleaned + uncleaned)."),
		cleanerRuns:   desc(mCleanerRuns, "Log cleaner (compaction) runs completed on the partition since the mount started."),
		retSegments:   desc(mRetentionSegs, "Segments deleted by retention since the mount started."),
		retBytes:      desc(mRetentionBytes, "Bytes deleted by retention since the mount started."),
		topics:        prometheus.NewDesc(mTopics, "Number of topics in the data directory.", nil, nil),
	}
}

func (c *logDirCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.size, c.start, c.end, c.segments, c.appendRecords, c.appendBytes,
		c.readBytes, c.flushes, c.rolls, c.corruptions, c.dirtyRatio, c.cleanerRuns, c.retSegments, c.retBytes, c.topics} {
		ch <- d
	}
}

func (c *logDirCollector) Collect(ch chan<- prometheus.Metric) {
	ch <- prometheus.MustNewConstMetric(c.topics, prometheus.GaugeValue, float64(len(c.d.Topics())))
	for _, p := range c.d.Partitions() {
		lv := []string{p.Topic(), strconv.Itoa(p.ID())}
		gauge := func(d *prometheus.Desc, v float64) {
			ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, lv...)
		}
		counter := func(d *prometheus.Desc, v float64) {
			ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, v, lv...)
		}
		segs := p.Segments()
		var size int64
		for _, s := range segs {
			size += s.Size
		}
		gauge(c.size, float64(size))
		gauge(c.segments, float64(len(segs)))
		gauge(c.start, float64(p.LogStartOffset()))
		gauge(c.end, float64(p.LogEndOffset()))
		st := p.Stats()
		counter(c.appendRecords, float64(st.RecordsAppended))
		counter(c.appendBytes, float64(st.BytesAppended))
		counter(c.readBytes, float64(st.BytesRead))
		counter(c.flushes, float64(st.Flushes))
		counter(c.rolls, float64(st.Rolls))
		counter(c.corruptions, float64(st.Corruptions))
		if c.state == nil {
			continue
		}
		ps, ok := c.state(p.Topic(), p.ID())
		if !ok {
			continue
		}
		gauge(c.dirtyRatio, ps.DirtyRatio)
		counter(c.cleanerRuns, float64(ps.Cleanings))
		counter(c.retSegments, float64(ps.SegmentsDeleted))
		counter(c.retBytes, float64(ps.BytesDeleted))
	}
}

// metricsServer serves /metrics for --metrics-addr.
type metricsServer struct {
	ln     net.Listener
	srv    *http.Server
	opDur  *prometheus.HistogramVec
	logger *slog.Logger
}

// metricsListenAddr is addr with 127.0.0.1 as its host when it names none
// (":9464", ":0"): metrics, and the profiler with them, are served on the
// loopback interface unless the operator names another address.
func metricsListenAddr(addr string) (string, error) {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return "", err
	}
	if host == "" {
		host = "127.0.0.1"
	}
	return net.JoinHostPort(host, port), nil
}

// startMetrics listens on addr (metricsListenAddr) and serves the registry
// in the background; with pprof also Go's profiler at /debug/pprof/.
func startMetrics(addr string, pprofOn bool, d *engine.LogDir, state func(string, int) (policies.PartitionState, bool), logger *slog.Logger) (*metricsServer, error) {
	reg := prometheus.NewRegistry()
	opDur := prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name: mFuseOpDuration,
		Help: "Time the FUSE handlers took, by operation (lookup, getattr, read, write, ...).",
		// 10µs .. ~10s: a cached getattr to an fsync on a slow disk.
		Buckets: prometheus.ExponentialBuckets(10e-6, 4, 11),
	}, []string{"op"})
	if d != nil { // cluster mode has no data directory to describe
		reg.MustRegister(newLogDirCollector(d, state))
	}
	reg.MustRegister(
		newPanicCollector(),
		opDur,
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
	)
	addr, err := metricsListenAddr(addr)
	if err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, err
	}
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{ErrorLog: slog.NewLogLogger(logger.Handler(), slog.LevelError)}))
	index := "topicfs: metrics at /metrics\n"
	if pprofOn {
		// Go's profiler, only when asked for (--pprof): it shows the
		// command line and costs CPU per profile.
		// `go tool pprof http://ADDR/debug/pprof/profile?seconds=10`
		// profiles a running mount.
		mux.HandleFunc("/debug/pprof/", pprof.Index)
		mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
		mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
		mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
		mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
		index = "topicfs: metrics at /metrics, profiles at /debug/pprof/\n"
	}
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/" {
			http.NotFound(w, r)
			return
		}
		_, _ = w.Write([]byte(index))
	})
	m := &metricsServer{
		ln:     ln,
		srv:    &http.Server{Handler: mux, ReadHeaderTimeout: metricsReadHeader},
		opDur:  opDur,
		logger: logger,
	}
	go func() {
		if err := m.srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			logger.Error("metrics server stopped", "addr", ln.Addr().String(), "err", err)
		}
	}()
	return m, nil
}

// Addr is the address the server listens on (the real port for ":0").
func (m *metricsServer) Addr() string { return m.ln.Addr().String() }

// ObserveOp is the fusefs.Options.OpLatency hook. Safe for concurrent use.
func (m *metricsServer) ObserveOp(op string, d time.Duration) {
	m.opDur.WithLabelValues(op).Observe(d.Seconds())
}

// Close stops serving, letting a scrape in flight finish briefly.
func (m *metricsServer) Close() {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	if err := m.srv.Shutdown(ctx); err != nil {
		_ = m.srv.Close()
	}
}
