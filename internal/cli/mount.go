package cli

import (
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"runtime"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/topicfs/topicfs/backend"
	"github.com/topicfs/topicfs/backend/local"
	"github.com/topicfs/topicfs/cluster"
	"github.com/topicfs/topicfs/engine"
	"github.com/topicfs/topicfs/engine/vfs"
	"github.com/topicfs/topicfs/fusefs"
	"github.com/topicfs/topicfs/policies"
)

// unmountDeadline bounds how long shutdown waits for open files on a lazily
// detached mount to be closed before it closes the log directory anyway.
const unmountDeadline = 3 * time.Second

// shutdownDeadline bounds a whole clean shutdown (unmount, stopping the
// cleaner, flush, checkpoint); past it topicfs aborts its FUSE connection and
// exits 1 rather than hang.
const shutdownDeadline = 60 * time.Second

func init() {
	register(&command{
		name:     "mount",
		synopsis: "mount a data directory of topics on MOUNTPOINT (foreground)",
		usage:    "topicfs mount [--config FILE] [--data DIR] [--read-only] [--allow-other] [--no-passthrough] [--umask MASK] [--log-level LEVEL] [--log-format FORMAT] [--metrics-addr ADDR] [--pprof] MOUNTPOINT",
		help: `
Mounts the topics of a data directory (Kafka's log.dirs layout) on MOUNTPOINT
and runs retention and log compaction in the background, as a Kafka broker
does. It runs in the foreground and prints

    topicfs: mounted MOUNTPOINT (data DIR)

on stderr once the mount answers. SIGINT or SIGTERM unmounts (lazily, if files
are still open), stops the background policies, flushes, checkpoints and exits
0. A stale mount left at MOUNTPOINT by a killed topicfs ("Transport endpoint
is not connected") is cleared with a lazy unmount at startup. Started by
go run, the mount also unmounts when the go run process dies.

Without --config, every topic runs on Kafka's defaults and the data lives in
$XDG_DATA_HOME/topicfs (default ~/.local/share/topicfs). mount.toml sets
defaults under Kafka's names ("segment.bytes" = 1073741824), the data
directory (log.dirs), and per-topic overrides ([topics.NAME] tables); see
mount.toml.example.`,
		flags: mountFlags,
	})
}

type mountOptions struct {
	config      string
	data        string
	readOnly    bool
	allowOther  bool
	noPass      bool
	logLevel    string
	logFormat   string
	metricsAddr string
	pprof       bool
	umask       string
	// cluster mode (cluster.go)
	bootstrap     string
	commandConfig string
	internal      bool
}

func mountFlags(fs *flag.FlagSet, e *env) func([]string) int {
	o := &mountOptions{}
	fs.StringVar(&o.config, "config", "", "read settings from `FILE` (mount.toml: Kafka names, log.dirs, [topics.NAME] overrides)")
	fs.StringVar(&o.data, "data", "", "data `DIR`ectory holding the topics (overrides log.dirs; default $XDG_DATA_HOME/topicfs)")
	fs.BoolVar(&o.readOnly, "read-only", false, "mount read-only: no appends, no config changes, no retention or compaction (safe on a copy of a Kafka broker's data)")
	fs.BoolVar(&o.allowOther, "allow-other", false, "let other users use the mount (FUSE allow_other, with the kernel enforcing the modes shown: others may read, only the mounting user may append or alter config); non-root needs user_allow_other in /etc/fuse.conf")
	fs.BoolVar(&o.noPass, "no-passthrough", false, "read every file of segments/ through topicfs; by default the kernel reads sealed segments' files straight from disk (FUSE passthrough, Linux 6.9 or later as root)")
	fs.StringVar(&o.logLevel, "log-level", "info", "log `LEVEL`: debug, info, warn or error")
	fs.StringVar(&o.logFormat, "log-format", "text", "log `FORMAT` on stderr: text or json")
	fs.StringVar(&o.umask, "umask", "077", "file mode creation `MASK` (octal) for the data directory and everything the mount writes in it: 077 keeps it to the user who mounts (directories 0700, files 0600); 022 lets every local user read it")
	fs.StringVar(&o.metricsAddr, "metrics-addr", "", "serve Prometheus metrics on `ADDR` at /metrics: [HOST]:PORT, on 127.0.0.1 unless HOST is given (0.0.0.0:9464 for every interface); off when empty")
	fs.BoolVar(&o.pprof, "pprof", false, "also serve Go's profiler at /debug/pprof/ on the --metrics-addr address")
	clusterFlags(fs, o)
	return func(args []string) int { return runMount(o, args, e) }
}

func runMount(o *mountOptions, args []string, e *env) int {
	const cmd = "mount"
	switch len(args) {
	case 0:
		return e.usageErr(cmd, "missing MOUNTPOINT")
	case 1:
	default:
		return e.usageErr(cmd, "want one MOUNTPOINT, got %d arguments: %q", len(args), args)
	}
	// Catch signals from the start: a SIGTERM while the data directory is
	// still being recovered must still end in a clean close.
	sigs := make(chan os.Signal, 2)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM)
	defer signal.Stop(sigs)
	// A log line written after whoever reads stderr went away must not end
	// the file system.
	ignoreSIGPIPE()
	goRun := followGoRun(sigs)

	logger, mc, umask, code := loadMountSetup(o, e)
	if code != exitOK {
		return code
	}
	if goRun {
		logger.Debug("started by go run: unmounting when it exits")
	}
	syscall.Umask(umask)
	if procs, raised := raiseProcs(); raised {
		logger.Debug("topicfs: GOMAXPROCS raised for FUSE request threads", "gomaxprocs", procs)
	}
	clusterMode := o.bootstrap != "" || mc.Cluster["bootstrap.servers"] != ""
	var dataDir string
	if !clusterMode {
		var err error
		if dataDir, err = mountDataDir(o, mc); err != nil {
			return e.fail(cmd, "%v", err)
		}
	}
	mnt, created, err := prepareMountpoint(args[0], func(msg string) { fmt.Fprintln(e.stderr, msg) })
	if err != nil {
		return e.fail(cmd, "%v", err)
	}
	// A mountpoint this run created is removed again if the mount fails.
	mounted := false
	defer func() {
		if created && !mounted {
			_ = os.Remove(mnt)
		}
	}()

	m := &mountRun{o: o, e: e, logger: logger, sigs: sigs, dataDir: dataDir, mnt: mnt, keyIndexMemory: mc.Defaults.KeyIndexMemoryBytes}
	if clusterMode {
		if code := m.openCluster(mc); code != exitOK {
			return code
		}
	} else {
		if code := m.prepareDataDir(); code != exitOK {
			return code
		}
		if code := m.openEngine(mc, umask); code != exitOK {
			return code
		}
	}
	if m.interrupted() {
		_ = m.closeEngine()
		return exitOK
	}
	srv, code := m.mount()
	if code != exitOK {
		return code
	}
	mounted = true
	return m.serve(srv)
}

// mountRun is one run of topicfs mount once its flags and config are
// loaded: what the steps of runMount set up and its shutdown undoes.
type mountRun struct {
	o       *mountOptions
	e       *env
	logger  *slog.Logger
	sigs    chan os.Signal
	dataDir string
	mnt     string

	d     *engine.LogDir      // nil in cluster mode
	cl    *cluster.Cluster    // cluster mode only
	sched *policies.Scheduler // nil on a read-only mount and in cluster mode
	ms    *metricsServer      // nil without --metrics-addr

	keyIndexMemory int64 // key.index.memory.bytes
}

// mountDataDir is the data directory to mount: --data, else log.dirs from
// mount.toml, else the default under $XDG_DATA_HOME.
func mountDataDir(o *mountOptions, mc *MountConfig) (string, error) {
	switch {
	case o.data != "":
		return resolvePath(".", o.data), nil
	case mc.DataDir != "":
		return mc.DataDir, nil
	}
	return defaultDataDir()
}

// interrupted reports (and says on stderr) whether SIGINT or SIGTERM came
// while the mount was being set up.
func (m *mountRun) interrupted() bool {
	select {
	case sig := <-m.sigs:
		fmt.Fprintf(m.e.stderr, "topicfs: %s before the mount was ready: closing without mounting\n", sig)
		return true
	default:
		return false
	}
}

// prepareDataDir checks that the data directory lies outside the mountpoint
// and on a disk, and creates it unless the mount is read-only; it returns
// exitOK, or the exit code after a one-line message.
func (m *mountRun) prepareDataDir() int {
	const cmd = "mount"
	e, dataDir := m.e, m.dataDir
	if within(dataDir, m.mnt) {
		return e.fail(cmd, "data directory %s lies inside the mountpoint %s; choose a data directory outside it", dataDir, m.mnt)
	}
	if other, ok := topicfsMountOf(dataDir); ok {
		// Its files are topics, not a disk: .lock cannot even be created.
		return e.fail(cmd, "data directory %s is inside the topicfs mount at %s; choose a data directory on a disk", dataDir, other)
	}
	if m.o.readOnly {
		if fi, err := os.Stat(dataDir); err != nil || !fi.IsDir() {
			return e.fail(cmd, "data directory %s does not exist (a read-only mount does not create it)", dataDir)
		}
	} else if err := os.MkdirAll(dataDir, 0o755); err != nil {
		return e.fail(cmd, "cannot create data directory %s: %v", dataDir, unwrapErrno(err))
	}
	return exitOK
}

// openEngine opens the data directory and, unless the mount is read-only,
// starts retention and compaction on it; it returns exitOK, or the exit
// code after a one-line message.
func (m *mountRun) openEngine(mc *MountConfig, umask int) int {
	const cmd = "mount"
	o, dataDir := m.o, m.dataDir
	d, err := engine.OpenLogDir(vfs.OS, dataDir, engine.LogDirOptions{
		Defaults:  mc.Defaults,
		Overrides: mc.Overrides,
		ReadOnly:  o.readOnly,
		Logger:    m.logger,
	})
	if err != nil {
		if errors.Is(err, engine.ErrLocked) {
			return m.e.fail(cmd, "data directory %s is in use by another topicfs mount (or a Kafka broker); stop it first or use --read-only", dataDir)
		}
		return m.e.fail(cmd, "cannot open data directory %s: %v", dataDir, err)
	}
	m.d = d
	m.logger.Info("opened data directory", "data", dataDir, "config", mc.Source, "topics", len(d.Topics()), "read_only", o.readOnly,
		"umask", fmt.Sprintf("%03o", umask))
	if o.readOnly {
		m.logger.Info("read-only mount: a frozen snapshot of the data directory as it was now; what a writer adds or removes later does not show until a remount", "data", dataDir)
		// Retention and compaction rewrite the log, so a read-only mount
		// runs neither.
		return exitOK
	}
	if mc.Defaults.CleanerThreads == 0 {
		m.logger.Warn("log.cleaner.threads=0: no log cleaner runs (as on a broker); compacted topics are not compacted")
	}
	m.sched = policies.NewScheduler(d, policies.Options{
		Logger:           m.logger,
		CleanerThreads:   schedulerThreads(mc.Defaults),
		DedupeBufferSize: mc.Defaults.CleanerDedupeBufferSize,
		LoadFactor:       mc.Defaults.CleanerLoadFactor,
	})
	m.sched.Start()
	return exitOK
}

// state is what fusefs and the metrics show of the policies' per-partition
// state: nil on a read-only mount, which runs no policies.
func (m *mountRun) state() func(string, int) (policies.PartitionState, bool) {
	if m.sched == nil {
		return nil
	}
	return m.sched.Lookup
}

// closeEngine stops the policies and closes the data directory, logging a
// failure to close it.
func (m *mountRun) closeEngine() error {
	if m.cl != nil {
		return m.closeCluster()
	}
	if m.sched != nil {
		m.sched.Stop()
	}
	err := m.d.Close()
	if err != nil {
		m.logger.Error("closing data directory", "data", m.dataDir, "err", err)
	}
	return err
}

// mount starts the metrics server (with --metrics-addr) and mounts the
// file system; on failure it undoes both and the engine, and returns the
// exit code after a one-line message.
func (m *mountRun) mount() (*fusefs.Server, int) {
	const cmd = "mount"
	o, e := m.o, m.e
	if o.metricsAddr != "" {
		ms, err := startMetrics(o.metricsAddr, o.pprof, m.d, m.state(), m.logger)
		if err != nil {
			_ = m.closeEngine()
			return nil, e.fail(cmd, "--metrics-addr %s: %v", o.metricsAddr, err)
		}
		m.ms = ms
		fmt.Fprintf(e.stderr, "topicfs: metrics on http://%s/metrics\n", ms.Addr())
		if o.pprof {
			fmt.Fprintf(e.stderr, "topicfs: profiles on http://%s/debug/pprof/\n", ms.Addr())
		}
	}

	fopts := fusefs.Options{ReadOnly: o.readOnly, AllowOther: o.allowOther, NoPassthrough: o.noPass, Logger: m.logger, State: m.state(),
		KeyIndexMemory: m.keyIndexMemory}
	if m.cl != nil {
		fopts.KeyIndexDir = m.cl.CacheDir()
	}
	if m.ms != nil {
		fopts.OpLatency = m.ms.ObserveOp
	}
	var be backend.Backend = m.cl
	if m.cl == nil {
		be = local.New(m.d)
	}
	srv, err := fusefs.MountBackend(m.mnt, be, fopts)
	if err != nil {
		if m.ms != nil {
			m.ms.Close()
		}
		_ = m.closeEngine()
		return nil, e.fail(cmd, "cannot mount %s: %v", m.mnt, mountErr(err))
	}
	return srv, exitOK
}

// serve announces the mount and serves it until SIGINT or SIGTERM (then
// unmounts) or an unmount from outside, then shuts down: the metrics
// server, the policies, the data directory. It returns the exit code.
func (m *mountRun) serve(srv *fusefs.Server) int {
	const cmd = "mount"
	served := make(chan struct{})
	go func() { srv.Wait(); close(served) }()
	// The connection number lets a stuck shutdown abort the mount (fusectl);
	// read it now, while the server surely answers.
	conn := fuseConnection(m.mnt)

	snapshot := ""
	if m.o.readOnly {
		snapshot = ", read-only snapshot"
	}
	if m.cl != nil {
		fmt.Fprintf(m.e.stderr, "topicfs: mounted %s (cluster %s, id %s%s)\n", m.mnt, m.cl.Bootstrap(), m.cl.ClusterID(), snapshot)
	} else {
		fmt.Fprintf(m.e.stderr, "topicfs: mounted %s (data %s%s)\n", m.mnt, m.dataDir, snapshot)
	}
	sdNotify("READY=1")

	select {
	case sig := <-m.sigs:
		m.logger.Info("unmounting", "signal", sig.String(), "mountpoint", m.mnt)
		go m.watchShutdown(conn)
		unmount(srv.Unmount, m.mnt, served, m.logger)
	case <-served:
		m.logger.Info("unmounted from outside (umount or connection abort)", "mountpoint", m.mnt)
		// After an abort the dead mount stays until detached.
		_ = unix.Unmount(m.mnt, unix.MNT_DETACH)
	}

	sdNotify("STOPPING=1")
	if m.ms != nil {
		m.ms.Close()
	}
	if err := m.closeEngine(); err != nil && m.cl != nil {
		fmt.Fprintf(m.e.stderr, "topicfs: unmounted %s\n", m.mnt)
		return m.e.fail(cmd, "closing the cluster client: %v", err)
	} else if err != nil {
		// No clean-shutdown marker was written: the next mount recovers.
		fmt.Fprintf(m.e.stderr, "topicfs: unmounted %s\n", m.mnt)
		return m.e.fail(cmd, "closing data directory %s: %v (the next mount recovers)", m.dataDir, err)
	}
	fmt.Fprintf(m.e.stderr, "topicfs: unmounted %s\n", m.mnt)
	return exitOK
}

// watchShutdown runs during a clean shutdown: a second SIGINT or SIGTERM,
// or a shutdown still running after shutdownDeadline, exits at once
// (forceExit). The go run parent's death signal never counts: go run
// forwards the first SIGTERM and then dies.
func (m *mountRun) watchShutdown(conn int) {
	deadline := time.After(shutdownDeadline)
	for {
		select {
		case sig := <-m.sigs:
			if sig == parentDeathSignal {
				continue
			}
			m.forceExit(conn, sig.String()+" again")
		case <-deadline:
			m.forceExit(conn, fmt.Sprintf("shutdown still running after %v", shutdownDeadline))
		}
	}
}

// forceExit ends the process when a clean shutdown cannot finish: it
// aborts the FUSE connection conn first, since a thread blocked in the
// kernel on this mount would keep even os.Exit from ending the process.
func (m *mountRun) forceExit(conn int, why string) {
	fmt.Fprintf(m.e.stderr, "topicfs: %s: exiting without a clean shutdown (the next mount recovers)\n", why)
	if err := abortFUSE(conn); err != nil {
		m.logger.Warn("aborting the FUSE connection", "connection", conn, "err", err)
	}
	_ = unix.Unmount(m.mnt, unix.MNT_DETACH)
	os.Exit(exitFail)
}

// loadMountSetup checks the flags and loads mount.toml, before anything is
// created or mounted: the logger, the config (its cleaner settings checked
// against this machine's memory), the umask, and exitOK, or the exit code
// after a one-line message.
func loadMountSetup(o *mountOptions, e *env) (*slog.Logger, *MountConfig, int, int) {
	const cmd = "mount"
	logger, err := newLogger(e.stderr, o.logLevel, o.logFormat)
	if err != nil {
		return nil, nil, 0, e.usageErr(cmd, "%v", err)
	}
	umask, err := parseUmask(o.umask)
	if err != nil {
		return nil, nil, 0, e.usageErr(cmd, "%v", err)
	}
	if o.pprof && o.metricsAddr == "" {
		return nil, nil, 0, e.usageErr(cmd, "--pprof needs --metrics-addr")
	}
	mc, err := LoadMountConfig(o.config)
	if err != nil {
		return nil, nil, 0, e.fail(cmd, "%v", err)
	}
	if err := mc.Defaults.CheckCleanerMemory(physicalMemory()); err != nil {
		return nil, nil, 0, e.fail(cmd, "config %s: %s", mc.Source, engineMsg(err))
	}
	return logger, mc, umask, exitOK
}

// unmount asks the FUSE server to unmount; when that fails (files still open:
// EBUSY), it detaches the mount lazily and waits, up to unmountDeadline, for
// the last open file to be closed.
func unmount(srvUnmount func() error, mnt string, served <-chan struct{}, logger *slog.Logger) {
	err := srvUnmount()
	if err == nil {
		select {
		case <-served:
			return
		case <-time.After(unmountDeadline):
			logger.Warn("FUSE server still running after unmount", "mountpoint", mnt)
			return
		}
	}
	if fusermountFallback(err) {
		// go-fuse tries fusermount after umount(2) failed (EBUSY); its
		// missing binary says nothing of why.
		logger.Warn("unmount failed: files are still open; detaching lazily", "mountpoint", mnt)
	} else {
		logger.Warn("unmount failed, detaching lazily (files are still open)", "mountpoint", mnt, "err", err)
	}
	done, derr := detachWait(mnt, served, unmountDeadline)
	if derr != nil {
		logger.Error("lazy unmount failed", "mountpoint", mnt, "err", derr)
	}
	if !done {
		logger.Warn("open files still hold the detached mount; shutting down anyway", "mountpoint", mnt, "waited", unmountDeadline)
	}
}

// fusermountFallback reports an error of go-fuse's fallback to the
// fusermount binary, which it tries after mount(2) or umount(2) failed;
// topicfs never installs or needs it.
func fusermountFallback(err error) bool { return strings.Contains(err.Error(), "fusermount") }

// mountErr turns the common mount(2) failures into advice.
func mountErr(err error) error {
	switch {
	case errors.Is(err, syscall.EBUSY):
		return fmt.Errorf("mountpoint busy: %v", err)
	case errors.Is(err, syscall.EPERM), errors.Is(err, syscall.EACCES):
		return fmt.Errorf("%v (mounting needs root or CAP_SYS_ADMIN, and read/write access to /dev/fuse)", err)
	case fusermountFallback(err):
		return fmt.Errorf("%v (topicfs mounts with mount(2) directly, which needs root or CAP_SYS_ADMIN; fusermount is not used)", err)
	case errors.Is(err, syscall.ENODEV), errors.Is(err, os.ErrNotExist):
		return fmt.Errorf("%v (is the fuse kernel module loaded? modprobe fuse; /dev/fuse must exist)", err)
	}
	return err
}

// extraProcs is how many Ps the mount runs beyond the CPUs Go would use.
// go-fuse's request threads block in read(2) on /dev/fuse; one that a
// request wakes must get a P before it can serve it, and with GOMAXPROCS
// at the CPU count the read-ahead, loader and append goroutines often held
// all of them, so the request waited for one to block or be preempted. Two
// spare Ps let it run at once (the kernel then shares the CPUs); the
// figures are in docs/PERFORMANCE.md, "Mount append".
const extraProcs = 2

// raiseProcs raises GOMAXPROCS by extraProcs unless the GOMAXPROCS
// environment variable sets it; it returns the value in force and whether
// it changed it.
func raiseProcs() (int, bool) {
	if os.Getenv("GOMAXPROCS") != "" {
		return runtime.GOMAXPROCS(0), false
	}
	n := runtime.GOMAXPROCS(0) + extraProcs
	runtime.GOMAXPROCS(n)
	return n, true
}

// schedulerThreads is policies.Options.CleanerThreads for the mount's
// log.cleaner.threads: 0 means no cleaner, as in Kafka (the scheduler's
// own 0 means its default).
func schedulerThreads(c engine.Config) int {
	if c.CleanerThreads == 0 {
		return -1
	}
	return int(c.CleanerThreads)
}
