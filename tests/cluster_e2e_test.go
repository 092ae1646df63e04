package tests

// Cluster mode end to end: a kfake cluster in the test process, the real
// topicfs binary mounting it (clusterMountOpts), shell tools on the mount
// and independent Kafka clients (kgo, kcat) on the cluster's side.

import (
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kfake"
)

// mountFails runs topicfs mount with config as mount.toml and args before
// a new mountpoint, expects it to exit non-zero without mounting, and
// returns its stderr lines and how long it ran.
func mountFails(t *testing.T, config string, args ...string) ([]string, time.Duration) {
	t.Helper()
	requireFUSE(t)
	all := append([]string{"mount", "--config", writeTemp(t, "mount.toml", config)}, args...)
	all = append(all, t.TempDir())
	began := time.Now()
	_, stderr, code := runTopicfs(t, clusterEnv(t), all...)
	took := time.Since(began)
	assert.NotEqual(t, 0, code, "topicfs mount exits non-zero; stderr:\n%s", stderr)
	return strings.Split(strings.TrimSuffix(stderr, "\n"), "\n"), took
}

// TestClusterMountUnreachable: bootstrap servers nothing listens on stop
// the mount within request.timeout.ms (not the 30 s default) with one
// line naming the cause.
func TestClusterMountUnreachable(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := ln.Addr().String()
	require.NoError(t, ln.Close())

	lines, took := mountFails(t, "\"request.timeout.ms\" = 1500\n", "--bootstrap-server", addr)
	require.Len(t, lines, 1, "one line: %q", lines)
	assert.True(t, strings.HasPrefix(lines[0], "topicfs mount: cluster: no broker reachable at "+addr+" within 1.5s"), lines[0])
	// Generous for a loaded machine, yet well below the default 30 s.
	assert.Less(t, took, 20*time.Second, "bounded by request.timeout.ms")
}

// commandConfig writes a --command-config file for SCRAM-SHA-256 as user
// with password (extra lines after).
func commandConfig(t *testing.T, user, password string, extra ...string) string {
	lines := append([]string{"security.protocol=SASL_PLAINTEXT", "sasl.mechanism=SCRAM-SHA-256",
		"sasl.username=" + user, "sasl.password=" + password}, extra...)
	return writeTemp(t, "client.properties", strings.Join(lines, "\n")+"\n")
}

// TestClusterMountSASL mounts a cluster that requires SCRAM-SHA-256: the
// right password mounts and works, a wrong one stops the mount with one
// line naming authentication, an unknown key in the command config stops
// it with one line naming the key; the password shows nowhere.
func TestClusterMountSASL(t *testing.T) {
	const password = "Xyzzy-s3cret-Pa55"
	kc := startKfake(t, kfake.EnableSASL(), kfake.Superuser("SCRAM-SHA-256", "admin", password))
	bootstrap := strings.Join(kc.ListenAddrs(), ",")
	cfg := "\"request.timeout.ms\" = 5000\n"

	t.Run("right password", func(t *testing.T) {
		m := startMount(t, clusterMountOpts(t, kc, cfg, "--command-config", commandConfig(t, "admin", password)))
		got := m.Sh(t, `mkdir $MNT/s; printf 'a\nb\n' > $MNT/s/0/append; echo c >> $MNT/s/append; cat $MNT/s/0/records`)
		assert.Equal(t, "a\nb\nc\n", got)
		// grep -c prints 0 (and fails) for each file that lacks it.
		got = m.Sh(t, `grep -c -F -e '`+password+`' $MNT/s/config $MNT/s/stats $MNT/s/0/stats || true`)
		assert.Equal(t, fmt.Sprintf("%[1]s/s/config:0\n%[1]s/s/stats:0\n%[1]s/s/0/stats:0\n", m.Dir), got)
		m.Stop()
		assert.Contains(t, m.Stderr(), "sasl.password=[redacted]", "the connection is logged, password redacted")
		assert.NotContains(t, m.Stderr(), password)
	})
	t.Run("wrong password", func(t *testing.T) {
		lines, _ := mountFails(t, cfg, "--bootstrap-server", bootstrap,
			"--command-config", commandConfig(t, "admin", "wrong-"+password))
		require.Len(t, lines, 1, "one line: %q", lines)
		assert.True(t, strings.HasPrefix(lines[0], "topicfs mount: cluster: authentication failed at "+bootstrap), lines[0])
		assert.NotContains(t, lines[0], password)
	})
	t.Run("unknown key", func(t *testing.T) {
		cc := commandConfig(t, "admin", password, "sasl.kerberos.service.name=kafka")
		lines, _ := mountFails(t, cfg, "--bootstrap-server", bootstrap, "--command-config", cc)
		require.Len(t, lines, 1, "one line: %q", lines)
		assert.True(t, strings.HasPrefix(lines[0], "topicfs mount: --command-config "+cc+
			`: invalid config: command config: line 5: unknown key "sasl.kerberos.service.name"`), lines[0])
		assert.NotContains(t, lines[0], password)
	})
}

// TestClusterTailFollowsOtherProducer: tail -f of a cluster partition's
// records shows what an independent producer (kgo, not the mount) appends.
func TestClusterTailFollowsOtherProducer(t *testing.T) {
	kc := startKfake(t)
	m := startMount(t, clusterMountOpts(t, kc, ""))
	m.Sh(t, `mkdir $MNT/f; echo first > $MNT/f/0/append`)

	follow := startTail(t, m.Path("f", "0", "records"))
	follow.shows(t, "first\n")
	produceValues(t, kc, "f", 0, "from-kgo", "and-another")
	follow.shows(t, "first\nfrom-kgo\nand-another\n")
}

// tailF is a tail -f running on a file of a mount.
type tailF struct {
	cmd *exec.Cmd
	out lockedBuffer
}

// startTail starts tail -f on path; it is killed at the end of the test.
func startTail(t *testing.T, path string) *tailF {
	t.Helper()
	tf := &tailF{cmd: exec.Command("tail", "-f", path)}
	tf.cmd.Stdout, tf.cmd.Stderr = &tf.out, &tf.out
	require.NoError(t, tf.cmd.Start())
	t.Cleanup(tf.stop)
	return tf
}

// stop kills tail (again: harmless) and waits for it.
func (tf *tailF) stop() {
	_ = tf.cmd.Process.Kill()
	_ = tf.cmd.Wait()
}

// shows waits until tail has printed exactly want. The deadline is a hang
// guard: tail polls once a second, the mount the high watermark every
// 250 ms.
func (tf *tailF) shows(t *testing.T, want string) {
	t.Helper()
	eventually(t, 30*time.Second, "tail -f output", func() error {
		if got := tf.out.String(); got != want {
			return fmt.Errorf("tail printed %q, want %q", got, want)
		}
		return nil
	})
}

// TestClusterAppendWhileLeadersMove appends 200,000 lines with one shell
// redirect into a partition of three replicas while its leader keeps
// moving and a broker (not the controller) is removed: the append
// succeeds, and an independent consumer reads every line once, in order.
func TestClusterAppendWhileLeadersMove(t *testing.T) {
	const n = 200000
	kc := startKfake(t)
	m := startMount(t, clusterMountOpts(t, kc, "\"replication.factor\" = 3\n"))
	m.Sh(t, `mkdir $MNT/t`)
	victim := (controller(t, kc) + 1) % 3 // kfake's nodes are 0, 1 and 2

	stop, done := make(chan struct{}), make(chan struct{})
	var moves atomic.Int64
	var removed atomic.Bool
	go func() {
		defer close(done)
		for {
			select {
			case <-stop:
				return
			case <-time.After(20 * time.Millisecond):
			}
			kc.ShufflePartitionLeaders()
			moves.Add(1)
			if !removed.Load() && kc.PartitionInfo("t", 0).HighWatermark >= n/4 {
				assert.NoError(t, kc.RemoveNode(victim))
				removed.Store(true)
			}
		}
	}()
	began := time.Now()
	_, errOut, err := m.ShErr(fmt.Sprintf(`seq 1 %d > $MNT/t/0/append`, n))
	took := time.Since(began)
	close(stop)
	<-done
	require.NoError(t, err, "the append succeeds: %s", errOut)
	t.Logf("%d leader moves during the append (%v)", moves.Load(), took)
	assert.True(t, removed.Load(), "a broker was removed during the append")
	assert.Greater(t, moves.Load(), int64(1))

	assert.Equal(t, int64(n), kc.PartitionInfo("t", 0).HighWatermark, "no record twice")
	got := consumeValues(t, kc, "t", 0, n)
	require.Len(t, got, n)
	for i, v := range got {
		if v != strconv.Itoa(i+1) {
			require.Equal(t, strconv.Itoa(i+1), v, "offset %d", i)
		}
	}
	assert.Equal(t, fmt.Sprintf("%d\n", n), m.Sh(t, `wc -l < $MNT/t/0/records`))
}

// TestClusterRestartUnderMount stops the whole cluster under a live
// mount: an append fails with an errno within delivery.timeout.ms and the
// mount stays; once the cluster is back (same ports, same data), appends
// and reads work again without a remount. Stopping the mount while the
// cluster is down does not hang.
func TestClusterRestartUnderMount(t *testing.T) {
	dir := t.TempDir()
	kc := startKfake(t, kfake.DataDir(dir))
	var ports []int
	for _, a := range kc.ListenAddrs() {
		_, p, err := net.SplitHostPort(a)
		require.NoError(t, err)
		port, err := strconv.Atoi(p)
		require.NoError(t, err)
		ports = append(ports, port)
	}
	restart := func() *kfake.Cluster { return startKfake(t, kfake.DataDir(dir), kfake.Ports(ports...)) }
	cfg := "\"request.timeout.ms\" = 1000\n\"delivery.timeout.ms\" = 3000\n"
	m := startMount(t, clusterMountOpts(t, kc, cfg))
	assert.Equal(t, "before\n", m.Sh(t, `mkdir $MNT/r; echo before > $MNT/r/0/append; cat $MNT/r/0/records`))

	follow := startTail(t, m.Path("r", "0", "records"))
	follow.shows(t, "before\n")
	view, err := os.Open(m.Path("r", "0", "records"))
	require.NoError(t, err)
	held, err := os.OpenFile(m.Path("r", "0", "append"), os.O_WRONLY|os.O_APPEND, 0)
	require.NoError(t, err)
	kc.Close()
	began := time.Now()
	// An append file opened before: write(2) buffers the line, close(2)
	// appends it and fails.
	_, err = held.WriteString("held\n")
	require.NoError(t, err)
	assert.ErrorIs(t, held.Close(), syscall.ETIMEDOUT)
	assert.Contains(t, m.Stderr(), "append failed: records not acknowledged", "the log says what was lost")
	// A new open(2) fails: it looks the topic up.
	_, errOut, err := m.ShErr(`echo down >> $MNT/r/0/append`)
	require.Error(t, err, "an append to a stopped cluster fails")
	assert.Equal(t, "bash: line 1: "+m.Path("r", "0", "append")+": No route to host\n", errOut)
	// Generous for a loaded machine, yet far below the 120 s default.
	assert.Less(t, time.Since(began), 30*time.Second, "bounded by delivery.timeout.ms")
	require.True(t, m.Running(), "the mount outlives the cluster")
	// A view open since before keeps what it holds: fstat(2) and reads to
	// its end work (which tail -f needs to keep following).
	fi, err := view.Stat()
	require.NoError(t, err)
	assert.Equal(t, int64(len("before\n")), fi.Size())
	data, err := io.ReadAll(view)
	require.NoError(t, err)
	assert.Equal(t, "before\n", string(data))
	require.NoError(t, view.Close())

	kc = restart()
	got := m.Sh(t, `echo after >> $MNT/r/0/append; cat $MNT/r/0/records`)
	// The failed append's outcome is unknown, as with any Kafka producer:
	// its record is in the log once, or not at all.
	assert.Contains(t, []string{"before\nafter\n", "before\nheld\nafter\n"}, got)
	follow.shows(t, got) // the tail -f that ran all along
	follow.stop()

	kc.Close()
	m.Stop() // exits 0, unmounted, within the harness's deadline
}

// TestClusterKcat: kcat, a client built on librdkafka, reads exactly what
// the mount appended, and the mount shows what kcat produced.
func TestClusterKcat(t *testing.T) {
	requireTool(t, "kcat", "kcat")
	kc := startKfake(t)
	m := startMount(t, clusterMountOpts(t, kc, ""))
	kcat := "kcat -b " + strings.Join(kc.ListenAddrs(), ",")
	got := m.Sh(t, `mkdir $MNT/k; printf 'one\ntwo\n' > $MNT/k/0/append; `+kcat+` -C -t k -p 0 -o beginning -e -q`)
	assert.Equal(t, "one\ntwo\n", got)
	got = m.Sh(t, `printf 'three\nfour\n' | `+kcat+` -P -t k -p 0; cat $MNT/k/0/records`)
	assert.Equal(t, "one\ntwo\nthree\nfour\n", got)
}

// TestClusterConfig: a cluster topic's config file shows the broker's
// configs and topicfs's own settings; a written line changes the broker's
// config; a write with a bad line fails EINVAL and changes nothing.
func TestClusterConfig(t *testing.T) {
	kc := startKfake(t)
	m := startMount(t, clusterMountOpts(t, kc, ""))
	m.Sh(t, `mkdir $MNT/c`)
	pick := `grep -E '^(cleanup.policy|num.partitions|parse.key|replication.factor|retention.ms)=' $MNT/c/config`
	assert.Equal(t, "cleanup.policy=delete\nnum.partitions=1\nparse.key=false\nreplication.factor=3\nretention.ms=604800000\n",
		m.Sh(t, pick))

	m.Sh(t, `echo retention.ms=1234 > $MNT/c/config`)
	assert.Equal(t, "1234", brokerConfig(t, kc, "c", "retention.ms"), "the broker has it")
	assert.Equal(t, "retention.ms=1234\n", m.Sh(t, `grep ^retention.ms= $MNT/c/config`))

	before := m.Sh(t, `cat $MNT/c/config`)
	// One write(2) with both lines (cat of a file; bash's printf would
	// write each line alone).
	_, errOut, err := m.ShErr(`printf 'retention.ms=999\nparse.key=maybe\n' > c.txt; cat c.txt > $MNT/c/config`)
	require.Error(t, err)
	assert.Equal(t, "cat: write error: Invalid argument\n", errOut)
	assert.Equal(t, "1234", brokerConfig(t, kc, "c", "retention.ms"), "nothing of the write applied")
	assert.Equal(t, before, m.Sh(t, `cat $MNT/c/config`))

	// Values of configs Kafka and the engine share are checked as Kafka's
	// validators check them, whether or not the broker does (kfake does
	// not).
	for _, line := range []string{"retention.ms=abc", "retention.ms=-5", "segment.bytes=10", "cleanup.policy=sometimes"} {
		_, errOut, err := m.ShErr(fmt.Sprintf(`echo %s > $MNT/c/config`, line))
		require.Error(t, err, line)
		assert.Contains(t, errOut, "Invalid argument", line)
	}
	assert.Equal(t, "1234", brokerConfig(t, kc, "c", "retention.ms"))
	assert.Equal(t, before, m.Sh(t, `cat $MNT/c/config`))
}

// TestClusterPartitionStats: a cluster partition's stats file (read with
// jq) names the leader, three replicas all in sync, the high watermark of
// what was appended and health "ok".
func TestClusterPartitionStats(t *testing.T) {
	kc := startKfake(t)
	m := startMount(t, clusterMountOpts(t, kc, "\"replication.factor\" = 3\n"))
	m.Sh(t, `mkdir $MNT/s; seq 1 37 > $MNT/s/0/append`)
	got := m.Sh(t, `jq -c '{leader, replicas: (.replicas | sort), isr: (.isr | sort), high_watermark, health}' $MNT/s/0/stats`)
	want := fmt.Sprintf(`{"leader":%d,"replicas":[0,1,2],"isr":[0,1,2],"high_watermark":37,"health":"ok"}`+"\n",
		kc.LeaderFor("s", 0))
	assert.Equal(t, want, got)
}
