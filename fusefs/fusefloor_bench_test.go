package fusefs

import (
	"context"
	"io"
	"log/slog"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"syscall"
	"testing"
	"time"

	gofs "github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"

	"github.com/topicfs/topicfs/engine"
	"github.com/topicfs/topicfs/engine/record"
	"github.com/topicfs/topicfs/engine/vfs"
)

// BenchmarkByOffsetFUSE is an open of by-offset/N at a random N, one
// 64 KiB read(2) and a close through a real mount of topicfs (served by
// this process), beside the same through the FUSE floor: a go-fuse
// server, mounted with the same options, that only answers the same
// requests (LOOKUP of any number, OPEN with direct I/O and no FLUSH, a
// READ of 64 KiB from memory, RELEASE). Each iteration opens one of each,
// so both meet the same load. p50-ns and p99-ns per side; ns/op is the
// two together. What topicfs adds to the floor is its own work (see
// BenchmarkByOffsetOpen); the floor itself is the kernel's and go-fuse's:
// three requests a client waits for (docs/PERFORMANCE.md §6.5).
func BenchmarkByOffsetFUSE(b *testing.B) {
	if _, err := os.Stat("/dev/fuse"); err != nil {
		b.Skipf("no /dev/fuse: %v", err)
	}
	data, mnt, floorMnt := b.TempDir(), b.TempDir(), b.TempDir()
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	d, err := engine.OpenLogDir(vfs.OS, data, engine.LogDirOptions{Defaults: engine.DefaultConfig(), Logger: quiet})
	if err != nil {
		b.Fatal(err)
	}
	tp, err := d.CreateTopic("t", 1)
	if err != nil {
		b.Fatal(err)
	}
	p, err := tp.Partition(0)
	if err != nil {
		b.Fatal(err)
	}
	value := make([]byte, 99) // 100-byte lines
	for i := range value {
		value[i] = 'a' + byte(i%26)
	}
	recs := make([]record.Record, 1000)
	for i := range recs {
		recs[i] = record.Record{Timestamp: -1, Value: value}
	}
	for range 2500 { // 2.5 M records in batches of 1000, about 260 MiB
		if _, _, err := p.Append(recs); err != nil {
			b.Fatal(err)
		}
	}
	records := p.LogEndOffset()
	srv, err := Mount(mnt, d, Options{NoPassthrough: true, Logger: quiet})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() {
		if err := srv.Unmount(); err != nil {
			_ = syscall.Unmount(mnt, syscall.MNT_DETACH)
		}
		srv.Wait()
		d.Close()
	})
	floor := mountFloor(b, floorMnt)
	dir := filepath.Join(mnt, "t", "0", "by-offset")
	buf := make([]byte, 64<<10)
	rng := rand.New(rand.NewPCG(1, 2))
	var lat, floorLat []time.Duration
	open := func(path string) time.Duration {
		t0 := time.Now()
		f, err := os.Open(path)
		if err != nil {
			b.Fatal(err)
		}
		n, err := f.Read(buf)
		f.Close()
		d := time.Since(t0)
		if err != nil || n < 100 || buf[99] != '\n' {
			b.Fatalf("%s: read %d bytes: %v", path, n, err)
		}
		return d
	}
	for range 50 { // warm: the mounts' first requests, the segment's index
		open(filepath.Join(dir, strconv.FormatInt(rng.Int64N(records), 10)))
	}
	for b.Loop() {
		lat = append(lat, open(filepath.Join(dir, strconv.FormatInt(rng.Int64N(records), 10))))
		floorLat = append(floorLat, open(filepath.Join(floor, strconv.FormatInt(rng.Int64N(1<<40), 10))))
	}
	report := func(unit string, l []time.Duration) {
		slices.Sort(l)
		b.ReportMetric(float64(l[len(l)/2].Nanoseconds()), unit+"-p50-ns")
		b.ReportMetric(float64(l[int(0.99*float64(len(l)-1))].Nanoseconds()), unit+"-p99-ns")
	}
	report("topicfs", lat)
	report("floor", floorLat)
}

// mountFloor mounts the FUSE floor of BenchmarkByOffsetFUSE at mnt (unmounted
// at cleanup).
func mountFloor(b *testing.B, mnt string) string {
	one, zero := time.Second, time.Duration(0)
	srv, err := gofs.Mount(mnt, &floorRoot{}, &gofs.Options{
		EntryTimeout: &one, AttrTimeout: &one, NegativeTimeout: &zero,
		MountOptions: fuse.MountOptions{DirectMount: true, MaxWrite: maxWrite, MaxBackground: 64,
			ExtraCapabilities: fuse.CAP_DIRECT_IO_ALLOW_MMAP},
	})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() {
		if err := srv.Unmount(); err != nil {
			_ = syscall.Unmount(mnt, syscall.MNT_DETACH)
		}
		srv.Wait()
	})
	return mnt
}

// floorRoot answers a LOOKUP of any number with a read-only file of
// floorLines.
type floorRoot struct{ gofs.Inode }

type floorFile struct{ gofs.Inode }

// floorLines is what every floor file holds: 100-byte lines.
var floorLines = func() []byte {
	b := make([]byte, 64<<10)
	for i := range b {
		b[i] = 'a' + byte(i%26)
		if i%100 == 99 {
			b[i] = '\n'
		}
	}
	return b
}()

func (r *floorRoot) Lookup(ctx context.Context, name string, out *fuse.EntryOut) (*gofs.Inode, syscall.Errno) {
	n, err := strconv.ParseUint(name, 10, 63)
	if err != nil {
		return nil, syscall.ENOENT
	}
	out.Mode = syscall.S_IFREG | 0o444
	out.Size = 1 << 40
	return r.NewInode(ctx, &floorFile{}, gofs.StableAttr{Mode: syscall.S_IFREG, Ino: n + 2}), 0
}

func (f *floorFile) Open(ctx context.Context, flags uint32) (gofs.FileHandle, uint32, syscall.Errno) {
	return nil, fuse.FOPEN_DIRECT_IO | fuse.FOPEN_NOFLUSH, 0
}

func (f *floorFile) Read(ctx context.Context, fh gofs.FileHandle, dest []byte, off int64) (fuse.ReadResult, syscall.Errno) {
	return fuse.ReadResultData(dest[:copy(dest, floorLines)]), 0
}
