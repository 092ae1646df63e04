package cluster

import (
	"context"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"github.com/topicfs/topicfs/engine/vfs"
	"log/slog"
	"math/rand/v2"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/topicfs/topicfs/backend"
	"github.com/topicfs/topicfs/engine"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Defaults of the settable timeouts, Kafka's client defaults.
const (
	// DefaultRequestTimeout is Kafka's request.timeout.ms.
	DefaultRequestTimeout = 30 * time.Second
	// DefaultDeliveryTimeout is Kafka's delivery.timeout.ms.
	DefaultDeliveryTimeout = 120 * time.Second
)

// Options configure Open.
type Options struct {
	// Bootstrap are the host:port pairs the client first asks for the
	// cluster's brokers (bootstrap.servers).
	Bootstrap []string
	Security  Security
	// RequestTimeout bounds each request, its retries included, and Open's
	// check of the cluster (request.timeout.ms; 0: 30 s).
	RequestTimeout time.Duration
	// DeliveryTimeout bounds how long an append waits for its records'
	// acknowledgement (delivery.timeout.ms; 0: 120 s).
	DeliveryTimeout time.Duration
	// ReplicationFactor of created topics (replication.factor; 0 or -1:
	// the broker's default.replication.factor).
	ReplicationFactor int
	// NumPartitions of topics created with no count (num.partitions; 0:
	// the broker's num.partitions).
	NumPartitions int
	// Defaults are topicfs's own settings (parse.key, print.key,
	// key.separator, null.marker, batch.size, linger.ms) for topics with
	// no value stored for them: mount.toml's top-level values.
	Defaults map[string]string
	// ShowInternal lists internal topics (__consumer_offsets and other
	// names starting "__").
	ShowInternal bool
	// StateDir holds what topicfs keeps per cluster (default
	// $XDG_STATE_HOME/topicfs, else ~/.local/state/topicfs).
	StateDir string
	// CacheDir holds the local copies views read (the Mirror; default
	// $XDG_CACHE_HOME/topicfs, else ~/.cache/topicfs). It can be deleted
	// whenever nothing is mounted.
	CacheDir string
	// CacheBytes caps each partition's local copy (0: the Mirror's
	// default; negative: no cap).
	CacheBytes int64
	// ReadCommitted ends views at the last stable offset instead of the
	// high watermark (isolation.level=read_committed); either way aborted
	// records and control batches are never shown.
	ReadCommitted bool
	// Logger receives warnings (nil: slog.Default()).
	Logger *slog.Logger
}

// Cluster is a Kafka cluster as a backend.Backend. One kgo client sends
// the requests (metadata, offsets, configs, topics), another produces
// (producer.go). Its methods are safe for concurrent use.
type Cluster struct {
	opts      Options
	log       *slog.Logger
	client    *kgo.Client // requests: metadata, offsets, configs, topics
	fetcher   *Fetcher    // raw fetches for the mirror, through client
	mirror    *Mirror     // the local copies views read
	clusterID string
	stateDir  string // StateDir/clusters/<cluster id>
	defaults  localSettings
	conn      *connWatch
	maxBytes  sync.Map // topic name → int32 max.message.bytes, for the producer
	// checking is set while Open checks the cluster: the client's
	// warnings (a refused connection, say) are then debug lines, since
	// a failed check ends in one error that names the cause.
	checking atomic.Bool

	prodMu   sync.Mutex
	producer *producer              // appends
	retiring map[*producer]struct{} // producers replaced, finishing what they hold
	closing  bool                   // no more producers

	lookups outage // the last topic lookup that could not reach the cluster

	mu       sync.Mutex
	topics   map[string]*Topic
	watchers map[partKey]*watcher
	closed   bool
}

// Cause says why Open could not use the cluster.
type Cause int

// The causes Open tells apart.
const (
	CauseOther          Cause = iota // none of the below: see the error
	CauseAuthentication              // the brokers refused the SASL credentials
	CauseTLS                         // the TLS handshake failed (certificate, CA, protocol)
	CauseUnreachable                 // no bootstrap server answered
)

func (c Cause) String() string {
	switch c {
	case CauseAuthentication:
		return "authentication failed"
	case CauseTLS:
		return "TLS handshake failed"
	case CauseUnreachable:
		return "no broker reachable"
	}
	return "cluster check failed"
}

// OpenError is Open's failure to reach or use the cluster. Error is one line
// naming the cause; it wraps backend.ErrNotAuthorized (authentication),
// backend.ErrUnavailable (TLS, unreachable) and the underlying error.
type OpenError struct {
	Cause     Cause
	Bootstrap []string
	Timeout   time.Duration // the request timeout Open waited
	Err       error
}

func (e *OpenError) Error() string {
	servers := strings.Join(e.Bootstrap, ",")
	msg := "cluster: " + e.Cause.String()
	switch e.Cause {
	case CauseUnreachable:
		msg += fmt.Sprintf(" at %s within %s", servers, e.Timeout)
	default:
		msg += " at " + servers
	}
	if e.Err != nil {
		msg += ": " + oneLine(e.Err.Error())
	}
	return msg
}

// Unwrap returns the sentinel of the cause and the underlying error.
func (e *OpenError) Unwrap() []error {
	switch e.Cause {
	case CauseAuthentication:
		return []error{backend.ErrNotAuthorized, e.Err}
	case CauseTLS, CauseUnreachable:
		return []error{backend.ErrUnavailable, e.Err}
	}
	return []error{e.Err}
}

func oneLine(s string) string { return strings.Join(strings.Fields(s), " ") }

// connWatch keeps the last failure to connect to a broker (dial, TLS
// handshake, SASL), which a request that then times out does not report,
// and the last failed read of a SASL authentication: a broker that
// refuses the credentials may just close the connection (Kafka's SASL
// handshake v0 does; so does kfake).
type connWatch struct {
	answered atomic.Int64 // when a broker last answered a request (Unix ns)

	mu        sync.Mutex
	last      error
	saslRead  error
	saslFails int
	// refused is closed after saslRefusals failed authentications: the
	// client would retry a closed connection until the request timeout.
	refused chan struct{}
}

// saslRefusals is how many authentications must fail before Open gives
// up early: more than one, so that one lost connection is not taken for
// wrong credentials.
const saslRefusals = 3

// errSASLClosed marks a connection lost in the middle of authenticating.
var errSASLClosed = errors.New("the broker closed the connection during SASL authentication (wrong username or password?)")

func (w *connWatch) OnBrokerRead(_ kgo.BrokerMetadata, key int16, _ int, _, _ time.Duration, err error) {
	if err == nil {
		w.answered.Store(time.Now().UnixNano())
	}
	if err != nil && key == int16(kmsg.SASLAuthenticate) {
		w.mu.Lock()
		defer w.mu.Unlock()
		w.saslRead = fmt.Errorf("%w: %w", errSASLClosed, err)
		if w.saslFails++; w.saslFails == saslRefusals {
			close(w.refused)
		}
	}
}

func (w *connWatch) OnBrokerConnect(_ kgo.BrokerMetadata, _ time.Duration, _ net.Conn, err error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.last = err
}

func (w *connWatch) lastErr() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.saslRead != nil {
		return w.saslRead
	}
	return w.last
}

// withDefaults fills the zero fields of o.
func (o Options) withDefaults() (Options, error) {
	if len(o.Bootstrap) == 0 {
		return o, fmt.Errorf("%w: no bootstrap servers", backend.ErrInvalidConfig)
	}
	if o.RequestTimeout <= 0 {
		o.RequestTimeout = DefaultRequestTimeout
	}
	if o.DeliveryTimeout <= 0 {
		o.DeliveryTimeout = DefaultDeliveryTimeout
	}
	if o.ReplicationFactor == 0 {
		o.ReplicationFactor = -1
	}
	if o.ReplicationFactor < -1 || o.ReplicationFactor > maxInt16 {
		return o, fmt.Errorf("%w: replication.factor=%d: must be -1 (the broker's default) or 1 to %d",
			backend.ErrInvalidConfig, o.ReplicationFactor, maxInt16)
	}
	if o.NumPartitions < 0 || o.NumPartitions > maxPartitions {
		return o, fmt.Errorf("%w: num.partitions=%d: must be 0 (the broker's default) or 1 to %d",
			backend.ErrInvalidConfig, o.NumPartitions, maxPartitions)
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if o.StateDir == "" {
		dir, err := defaultStateDir()
		if err != nil {
			return o, err
		}
		o.StateDir = dir
	}
	if o.CacheDir == "" {
		dir, err := defaultCacheDir()
		if err != nil {
			return o, err
		}
		o.CacheDir = dir
	}
	return o, nil
}

// defaultCacheDir is $XDG_CACHE_HOME/topicfs, else ~/.cache/topicfs.
func defaultCacheDir() (string, error) {
	if x := os.Getenv("XDG_CACHE_HOME"); filepath.IsAbs(x) {
		return filepath.Join(x, "topicfs"), nil
	}
	home, err := os.UserHomeDir()
	if err != nil {
		return "", fmt.Errorf("cluster: no cache directory ($XDG_CACHE_HOME and $HOME unset): %w", err)
	}
	return filepath.Join(home, ".cache", "topicfs"), nil
}

// defaultStateDir is $XDG_STATE_HOME/topicfs, else ~/.local/state/topicfs.
func defaultStateDir() (string, error) {
	if x := os.Getenv("XDG_STATE_HOME"); filepath.IsAbs(x) {
		return filepath.Join(x, "topicfs"), nil
	}
	home, err := os.UserHomeDir()
	if err != nil {
		return "", fmt.Errorf("cluster: no state directory ($XDG_STATE_HOME and $HOME unset): %w", err)
	}
	return filepath.Join(home, ".local", "state", "topicfs"), nil
}

// Open connects to the cluster and checks, within o.RequestTimeout, that a
// broker answers and accepts the credentials. A failure to reach or use
// the cluster is an *OpenError naming the cause; bad options wrap
// backend.ErrInvalidConfig.
func Open(ctx context.Context, o Options) (*Cluster, error) {
	o, err := o.withDefaults()
	if err != nil {
		return nil, err
	}
	defaults, err := defaultSettings().apply(o.Defaults)
	if err != nil {
		return nil, err
	}
	c := &Cluster{opts: o, log: o.Logger, defaults: defaults, conn: &connWatch{refused: make(chan struct{})},
		topics: map[string]*Topic{}, watchers: map[partKey]*watcher{}, retiring: map[*producer]struct{}{}}
	kopts, err := c.clientOpts()
	if err != nil {
		return nil, err
	}
	c.checking.Store(true)
	if c.client, err = kgo.NewClient(kopts...); err != nil {
		return nil, fmt.Errorf("%w: %w", backend.ErrInvalidConfig, err)
	}
	if err := c.check(ctx); err != nil {
		c.closeClients()
		return nil, err
	}
	c.checking.Store(false)
	c.stateDir = filepath.Join(o.StateDir, "clusters", safeName(c.clusterID))
	if err := os.MkdirAll(filepath.Join(c.stateDir, "topics"), 0o700); err != nil {
		c.closeClients()
		return nil, fmt.Errorf("cluster: state directory: %w", err)
	}
	c.fetcher = NewFetcher(c.client, FetchOptions{Timeout: o.RequestTimeout})
	if c.mirror, err = OpenMirror(vfs.OS, o.CacheDir, MirrorOptions{RetentionBytes: o.CacheBytes, Logger: c.log}); err != nil {
		c.closeClients()
		return nil, fmt.Errorf("cluster: cache directory: %w", err)
	}
	if err := c.mirror.LockCluster(c.clusterID); err != nil {
		c.mirror.Close()
		c.closeClients()
		if errors.Is(err, engine.ErrLocked) {
			return nil, fmt.Errorf("cluster: another mount of cluster %s uses the cache directory %s (give each mount its own XDG_CACHE_HOME): %w",
				c.clusterID, o.CacheDir, err)
		}
		return nil, fmt.Errorf("cluster: cache directory: %w", err)
	}
	if c.producer, err = c.newProducer(); err != nil {
		c.mirror.Close()
		c.closeClients()
		return nil, err
	}
	c.log.Info("cluster: connected", "bootstrap", strings.Join(o.Bootstrap, ","),
		"cluster_id", c.clusterID, "security", o.Security)
	return c, nil
}

// clientOpts are the kgo options every client of the cluster shares:
// security, timeouts, logging (the producer adds its own, producer.go).
func (c *Cluster) clientOpts() ([]kgo.Opt, error) {
	o := c.opts
	// A connection (TCP and TLS) gets half the request timeout, so that
	// Open hears why one failed before its own time is up.
	sec, err := o.Security.clientOpts(min(o.RequestTimeout/2, 10*time.Second))
	if err != nil {
		return nil, err
	}
	return append(sec,
		kgo.SeedBrokers(o.Bootstrap...),
		kgo.WithLogger(newKgoLogger(c.log, &c.checking)),
		kgo.WithHooks(c.conn),
		kgo.RequestTimeoutOverhead(o.RequestTimeout),
		kgo.RetryTimeout(o.RequestTimeout),
		kgo.DisableClientMetrics(),
		// Kafka's retry.backoff.ms and retry.backoff.max.ms (100 ms to
		// 1 s), not kgo's 250 ms to 5 s: a cluster that comes back serves
		// within a second. Metadata is asked for again as often.
		kgo.RetryBackoffFn(retryBackoff),
		kgo.MetadataMinAge(time.Second),
	), nil
}

// retryBackoff doubles from 100 ms to at most 1 s, with ±20% jitter.
func retryBackoff(fails int) time.Duration {
	d := 100 * time.Millisecond << min(max(fails-1, 0), 4)
	d = min(d, time.Second)
	return d - d/5 + time.Duration(rand.Int64N(int64(2*d/5)+1))
}

// deliveryBudget is the part of delivery.timeout.ms an append waits for
// its records; the rest is left to explain a failure (ISR against
// min.insync.replicas, a deleted topic) before the append returns.
func deliveryBudget(d time.Duration) time.Duration { return d - d/10 }

// check asks for the cluster's metadata (no topics) within the request
// timeout and keeps the cluster id.
func (c *Cluster) check(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, c.opts.RequestTimeout)
	defer cancel()
	go func() {
		select {
		case <-c.conn.refused:
			cancel()
		case <-ctx.Done():
		}
	}()
	resp, err := c.firstMetadata(ctx)
	if err != nil {
		return c.openError(err)
	}
	if resp.ClusterID != nil {
		c.clusterID = *resp.ClusterID
	}
	if c.clusterID == "" {
		c.clusterID = "unknown"
	}
	return nil
}

// firstMetadata asks for the cluster's metadata until a broker answers,
// the check's time is up, or a failure says asking again cannot help: a
// refused or unroutable connection is asked again (a cluster started
// beside the mount may not listen yet), as Kafka's own tools do within
// their timeout; an authentication or TLS failure is not.
func (c *Cluster) firstMetadata(ctx context.Context) (*kmsg.MetadataResponse, error) {
	for wait := 50 * time.Millisecond; ; wait = min(2*wait, time.Second) {
		req := kmsg.NewPtrMetadataRequest()
		req.Topics = []kmsg.MetadataRequestTopic{}
		resp, err := req.RequestWith(ctx, c.client)
		if err == nil && len(resp.Brokers) == 0 {
			err = errors.New("the metadata lists no brokers")
		}
		if err == nil || !refusedConn(err) {
			return resp, err
		}
		select {
		case <-ctx.Done():
			return nil, err
		case <-time.After(wait):
		}
	}
}

// refusedConn reports a connection nothing answered: refused, or no route.
func refusedConn(err error) bool {
	return errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, syscall.EHOSTUNREACH) ||
		errors.Is(err, syscall.ENETUNREACH)
}

// openError classifies a failed check, preferring the last connection
// failure the hook saw: a request that ran out of time reports only that.
func (c *Cluster) openError(err error) error {
	cause := classify(err)
	if last := c.conn.lastErr(); last != nil && (cause == CauseOther || cause == CauseUnreachable) {
		if lc := classify(last); lc != CauseOther {
			cause, err = lc, last
		}
	}
	if cause == CauseOther && errors.Is(err, context.DeadlineExceeded) {
		cause = CauseUnreachable
	}
	return &OpenError{Cause: cause, Bootstrap: c.opts.Bootstrap, Timeout: c.opts.RequestTimeout, Err: err}
}

// classify tells authentication, TLS and connection failures apart.
func classify(err error) Cause {
	var (
		handshake *handshakeError
		firstRead *kgo.ErrFirstReadEOF
		unknownCA x509.UnknownAuthorityError
		hostname  x509.HostnameError
		invalid   x509.CertificateInvalidError
		verify    *tls.CertificateVerificationError
		alert     tls.AlertError
		header    tls.RecordHeaderError
		netErr    net.Error
	)
	switch {
	case errors.As(err, &firstRead): // kgo's guess at why a broker hung up at once
		switch msg := firstRead.Error(); {
		case strings.Contains(msg, "SASL"):
			return CauseAuthentication
		case strings.Contains(msg, "TLS"):
			return CauseTLS
		}
		return CauseUnreachable
	case errors.Is(err, kerr.SaslAuthenticationFailed), errors.Is(err, kerr.UnsupportedSaslMechanism),
		errors.Is(err, kerr.IllegalSaslState), errors.Is(err, errSASLClosed):
		return CauseAuthentication
	case errors.As(err, &handshake), errors.As(err, &unknownCA), errors.As(err, &hostname), errors.As(err, &invalid),
		errors.As(err, &verify), errors.As(err, &alert), errors.As(err, &header),
		strings.Contains(err.Error(), "tls: "), strings.Contains(err.Error(), "tls alert record"):
		return CauseTLS
	case errors.Is(err, syscall.ECONNREFUSED), errors.Is(err, syscall.EHOSTUNREACH),
		errors.Is(err, syscall.ENETUNREACH), errors.As(err, &netErr),
		errors.Is(err, context.DeadlineExceeded):
		return CauseUnreachable
	}
	return CauseOther
}

// Bootstrap returns the bootstrap servers, comma-separated.
func (c *Cluster) Bootstrap() string { return strings.Join(c.opts.Bootstrap, ",") }

// ClusterID returns the cluster's id (the key of its local state).
func (c *Cluster) ClusterID() string { return c.clusterID }

// Close stops the watchers and closes the client. It waits at most the
// request timeout for the client to let go (an unreachable cluster never
// makes it hang); records still unacknowledged are failed. Closing twice
// is harmless.
func (c *Cluster) Close() error {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return nil
	}
	c.closed = true
	watchers := c.watchers
	c.watchers = map[partKey]*watcher{}
	c.mu.Unlock()
	for _, w := range watchers {
		w.stop()
	}
	perr := c.flushProducers()
	merr := c.mirror.Close()
	return errors.Join(perr, c.closeClients(), merr)
}

// flushProducers waits, at most the request timeout, for records the
// producers still hold (a writer's file left open at unmount) to be
// acknowledged; closing the clients would fail them. Records still held
// then are reported: the log names how many, and the error makes the
// mount exit non-zero.
func (c *Cluster) flushProducers() error {
	c.prodMu.Lock()
	clients := c.producerClientsLocked()
	c.prodMu.Unlock()
	held := func() (n int64) {
		for _, cl := range clients {
			n += cl.BufferedProduceRecords()
		}
		return n
	}
	if held() == 0 {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), c.opts.RequestTimeout)
	defer cancel()
	var wg sync.WaitGroup
	for _, cl := range clients {
		wg.Go(func() { _ = cl.Flush(ctx) })
	}
	wg.Wait()
	if n := held(); n > 0 {
		c.log.Warn("cluster: records not acknowledged at unmount are dropped; they may or may not have reached the cluster",
			"records", n, "waited", c.opts.RequestTimeout)
		return fmt.Errorf("cluster: %d appended records not acknowledged at unmount: %w", n, backend.ErrTimedOut)
	}
	return nil
}

// producerClientsLocked returns the producer's client and those of the
// producers being retired. The caller holds prodMu.
func (c *Cluster) producerClientsLocked() []*kgo.Client {
	var clients []*kgo.Client
	if c.producer != nil {
		clients = append(clients, c.producer.cl)
	}
	for pr := range c.retiring {
		clients = append(clients, pr.cl)
	}
	return clients
}

// closeClients closes the clients (the one for requests, the producer and
// producers being retired) within the request timeout.
func (c *Cluster) closeClients() error {
	c.prodMu.Lock()
	c.closing = true
	clients := append([]*kgo.Client{c.client}, c.producerClientsLocked()...)
	c.prodMu.Unlock()
	done := make(chan struct{})
	go func() {
		defer close(done)
		var wg sync.WaitGroup
		for _, cl := range clients {
			wg.Go(cl.Close)
		}
		wg.Wait()
	}()
	t := time.NewTimer(c.opts.RequestTimeout)
	defer t.Stop()
	select {
	case <-done:
		return nil
	case <-t.C:
		return fmt.Errorf("cluster: close: the client did not stop within %s: %w", c.opts.RequestTimeout, backend.ErrTimedOut)
	}
}

// kgoLogger hands the client's warnings and errors to slog, as debug
// lines while quiet is set. A message logged again within kgoRepeat is a
// debug line too: a client retries an unreachable broker many times a
// second, which would fill the log while the cluster is down; the next
// warning of the message says how many it stood for.
type kgoLogger struct {
	log    *slog.Logger
	quiet  *atomic.Bool
	mu     *sync.Mutex
	repeat map[string]*kgoRepeats
}

// kgoRepeat is the least time between two warnings of one kgo message.
const kgoRepeat = 10 * time.Second

// kgoRepeats is when a message was last warned of, and how often since.
type kgoRepeats struct {
	at     time.Time
	hidden int
}

func newKgoLogger(log *slog.Logger, quiet *atomic.Bool) kgoLogger {
	return kgoLogger{log: log, quiet: quiet, mu: &sync.Mutex{}, repeat: map[string]*kgoRepeats{}}
}

func (l kgoLogger) Level() kgo.LogLevel { return kgo.LogLevelWarn }

func (l kgoLogger) Log(level kgo.LogLevel, msg string, keyvals ...any) {
	lv := slog.LevelWarn
	switch {
	case l.quiet.Load():
		lv = slog.LevelDebug
	case level == kgo.LogLevelError:
		lv = slog.LevelError
	}
	if lv > slog.LevelDebug {
		l.mu.Lock()
		r := l.repeat[msg]
		switch {
		case r == nil && len(l.repeat) >= 256: // bounded: an unusual message is not tracked
		case r == nil:
			l.repeat[msg] = &kgoRepeats{at: time.Now()}
		case time.Since(r.at) < kgoRepeat:
			r.hidden++
			lv = slog.LevelDebug
		default:
			if r.hidden > 0 {
				keyvals = append(keyvals, "repeated_since_last_warning", r.hidden)
			}
			r.at, r.hidden = time.Now(), 0
		}
		l.mu.Unlock()
	}
	l.log.Log(context.Background(), lv, "cluster: kgo: "+msg, keyvals...)
}

// safeName returns name if it is a plain file name, else a hex form of it,
// or for a long name (a topic name may have 249 bytes, whose hex form is
// beyond a file name's 255) its SHA-256 after "h=", which no topic name
// can be ('=' is not one of Kafka's characters).
func safeName(name string) string {
	if len(name) <= 200 && kafkaName(name) {
		return name
	}
	if hex := fmt.Sprintf("x-%x", name); len(hex) <= 200 {
		return hex
	}
	return fmt.Sprintf("h=%x", sha256.Sum256([]byte(name)))
}

// kafkaName reports a name of Kafka's characters (a-z A-Z 0-9 . _ -), not
// empty, "." or "..": a topic name, and a plain file name.
func kafkaName(name string) bool {
	if name == "" || name == "." || name == ".." {
		return false
	}
	for i := range len(name) {
		c := name[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '_' || c == '-') {
			return false
		}
	}
	return true
}

// CacheDir is the directory of the local copies (Options.CacheDir, with
// its default applied): where other scratch files of the mount belong too.
func (c *Cluster) CacheDir() string { return c.opts.CacheDir }
