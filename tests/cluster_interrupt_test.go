package tests

import (
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/topicfs/topicfs/internal/testutil/kfakehold"
)

// holdProduces makes kc hold back every Produce request until release.
func holdProduces(t *testing.T, kc *kfake.Cluster) (release func()) {
	release, _ = kfakehold.Hold(t, kc, kmsg.Produce, 0)
	return release
}

// TestClusterKilledWriterLeaves: a writer killed while its close(2) or
// fsync(2) waits for acknowledgements the cluster holds back is gone at
// once (the FLUSH or FSYNC answers EINTR), not after delivery.timeout.ms;
// the mount goes on serving.
func TestClusterKilledWriterLeaves(t *testing.T) {
	kc := startKfake(t)
	m := startMount(t, clusterMountOpts(t, kc, "\"delivery.timeout.ms\" = 120000\n"))
	m.Sh(t, `mkdir $MNT/w && echo before > $MNT/w/0/append`)
	release := holdProduces(t, kc)
	for _, script := range []string{
		`echo held > $MNT/w/0/append`,
		`echo held | dd of=$MNT/w/0/append conv=fsync,notrunc oflag=append status=none`,
	} {
		cmd := exec.Command("bash", "-c", script)
		cmd.Env = append(cmd.Environ(), "MNT="+m.Path())
		require.NoError(t, cmd.Start())
		time.Sleep(300 * time.Millisecond) // in close or fsync, waiting
		require.NoError(t, cmd.Process.Kill())
		exited := make(chan struct{})
		go func() { _ = cmd.Wait(); close(exited) }()
		select {
		case <-exited:
		case <-time.After(20 * time.Second): // far below the delivery timeout
			t.Fatalf("%q: the killed writer still waits for its acknowledgements", script)
		}
	}
	release()
	assert.Equal(t, "before\n", m.Sh(t, `head -1 $MNT/w/0/records`), "the mount serves on")
}

// TestClusterSignalledWriterWaits: a signal the writer survives (a
// handler runs, as Go's runtime preempts threads with SIGURG) does not
// fail its close(2): the close waits for the acknowledgement as before.
func TestClusterSignalledWriterWaits(t *testing.T) {
	kc := startKfake(t)
	m := startMount(t, clusterMountOpts(t, kc, ""))
	m.Sh(t, `mkdir $MNT/s`)
	release := holdProduces(t, kc)
	requireTool(t, "python3", "python3")
	// Python retries no close(2) that fails with EINTR (PEP 475): the
	// error would show.
	cmd := exec.Command("python3", "-c", `
import os, signal, sys
signal.signal(signal.SIGUSR1, lambda *a: None)
fd = os.open(sys.argv[1], os.O_WRONLY)
os.write(fd, b"held\n")
try:
    os.close(fd)
    print("closed")
except OSError as e:
    print("close failed:", e)
`, m.Path("s", "0", "append"))
	var out strings.Builder
	cmd.Stdout = &out
	require.NoError(t, cmd.Start())
	time.Sleep(300 * time.Millisecond) // in close, waiting
	require.NoError(t, cmd.Process.Signal(syscall.SIGUSR1))
	time.Sleep(300 * time.Millisecond)
	release()
	require.NoError(t, cmd.Wait(), out.String())
	assert.Equal(t, "closed\n", out.String())
	assert.Equal(t, []string{"held"}, consumeValues(t, kc, "s", 0, 1))
}
