package tests

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// startKfake starts franz-go's in-process Kafka cluster: three brokers,
// topics replicated three times unless a test asks otherwise. It stops in
// t.Cleanup (after the mounts of the test, which were started later).
func startKfake(t *testing.T, opts ...kfake.Opt) *kfake.Cluster {
	t.Helper()
	kc, err := kfake.NewCluster(append([]kfake.Opt{kfake.NumBrokers(3)}, opts...)...)
	require.NoError(t, err)
	t.Cleanup(kc.Close)
	return kc
}

// clusterEnv keeps a cluster mount's state and cache in the test's
// temporary directories.
func clusterEnv(t *testing.T) []string {
	return []string{"XDG_STATE_HOME=" + t.TempDir(), "XDG_CACHE_HOME=" + t.TempDir()}
}

// clusterMountOpts mounts kc with its state and cache in the test's
// temporary directories; config is mount.toml (num.partitions = 1 unless
// it says otherwise, as on a local mount).
func clusterMountOpts(t *testing.T, kc *kfake.Cluster, config string, args ...string) mountOpts {
	if !strings.Contains(config, "num.partitions") {
		config = "\"num.partitions\" = 1\n" + config
	}
	return mountOpts{
		NoDataFlag: true,
		Config:     config,
		Args:       append([]string{"--bootstrap-server", strings.Join(kc.ListenAddrs(), ",")}, args...),
		Env:        clusterEnv(t),
	}
}

// requireTool skips when command is missing on a developer machine, but
// fails under CI, whose .ci/run installs pkg (Debian's package).
func requireTool(t testing.TB, command, pkg string) {
	t.Helper()
	if _, err := exec.LookPath(command); err != nil {
		if os.Getenv("CI") == "" {
			t.Skipf("%s not installed (apt-get install %s); set CI=1 to make this a failure", command, pkg)
		}
		t.Fatalf("%s missing under CI (.ci/run installs the %s package): %v", command, pkg, err)
	}
}

// writeTemp writes content to a new file name in a temporary directory and
// returns its path.
func writeTemp(t *testing.T, name, content string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	require.NoError(t, os.WriteFile(p, []byte(content), 0o600))
	return p
}

// kafkaClient is a Kafka client of kc's brokers that shares no code with
// topicfs (franz-go's kgo alone), closed at the end of the test.
func kafkaClient(t *testing.T, kc *kfake.Cluster, opts ...kgo.Opt) *kgo.Client {
	t.Helper()
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(kc.ListenAddrs()...)}, opts...)...)
	require.NoError(t, err)
	t.Cleanup(cl.Close)
	return cl
}

// produceValues appends values to partition part of topic with an
// independent client and waits for their acknowledgement.
func produceValues(t *testing.T, kc *kfake.Cluster, topic string, part int32, values ...string) {
	t.Helper()
	cl := kafkaClient(t, kc, kgo.RecordPartitioner(kgo.ManualPartitioner()))
	recs := make([]*kgo.Record, len(values))
	for i, v := range values {
		recs[i] = &kgo.Record{Topic: topic, Partition: part, Value: []byte(v)}
	}
	ctx, cancel := context.WithTimeout(context.Background(), harnessDeadline)
	defer cancel()
	require.NoError(t, cl.ProduceSync(ctx, recs...).FirstErr())
}

// consumeValues reads want records of partition part of topic from the
// start with an independent client and returns their values.
func consumeValues(t *testing.T, kc *kfake.Cluster, topic string, part int32, want int) []string {
	t.Helper()
	cl := kafkaClient(t, kc, kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: {part: kgo.NewOffset().AtStart()}}))
	ctx, cancel := context.WithTimeout(context.Background(), 2*harnessDeadline) // a hang guard
	defer cancel()
	out := make([]string, 0, want)
	for len(out) < want {
		fs := cl.PollFetches(ctx)
		require.NoError(t, ctx.Err(), "consumed %d of %d records", len(out), want)
		fs.EachError(func(_ string, _ int32, err error) { t.Logf("fetch: %v", err) })
		fs.EachRecord(func(r *kgo.Record) { out = append(out, string(r.Value)) })
	}
	return out
}

// brokerConfig reads one config of topic from the brokers with an
// independent DescribeConfigs request.
func brokerConfig(t *testing.T, kc *kfake.Cluster, topic, name string) string {
	t.Helper()
	cl := kafkaClient(t, kc)
	req := kmsg.NewPtrDescribeConfigsRequest()
	res := kmsg.NewDescribeConfigsRequestResource()
	res.ResourceType, res.ResourceName, res.ConfigNames = kmsg.ConfigResourceTypeTopic, topic, []string{name}
	req.Resources = append(req.Resources, res)
	ctx, cancel := context.WithTimeout(context.Background(), harnessDeadline)
	defer cancel()
	resp, err := req.RequestWith(ctx, cl)
	require.NoError(t, err)
	require.Len(t, resp.Resources, 1)
	for _, c := range resp.Resources[0].Configs {
		if c.Name == name && c.Value != nil {
			return *c.Value
		}
	}
	return ""
}

// controller returns the node id of kc's controller, as Metadata says.
func controller(t *testing.T, kc *kfake.Cluster) int32 {
	t.Helper()
	req := kmsg.NewPtrMetadataRequest()
	req.Topics = []kmsg.MetadataRequestTopic{}
	ctx, cancel := context.WithTimeout(context.Background(), harnessDeadline)
	defer cancel()
	resp, err := req.RequestWith(ctx, kafkaClient(t, kc))
	require.NoError(t, err)
	return resp.ControllerID
}
