package tests

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kfake"
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
		Env:        []string{"XDG_STATE_HOME=" + t.TempDir(), "XDG_CACHE_HOME=" + t.TempDir()},
	}
}
