package fusefs

import (
	"cmp"
	"context"
	"fmt"
	"github.com/topicfs/topicfs/backend"
	"github.com/topicfs/topicfs/backend/local"
	"log/slog"
	"sync"
	"time"

	"github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"

	"github.com/topicfs/topicfs/engine"
	"github.com/topicfs/topicfs/policies"
)

// Options configures the mounted tree. The zero value is a writable mount
// that logs to slog.Default and reports no policy state in stats.
type Options struct {
	// ReadOnly refuses every change with EROFS and shows no write bits.
	ReadOnly bool
	// Logger receives corruption reports and unmapped errors (nil: slog.Default).
	Logger *slog.Logger
	// State, if set, returns the retention/cleaner state of a partition for
	// its stats file. It may be nil.
	State func(topic string, partition int) (policies.PartitionState, bool)
	// OpLatency, if non-nil, is called once per FUSE operation with its name
	// ("lookup", "getattr", "open", "read", "write", "flush", "fsync",
	// "release", "readdir", "mkdir", "rmdir", "setattr", ...) and how long
	// the handler took. It must be cheap and safe for concurrent use.
	OpLatency func(op string, d time.Duration)
	// AllowOther lets users other than the one who mounted use the mount
	// (FUSE's allow_other). It also turns on default_permissions, so the
	// kernel enforces the modes the tree shows: others may read views,
	// stats and segments, but only the owner may append or alter config.
	AllowOther bool
	// NoPassthrough serves every file of segments/ through topicfs's
	// READ handler, and does not negotiate FUSE passthrough with the
	// kernel. Without it, sealed segments' files are read by the kernel
	// straight from disk where the kernel and the process allow it.
	NoPassthrough bool
	// KeyIndexMemory is key.index.memory.bytes: the heap all by-key/
	// indexes of the mount may use together (0: DefaultKeyIndexMemory).
	// Tables past it spill to files in KeyIndexDir ("" for a local mount:
	// the data directory; "" in cluster mode: no spilling).
	KeyIndexMemory int64
	KeyIndexDir    string

	indexEntries int           // segment indexes kept (0: indexCacheEntries); tests lower it
	sizesEvery   time.Duration // ViewSizesFile save interval (0: viewSizesEvery); tests lower it
}

// NewRoot returns the root of the tree over d, for fs.Mount or a test
// harness. Mount is the usual entry point.
func NewRoot(d *engine.LogDir, opts Options) fs.InodeEmbedder {
	return newRoot(newFsys(local.New(d), opts))
}

// attrTimeout is the global attribute and entry timeout (docs/FUSE.md §1):
// long enough that cat and wc do not pay a GETATTR per read, short enough
// that a view's growth shows within a second even without a notification.
const attrTimeout = time.Second

// maxWrite is the largest WRITE request the mount accepts: the kernel's
// cap (/proc/sys/fs/fuse/max_pages_limit, 256 pages by default).
const maxWrite = 1 << 20

// Server is a running mount: go-fuse's server, whose Wait also saves what
// the mount measured of its views (ViewSizesFile) once serving has ended.
// While it serves, a writable mount saves that file every viewSizesEvery
// when views measured something new, so a mount that is killed loses at
// most that interval's measuring.
type Server struct {
	*fuse.Server
	f       *fsys
	stop    chan struct{}
	stopped chan struct{}
	finish  sync.Once // the final save
}

// viewSizesEvery is how often a mount saves ViewSizesFile while serving
// (when something new was measured since the last save).
const viewSizesEvery = 5 * time.Minute

// Wait waits for the serve loop to exit (after Unmount, or an unmount from
// the shell), then saves the views' segment sizes to ViewSizesFile (once;
// not on a read-only mount). Call it before closing the LogDir.
func (s *Server) Wait() {
	s.Server.Wait()
	s.finish.Do(func() {
		close(s.stop)
		<-s.stopped
		s.f.keys.close()
		s.finalSave()
	})
}

// saveSizes saves ViewSizesFile every interval while the mount serves,
// when the views measured something since the last save.
func (s *Server) saveSizes(every time.Duration) {
	defer close(s.stopped)
	if s.f.sizes.readOnly {
		return
	}
	t := time.NewTicker(every)
	defer t.Stop()
	var last uint64
	for {
		select {
		case <-s.stop:
			return
		case <-t.C:
			if n := s.f.cache.scans.Load(); n != last {
				last = n
				s.f.sizes.write(s.f.cache, slog.LevelDebug)
			}
		}
	}
}

// Mount mounts the tree over the data directory d at mountpoint and serves
// it in the background. The caller unmounts with Unmount and then waits
// with Wait before closing d.
func Mount(mountpoint string, d *engine.LogDir, opts Options) (*Server, error) {
	return MountBackend(mountpoint, local.New(d), opts)
}

// MountBackend mounts the tree over b (a data directory's backend/local, or
// a cluster) at mountpoint and serves it in the background. The caller
// unmounts with Unmount and then waits with Wait before closing b.
func MountBackend(mountpoint string, b backend.Backend, opts Options) (*Server, error) {
	f := newFsys(b, opts)
	one := attrTimeout
	var zero time.Duration
	mo := fuse.MountOptions{
		DirectMount: true,
		FsName:      "topicfs",
		Name:        "topicfs",
		// 1 MiB writes: dd bs=1M and cat > append cross the kernel in 8x
		// fewer requests (docs/FUSE.md §3).
		MaxWrite: maxWrite,
		// tail -f readers of many partitions each hold a request slot.
		MaxBackground: 64,
		// Views use direct I/O (see viewNode.Open); let them be mmapped.
		ExtraCapabilities: fuse.CAP_DIRECT_IO_ALLOW_MMAP |
			// open(O_TRUNC) arrives as a flag of the OPEN, not as a
			// SETATTR after it that names no handle: by-key/ files
			// tell "echo v >" (a new value) from a write in place.
			fuse.CAP_ATOMIC_O_TRUNC,
		// A panic outside the operations safeFS wraps (go-fuse's own
		// request handling) is logged and counted like theirs.
		PanicHandler: f.requestPanic,
	}
	if opts.ReadOnly {
		mo.Options = append(mo.Options, "ro")
	}
	if opts.NoPassthrough || f.local == nil {
		// Nothing will be passed through: leave the kernel's FUSE
		// connection as it is without (and the mount stackable).
		mo.DisabledCapabilities |= fuse.CAP_PASSTHROUGH
	}
	if opts.AllowOther {
		mo.AllowOther = true
		mo.Options = append(mo.Options, "default_permissions")
	}
	fsOpts := &fs.Options{
		MountOptions: mo,
		EntryTimeout: &one,
		AttrTimeout:  &one,
		// No negative caching: by-offset/N becomes valid as the log grows,
		// and topics created behind the mount must show at once.
		NegativeTimeout: &zero,
		RootStableAttr:  &fs.StableAttr{Ino: fuse.FUSE_ROOT_ID},
		// Modes tell the truth: a write-only file on a read-only mount has
		// mode 0000, which go-fuse would otherwise turn into 0644.
		NullPermissions: true,
	}
	raw := newSafeFS(fs.NewNodeFS(newRoot(f), fsOpts), f.log)
	if opts.OpLatency != nil {
		raw = &timedFS{RawFileSystem: raw, observe: opts.OpLatency}
	}
	srv, err := fuse.NewServer(raw, mountpoint, &fsOpts.MountOptions)
	if err != nil {
		return nil, fmt.Errorf("fusefs: mount %s: %w", mountpoint, err)
	}
	go srv.Serve()
	if err := srv.WaitMount(); err != nil {
		return nil, fmt.Errorf("fusefs: mount %s: %w", mountpoint, err)
	}
	f.setupPassthrough(srv)
	s := &Server{Server: srv, f: f, stop: make(chan struct{}), stopped: make(chan struct{})}
	go s.saveSizesGuarded(cmp.Or(opts.sizesEvery, viewSizesEvery))
	go f.keys.startTables(context.Background())
	return s, nil
}
