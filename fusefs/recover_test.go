package fusefs

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"os"
	"reflect"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/hanwen/go-fuse/v2/fuse"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/topicfs/topicfs/engine"
	"github.com/topicfs/topicfs/engine/vfs"
	"github.com/topicfs/topicfs/internal/panics"
	"github.com/topicfs/topicfs/policies"
)

// syncBuf is a log sink safe for the mount's concurrent writers.
type syncBuf struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuf) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuf) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// loggedMount is a mount whose log goes to logs.
type loggedMount struct {
	*testMount
	logs *syncBuf
	f    *fsys
}

// mountLogged mounts a fresh data dir with the config changes cfg, logging
// into a buffer; unmounted at cleanup.
func mountLogged(t *testing.T, cfg map[string]string, opts Options) loggedMount {
	t.Helper()
	requireFUSE(t)
	c := engine.DefaultConfig()
	c.LingerMs = 0
	for k, v := range cfg {
		require.NoError(t, c.Set(k, v))
	}
	data, mnt := t.TempDir(), t.TempDir()
	d, err := engine.OpenLogDir(vfs.OS, data, engine.LogDirOptions{Defaults: c})
	require.NoError(t, err)
	logs := &syncBuf{}
	opts.Logger = slog.New(slog.NewTextHandler(logs, nil))
	srv, err := Mount(mnt, d, opts)
	if err != nil {
		d.Close()
		require.NoError(t, err)
	}
	t.Cleanup(func() {
		panicHook.Store(nil)
		if err := srv.Unmount(); err != nil {
			t.Errorf("unmount %s: %v; detaching", mnt, err)
			_ = syscall.Unmount(mnt, syscall.MNT_DETACH)
		}
		srv.Wait()
		assert.NoError(t, d.Close())
	})
	return loggedMount{&testMount{mnt: mnt, data: data, d: d}, logs, srv.f}
}

// injectPanic makes the code at op panic for paths matching match, until
// the returned func (also run at cleanup) removes the hook. It counts the
// panics injected.
func injectPanic(t *testing.T, op string, match func(path string) bool) (stop func(), injected *atomic.Int64) {
	injected = &atomic.Int64{}
	hook := func(o, path string) {
		if o == op && match(path) {
			injected.Add(1)
			panic("injected panic in " + op + " of " + path)
		}
	}
	panicHook.Store(&hook)
	stop = func() { panicHook.Store(nil) }
	t.Cleanup(stop)
	return stop, injected
}

// assertCounted checks that every injected panic was counted once at
// where/op. The injection counts before it panics and the recover counts
// after, in a goroutine that may still be unwinding when the operation
// that saw the error has returned (a RELEASE runs after close(2)), so it
// waits for the count to catch up before comparing.
func assertCounted(t *testing.T, injected *atomic.Int64, before int64, where, op string) {
	t.Helper()
	waitFor(t, "the recovered panics to be counted", func() bool {
		return panics.CountOf(where, op)-before >= injected.Load()
	})
	assert.Equal(t, injected.Load(), panics.CountOf(where, op)-before)
}

func is(want string) func(string) bool { return func(p string) bool { return p == want } }

// waitFor polls cond until it holds or a minute passes (the background
// goroutine it waits for runs on its own schedule).
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// assertLogged checks that the log reports the recovered panic at where
// (and one of ops) with its stack, which names the function that panicked.
func assertLogged(t *testing.T, logs *syncBuf, where, frame string, ops ...string) {
	t.Helper()
	out := logs.String()
	assert.Contains(t, out, "recovered from a panic")
	found := false
	for _, op := range ops {
		found = found || strings.Contains(out, "where="+where+" op="+op+" ")
	}
	assert.True(t, found, "the log names where=%s and one of op=%v:\n%s", where, ops, out)
	assert.Contains(t, out, "injected panic")
	assert.Contains(t, out, "goroutine ", "the log holds the stack")
	assert.Contains(t, out, frame, "the stack names where the panic happened")
}

// TestPanicInRequest injects a panic into one kind of request on topic
// boom: that request gets EIO, the panic is logged with its stack and
// counted, topic calm is served meanwhile, and once the hook is gone the
// same request on boom works. The mount process (this test binary) lives
// on throughout.
func TestPanicInRequest(t *testing.T) {
	m := mountLogged(t, nil, Options{})
	m.sh(t, `mkdir "$MNT/boom" "$MNT/calm" && seq 1 3 > "$MNT/boom/0/append" && seq 4 6 > "$MNT/calm/0/append"`)
	cases := []struct {
		op, path string
		ops      []string // where the count may show (a LOOKUP of a known entry asks Getattr too)
		frame    string
		prime    string // run before the hook is set
		script   string // fails with EIO under the hook, then works
		want     string
	}{
		{"lookup", "boom/0/records", []string{"lookup"}, "(*partitionNode).Lookup",
			"", `stat -c %F "$MNT/boom/0/records"`, "regular file\n"},
		// The append drops the cached attributes of the view the kernel
		// knows (the notifier), so stat asks again.
		{"getattr", "boom/0/records.jsonl", []string{"getattr", "lookup"}, "(*viewNode).Getattr",
			`stat "$MNT/boom/0/records.jsonl" > /dev/null`,
			`echo 8 >> "$MNT/boom/0/append" && stat -c %F "$MNT/boom/0/records.jsonl"`, "regular file\n"},
		{"open", "boom/0/records", []string{"open"}, "(*viewNode).Open",
			"", `head -n 3 "$MNT/boom/0/records"`, "1\n2\n3\n"},
		{"read", "boom/0", []string{"read"}, "(*viewHandle).render",
			"", `head -n 3 "$MNT/boom/0/records"`, "1\n2\n3\n"},
		{"write", "boom/0/append", []string{"write"}, "(*appendNode).Write",
			"", `echo 7 >> "$MNT/boom/0/append" && tail -n 1 "$MNT/boom/0/records"`, "7\n"},
	}
	for _, c := range cases {
		t.Run(c.op, func(t *testing.T) {
			if c.prime != "" {
				m.sh(t, c.prime)
			}
			before := map[string]int64{}
			for _, op := range c.ops {
				before[op] = panics.CountOf("fuse", op)
			}
			stop, injected := injectPanic(t, c.op, is(c.path))
			_, errOut, err := m.shErr(c.script)
			require.Error(t, err, "the request must fail under the injected panic")
			assert.Contains(t, errOut, "Input/output error")
			require.Positive(t, injected.Load())
			var counted int64
			for _, op := range c.ops {
				counted += panics.CountOf("fuse", op) - before[op]
			}
			assert.Equal(t, injected.Load(), counted, "each recovered panic is counted")
			assertLogged(t, m.logs, "fuse", c.frame, c.ops...)

			// Other topics are served while the hook is in place.
			assert.Equal(t, "4\n5\n6\n", m.sh(t, `cat "$MNT/calm/0/records"`))
			assert.Equal(t, "regular file\n", m.sh(t, `stat -c %F "$MNT/calm/0/records.jsonl"`))
			stop()
			assert.Equal(t, c.want, m.sh(t, c.script))
		})
	}
}

// TestPanicInReadKeepsHandle: a READ that panics fails with EIO, and the
// same open file reads correctly afterwards (the handle's cursor, left in
// an unknown state by the panic, was dropped, not kept).
func TestPanicInReadKeepsHandle(t *testing.T) {
	m := mountLogged(t, nil, Options{})
	m.sh(t, `mkdir "$MNT/boom" && seq 1 1000 > "$MNT/boom/0/append"`)
	want := m.sh(t, `seq 1 1000`)
	f, err := os.Open(m.path("boom", "0", "records"))
	require.NoError(t, err)
	defer f.Close()
	buf := make([]byte, 100)
	_, err = io.ReadFull(f, buf) // the cursor stands in the middle of the view
	require.NoError(t, err)

	stop, _ := injectPanic(t, "read", is("boom/0"))
	_, err = f.Read(buf)
	require.ErrorIs(t, err, syscall.EIO)
	stop()
	rest, err := io.ReadAll(f)
	require.NoError(t, err)
	assert.Equal(t, want, string(buf)+string(rest))
}

// TestPanicInReadAhead: the goroutine rendering ahead of a sequential
// reader panics. It is logged and counted, the reader is not left waiting
// for it, and it reads every byte right (rendered in place). When the
// READs themselves panic too, the reader gets EIO instead of hanging.
func TestPanicInReadAhead(t *testing.T) {
	m := mountLogged(t, nil, Options{})
	m.sh(t, `mkdir "$MNT/big" && seq 1 600000 > "$MNT/big/0/append"`)
	want := m.sh(t, `seq 1 600000 | md5sum`)

	before := panics.CountOf("readahead", "render")
	_, injected := injectPanic(t, "readahead", is("big/0"))
	assert.Equal(t, want, m.sh(t, `cat "$MNT/big/0/records" | md5sum`))
	require.Positive(t, injected.Load(), "the view is long enough to be rendered ahead")
	assertCounted(t, injected, before, "readahead", "render")
	assertLogged(t, m.logs, "readahead", "(*viewHandle).render", "render")

	hook := func(op, path string) {
		if path == "big/0" && (op == "readahead" || op == "read") {
			panic("injected panic in " + op)
		}
	}
	panicHook.Store(&hook)
	_, errOut, err := m.shErr(`cat "$MNT/big/0/records" > /dev/null`)
	require.Error(t, err)
	assert.Contains(t, errOut, "Input/output error")
	panicHook.Store(nil)
	assert.Equal(t, want, m.sh(t, `cat "$MNT/big/0/records" | md5sum`))
}

// TestPanicInNotifier: the notifier of one partition panics. Appends and
// reads of that partition go on (a closer does not wait for the dead
// notifier), and the partition gets no notifier again.
func TestPanicInNotifier(t *testing.T) {
	m := mountLogged(t, nil, Options{})
	m.sh(t, `mkdir "$MNT/boom" "$MNT/calm" && echo a > "$MNT/boom/0/append" && echo b > "$MNT/calm/0/append"`)
	before := panics.CountOf("notifier", "notify")
	_, injected := injectPanic(t, "notify", is("boom/0"))
	// Knowing a view makes the partition's notifier run; an append wakes it.
	m.sh(t, `stat "$MNT/boom/0/records" "$MNT/calm/0/records" > /dev/null && echo c >> "$MNT/boom/0/append"`)
	waitFor(t, "the notifier's panic", func() bool { return panics.CountOf("notifier", "notify") > before })
	assertLogged(t, m.logs, "notifier", "(*partState).notifyViews", "notify")

	assert.Equal(t, "a\nc\nd\n", m.sh(t, `echo d >> "$MNT/boom/0/append" && cat "$MNT/boom/0/records"`))
	assert.Equal(t, "b\ne\n", m.sh(t, `echo e >> "$MNT/calm/0/append" && cat "$MNT/calm/0/records"`))
	f, err := m.d.Topic("boom")
	require.NoError(t, err)
	p, err := f.Partition(0)
	require.NoError(t, err)
	assert.Nil(t, m.f.notified(partOf(m.f, p)), "no notifier runs again for the partition")
	assertCounted(t, injected, before, "notifier", "notify")
}

// TestPanicInAppendJob: an append job panics (in the background with
// linger.ms, in the WRITE without). The handle's write or close fails with
// EIO; the next handle appends normally.
func TestPanicInAppendJob(t *testing.T) {
	for _, linger := range []string{"0", "50"} {
		t.Run("linger.ms="+linger, func(t *testing.T) {
			m := mountLogged(t, map[string]string{"linger.ms": linger, "batch.size": "16"}, Options{})
			m.sh(t, `mkdir "$MNT/boom"`)
			before := panics.CountOf("append", "append-job")
			stop, injected := injectPanic(t, "append-job", is("boom"))
			f, err := os.OpenFile(m.path("boom", "0", "append"), os.O_WRONLY, 0)
			require.NoError(t, err)
			_, werr := f.Write([]byte(strings.Repeat("0123456789\n", 10)))
			cerr := f.Close()
			require.True(t, errors.Is(werr, syscall.EIO) || errors.Is(cerr, syscall.EIO),
				"write (%v) or close (%v) reports the panic", werr, cerr)
			require.Positive(t, injected.Load())
			assertCounted(t, injected, before, "append", "append-job")
			assertLogged(t, m.logs, "append", "(*appendHandle).runJob", "append-job")
			stop()
			m.sh(t, `echo after >> "$MNT/boom/0/append"`)
			assert.Contains(t, m.sh(t, `cat "$MNT/boom/0/records"`), "after\n")
		})
	}
}

// TestPanicInLingerFlush: the linger.ms timer's flush panics; the handle's
// close reports EIO, and the mount goes on.
func TestPanicInLingerFlush(t *testing.T) {
	m := mountLogged(t, map[string]string{"linger.ms": "5"}, Options{})
	m.sh(t, `mkdir "$MNT/boom"`)
	before := panics.CountOf("append", "linger")
	stop, _ := injectPanic(t, "linger", is("boom"))
	f, err := os.OpenFile(m.path("boom", "0", "append"), os.O_WRONLY, 0)
	require.NoError(t, err)
	_, err = f.Write([]byte("x\n"))
	require.NoError(t, err)
	waitFor(t, "the linger flush's panic", func() bool { return panics.CountOf("append", "linger") > before })
	require.ErrorIs(t, f.Close(), syscall.EIO)
	assertLogged(t, m.logs, "append", "(*appendHandle).lingerFlush", "linger")
	stop()
	m.sh(t, `echo y >> "$MNT/boom/0/append"`)
	assert.Contains(t, m.sh(t, `cat "$MNT/boom/0/records"`), "y\n")
}

// TestStatsShowsStoppedPolicies: a partition whose policies stopped after
// a panic says so in its stats file, with the reason and time.
func TestStatsShowsStoppedPolicies(t *testing.T) {
	at := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	state := func(topic string, partition int) (policies.PartitionState, bool) {
		st := policies.PartitionState{Topic: topic, Partition: partition, Explanations: []string{"stopped"}}
		if topic == "boom" {
			st.PoliciesStopped = &policies.PoliciesStopped{Reason: "panic: boom", Task: "housekeeping", At: at}
		}
		return st, true
	}
	m := mountLogged(t, nil, Options{State: state})
	m.sh(t, `mkdir "$MNT/boom" "$MNT/calm"`)
	type stats struct {
		Policies map[string]json.RawMessage `json:"policies"`
	}
	var boom, calm stats
	require.NoError(t, json.Unmarshal([]byte(m.sh(t, `cat "$MNT/boom/0/stats"`)), &boom))
	assert.JSONEq(t, `{"reason":"panic: boom","task":"housekeeping","at":"2026-01-02T03:04:05Z"}`, string(boom.Policies["policies_stopped"]))
	require.NoError(t, json.Unmarshal([]byte(m.sh(t, `cat "$MNT/calm/0/stats"`)), &calm))
	assert.NotContains(t, calm.Policies, "policies_stopped")
}

// TestWorkAheadPanicWakesTaker: a consumer waiting for the item being made
// is let go when making it panics (take reports no item, so the consumer
// makes it itself), the panic is reported once, and the goroutine never
// starts again.
func TestWorkAheadPanicWakesTaker(t *testing.T) {
	var w workAhead[int]
	var reported atomic.Int64
	w.onPanic = func(v any, stack []byte) {
		reported.Add(1)
		assert.Equal(t, "boom", v)
		assert.Contains(t, string(stack), "TestWorkAheadPanicWakesTaker")
	}
	release := make(chan struct{})
	w.start(0, func(pos int64) (int, int64, bool) {
		<-release
		panic("boom")
	}, func(int) {})
	took := make(chan bool)
	go func() {
		_, ok := w.take(0, func(*int) bool { return true }, func(int) {})
		took <- ok
	}()
	waitFor(t, "take to wait", func() bool {
		w.mu.Lock()
		defer w.mu.Unlock()
		return w.waiting
	})
	close(release)
	assert.False(t, <-took, "no item after the panic")
	assert.Equal(t, int64(1), reported.Load())
	assert.False(t, w.idle(), "a failed workAhead starts no goroutine again")
	w.close(func(int) {})
}

// BenchmarkSafeFSOverhead measures what the request boundary costs a
// READ: the wrapped call against the bare one.
func BenchmarkSafeFSOverhead(b *testing.B) {
	raw := fuse.NewDefaultRawFileSystem()
	in := &fuse.ReadIn{}
	buf := make([]byte, 4096)
	b.Run("bare", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			raw.Read(nil, in, buf)
		}
	})
	b.Run("safeFS", func(b *testing.B) {
		s := &safeFS{fs: raw, log: slog.New(slog.NewTextHandler(io.Discard, nil))}
		b.ReportAllocs()
		for b.Loop() {
			s.Read(nil, in, buf)
		}
	})
}

// TestSafeFSRecoversEveryOperation calls every request method of safeFS
// over a file system whose every method panics (a nil interface): none
// lets the panic through, each answers EIO where it has a status, and each
// is counted.
func TestSafeFSRecoversEveryOperation(t *testing.T) {
	type panicking struct{ fuse.RawFileSystem }
	logs := &syncBuf{}
	s := &safeFS{fs: panicking{}, log: slog.New(slog.NewTextHandler(logs, nil))}
	v := reflect.ValueOf(s)
	status := reflect.TypeOf(fuse.Status(0))
	calls := 0
	for i := 0; i < v.NumMethod(); i++ {
		m := v.Type().Method(i)
		switch m.Name {
		case "String", "SetDebug", "Init": // not requests
			continue
		}
		ft := m.Type
		args := []reflect.Value{v}
		for j := 1; j < ft.NumIn(); j++ {
			if in := ft.In(j); in.Kind() == reflect.Pointer {
				args = append(args, reflect.New(in.Elem()))
			} else {
				args = append(args, reflect.Zero(in))
			}
		}
		var out []reflect.Value
		require.NotPanics(t, func() { out = m.Func.Call(args) }, m.Name)
		calls++
		if n := len(out); n > 0 && out[n-1].Type() == status {
			assert.Equal(t, fuse.EIO, out[n-1].Interface(), m.Name)
		}
	}
	assert.Equal(t, calls, strings.Count(logs.String(), "recovered from a panic"), "each operation logs its panic")
	assert.Greater(t, calls, 40, "every request method of fuse.RawFileSystem")
}

// TestPanicInMeasureWorker: the workers measuring a view's segments
// panic; each is logged and counted, and the view is still measured and
// read right (by the request itself).
func TestPanicInMeasureWorker(t *testing.T) {
	m := mountLogged(t, map[string]string{"segment.bytes": "4096"}, Options{})
	m.sh(t, `mkdir "$MNT/many" && seq 1 5000 > "$MNT/many/0/append"`)
	want := m.sh(t, `seq 1 5000 | md5sum`)
	before := panics.CountOf("measure", "render")
	_, injected := injectPanic(t, "measure", is("many/0"))
	assert.Equal(t, want, m.sh(t, `cat "$MNT/many/0/records" | md5sum`))
	require.Positive(t, injected.Load(), "the view's segments were measured by workers")
	assertCounted(t, injected, before, "measure", "render")
	assertLogged(t, m.logs, "measure", "(*viewState).settleWholeLocked", "render")
}
