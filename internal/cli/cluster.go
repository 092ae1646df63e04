package cli

import (
	"context"
	"flag"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/topicfs/topicfs/cluster"
)

// clusterKeys are mount.toml's settings of cluster mode. They are not topic
// settings: the config loader takes them out before it validates the rest
// as Kafka topic configuration.
var clusterKeys = []string{
	"bootstrap.servers",   // HOST:PORT[,HOST:PORT...]: mounts a cluster (as --bootstrap-server)
	"request.timeout.ms",  // each request, its retries included, and the check at mount
	"delivery.timeout.ms", // how long an append waits for its acknowledgement
	"replication.factor",  // of topics mkdir creates (-1: the broker's default)
	"isolation.level",     // read_uncommitted (views end at the high watermark) or read_committed (at the LSO)
	"cache.max.bytes",     // cap of each partition's local copy (the read-through cache views read)
}

// localSettingNames are topicfs's own topic settings, which a cluster does
// not store: mount.toml's values are the defaults of every cluster topic.
var localSettingNames = []string{"parse.key", "print.key", "key.separator", "null.marker", "batch.size", "linger.ms", "cursor.start"}

// clusterFlags registers mount's cluster-mode flags.
func clusterFlags(fs *flag.FlagSet, o *mountOptions) {
	fs.StringVar(&o.bootstrap, "bootstrap-server", "", "mount the Kafka cluster at `HOST:PORT[,HOST:PORT...]` instead of a data directory (bootstrap.servers in mount.toml)")
	fs.StringVar(&o.commandConfig, "command-config", "", "client security `FILE` in Kafka's properties form: security.protocol, sasl.mechanism, sasl.username, sasl.password, ssl.ca.location, ssl.certificate.location, ssl.key.location, client.id")
	fs.BoolVar(&o.internal, "internal-topics", false, "cluster mode: list internal topics (names starting with __)")
}

// openCluster connects to the cluster the flags and mount.toml name and
// checks it (within request.timeout.ms). A failure prints one line naming
// the cause (authentication, TLS, no broker reachable) and exits 1.
func (m *mountRun) openCluster(mc *MountConfig) int {
	const cmd = "mount"
	if m.o.data != "" {
		return m.e.usageErr(cmd, "--data and a cluster (--bootstrap-server or bootstrap.servers) exclude each other")
	}
	opts, err := clusterOptions(m.o, mc)
	if err != nil {
		return m.e.fail(cmd, "%v", err)
	}
	opts.Logger = m.logger
	c, err := cluster.Open(context.Background(), opts)
	if err != nil {
		return m.e.fail(cmd, "%v", err)
	}
	m.cl = c
	return exitOK
}

// closeCluster closes the cluster's clients and local copies.
func (m *mountRun) closeCluster() error {
	err := m.cl.Close()
	if err != nil {
		m.logger.Error("closing the cluster client", "cluster", m.cl.Bootstrap(), "err", err)
	}
	return err
}

// clusterOptions builds cluster.Options from the flags and mount.toml.
func clusterOptions(o *mountOptions, mc *MountConfig) (cluster.Options, error) {
	kv := mc.Cluster
	bootstrap := o.bootstrap
	if bootstrap == "" {
		bootstrap = kv["bootstrap.servers"]
	}
	opts := cluster.Options{ShowInternal: o.internal, Defaults: map[string]string{}}
	for _, s := range strings.Split(bootstrap, ",") {
		if s = strings.TrimSpace(s); s != "" {
			opts.Bootstrap = append(opts.Bootstrap, s)
		}
	}
	if o.commandConfig != "" {
		f, err := os.Open(o.commandConfig)
		if err != nil {
			return opts, fmt.Errorf("--command-config: %v", err)
		}
		defer f.Close()
		if opts.Security, err = cluster.ParseCommandConfig(f); err != nil {
			return opts, fmt.Errorf("--command-config %s: %v", o.commandConfig, err)
		}
	}
	var err error
	if opts.RequestTimeout, err = msSetting(kv, "request.timeout.ms", 24*time.Hour); err != nil {
		return opts, err
	}
	if opts.DeliveryTimeout, err = msSetting(kv, "delivery.timeout.ms", 24*time.Hour); err != nil {
		return opts, err
	}
	if v, ok := kv["replication.factor"]; ok {
		if opts.ReplicationFactor, err = strconv.Atoi(strings.TrimSpace(v)); err != nil {
			return opts, fmt.Errorf("config: replication.factor=%q: not an integer", v)
		}
	}
	if v, ok := kv["cache.max.bytes"]; ok {
		if opts.CacheBytes, err = strconv.ParseInt(strings.TrimSpace(v), 10, 64); err != nil || opts.CacheBytes < -1 || opts.CacheBytes == 0 {
			return opts, fmt.Errorf("config: cache.max.bytes=%q: want a positive number of bytes, or -1 for no cap", v)
		}
	}
	switch v := strings.TrimSpace(kv["isolation.level"]); v {
	case "", "read_uncommitted":
	case "read_committed":
		opts.ReadCommitted = true
	default:
		return opts, fmt.Errorf("config: isolation.level=%q: want read_uncommitted or read_committed", v)
	}
	for _, name := range localSettingNames {
		if slices.Contains(mc.Keys, name) {
			opts.Defaults[name], _ = mc.Defaults.Get(name)
		}
	}
	if slices.Contains(mc.Keys, "num.partitions") {
		opts.NumPartitions = int(mc.Defaults.NumPartitions)
	}
	return opts, nil
}

// msSetting reads a millisecond setting of kv (0 when absent: the
// client's default), between 1 ms and max.
func msSetting(kv map[string]string, name string, max time.Duration) (time.Duration, error) {
	v, ok := kv[name]
	if !ok {
		return 0, nil
	}
	n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
	if err != nil || n < 1 || n > max.Milliseconds() {
		return 0, fmt.Errorf("config: %s=%q: want milliseconds from 1 to %d", name, v, max.Milliseconds())
	}
	return time.Duration(n) * time.Millisecond, nil
}
