package tests

import (
	"bytes"
	"crypto/sha256"
	"fmt"
	"io"
	"math/rand"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// lsLong returns the mode and size columns of `ls -l path`.
func lsLong(t *testing.T, m *mountProc, path string) string {
	t.Helper()
	f := strings.Fields(m.Sh(t, `ls -l `+path))
	require.Len(t, f, 9, "ls -l %s", path)
	return f[0] + " " + f[4] + " " + filepath.Base(f[8])
}

// requireAlive fails the test unless the mount process runs and answers.
func requireAlive(t *testing.T, m *mountProc) {
	t.Helper()
	require.True(t, m.Running(), "the mount is still running; stderr:\n%s", m.Stderr())
	m.Sh(t, `ls $MNT >/dev/null && stat $MNT >/dev/null`)
	assert.NotContains(t, m.Stderr(), "panic:")
}

// TestBatchOver64KiBViews: issue #17 item 1. A line of 70,000 bytes after
// a small one (its batch larger than the first 64 KiB log chunk a view
// loads) once killed the mount on the next stat or read of a view
// ("slice bounds out of range [::2038004174]": a length read from inside
// the line). cat, wc, ls -l, tail -c and tail -f now show it.
func TestBatchOver64KiBViews(t *testing.T) {
	m := startMount(t, mountOpts{})
	tmp := t.TempDir()
	rec := m.Path("q", "0", "records")
	big := strings.Repeat("y", 70000)
	assert.Equal(t, "small\n", m.Sh(t, `mkdir $MNT/q; echo small > $MNT/q/append; cat $MNT/q/0/records`))

	// tail -f while the line is appended: it sees the whole line.
	tail := exec.Command("tail", "-c", "+1", "-f", rec)
	var tailOut syncBuf
	tail.Stdout = &tailOut
	require.NoError(t, tail.Start())
	defer func() { _ = tail.Process.Kill(); _ = tail.Wait() }()
	eventuallyEqual(t, "small\n", tailOut.String)

	// The line is written by one process (one close): see the literal
	// sequence below for the issue's { head | tr; echo; } form.
	m.Sh(t, fmt.Sprintf(`head -c 70000 /dev/zero | tr '\0' y > %[1]s/line; echo >> %[1]s/line; cat %[1]s/line > $MNT/q/0/append`, tmp))
	want := "small\n" + big + "\n"
	assert.Equal(t, "2 "+rec+"\n", m.Sh(t, `wc -l $MNT/q/0/records`))
	assert.Equal(t, "70007 "+rec+"\n", m.Sh(t, `wc -c $MNT/q/0/records`))
	assert.Equal(t, "-r--r--r-- 70007 records", lsLong(t, m, rec))
	assert.True(t, want == m.Sh(t, `cat $MNT/q/0/records`), "cat shows both lines")
	assert.Equal(t, "yyyyyyyyy\n", m.Sh(t, `tail -c 10 $MNT/q/0/records`))
	assert.Equal(t, big+"\n", m.Sh(t, `tail -n 1 $MNT/q/0/records`))
	assert.Equal(t, big+"\n", m.Sh(t, `cat $MNT/q/0/by-offset/1`))
	eventuallyEqual(t, want, tailOut.String)
	requireAlive(t, m)

	// The literal sequence: the line's bytes come from tr and its
	// '\n' from echo through the same open file, so tr's close (a FLUSH)
	// must not cut the line: it is one record, as in a plain file.
	m.Sh(t, `{ head -c 70000 /dev/zero | tr '\0' y; echo; } > $MNT/q/0/append`)
	requireAlive(t, m)
	got := m.Sh(t, `cat $MNT/q/0/records`)
	require.True(t, got == want+big+"\n", "cat after the literal sequence: %d bytes, %d lines", len(got), strings.Count(got, "\n"))
	lines := strings.Count(got, "\n")
	assert.Equal(t, fmt.Sprintf("%d %s\n", lines, rec), m.Sh(t, `wc -l $MNT/q/0/records`))
	assert.Equal(t, fmt.Sprintf("-r--r--r-- %d records", len(got)), lsLong(t, m, rec))
	eventuallyEqual(t, got, tailOut.String)
	requireAlive(t, m)
}

// TestBatchOver1MiBSurvivesRemount: issue #17 item 2. With
// max.message.bytes raised, a 2 MB line after a small one killed the mount
// on every later stat, also after a clean remount (each mount measured the
// segment afresh and hit the same fault). Its views are sized, read and
// sought into, before and after a clean remount (sizes from the saved
// topicfs-view-sizes) and after a crash.
func TestBatchOver1MiBSurvivesRemount(t *testing.T) {
	m := startMount(t, mountOpts{})
	tmp := t.TempDir()
	rec := m.Path("r", "0", "records")
	big := strings.Repeat("y", 2000000)
	m.Sh(t, `mkdir $MNT/r; echo max.message.bytes=4000000 > $MNT/r/config; echo small > $MNT/r/append`)
	assert.Equal(t, "-r--r--r-- 6 records", lsLong(t, m, rec))
	m.Sh(t, fmt.Sprintf(`head -c 2000000 /dev/zero | tr '\0' y > %[1]s/line; echo >> %[1]s/line; cat %[1]s/line > $MNT/r/0/append`, tmp))
	want := "small\n" + big + "\n"
	jsonSize := len(`{"offset":0,"timestamp":,"key":null,"value":"small","headers":{}}`+"\n") +
		len(`{"offset":1,"timestamp":,"key":null,"value":"","headers":{}}`+"\n") + len(big)
	check := func(when string) {
		t.Helper()
		ls := m.Sh(t, `ls -l $MNT/r/0/`)
		assert.Contains(t, ls, " 2000007 ", "%s: ls -l shows the records size:\n%s", when, ls)
		assert.Equal(t, "-r--r--r-- 2000007 records", lsLong(t, m, rec), when)
		js := strings.Fields(m.Sh(t, `ls -l $MNT/r/0/records.jsonl`))[4]
		assert.Equal(t, fmt.Sprint(jsonSize+2*13), js, "%s: records.jsonl (two 13-digit timestamps)", when)
		assert.Equal(t, "2 "+rec+"\n", m.Sh(t, `wc -l $MNT/r/0/records`), when)
		assert.True(t, want == m.Sh(t, `cat $MNT/r/0/records`), "%s: cat", when)
		assert.Equal(t, "yyyy\n", m.Sh(t, `tail -c 5 $MNT/r/0/records`), when)
		assert.Equal(t, "small\nyyyy", m.Sh(t, `head -c 10 $MNT/r/0/records`), when)
		assert.Equal(t, "yyyyyyyy", m.Sh(t, `dd if=$MNT/r/0/records bs=1 skip=1000000 count=8 status=none`), when)
		requireAlive(t, m)
	}
	check("first mount")
	m.Remount()
	_, err := os.Stat(filepath.Join(m.Data, "topicfs-view-sizes"))
	require.NoError(t, err, "a clean unmount saves the view sizes")
	check("after a clean remount")
	m.Remount()
	check("after a second clean remount")
	m.Kill()
	m.Remount()
	check("after a crash")
}

// TestRandomAppendsMatchModel: appends of random lines of 0..70,000 bytes
// (4 KiB ones and ones of about 64 KiB among them), one to four per write,
// so batches fall on every side of the log chunk and index interval
// boundaries, with one remount in between; after every operation records
// reads, sizes and seeks (on a fresh handle or one kept open) as the model
// of what was appended says. Before the fix it failed at operation 97: a
// handle whose cursor had loaded a batch larger than its log chunk served
// that batch's bytes at the start of the view. SEED overrides the seed.
func TestRandomAppendsMatchModel(t *testing.T) {
	seed := int64(17)
	if s := os.Getenv("SEED"); s != "" {
		fmt.Sscan(s, &seed)
	}
	m := startMount(t, mountOpts{})
	m.Sh(t, `mkdir $MNT/z`)
	rng := rand.New(rand.NewSource(seed))
	var model []byte
	app, rec := m.Path("z", "0", "append"), m.Path("z", "0", "records")
	const ops = 400
	var kept *os.File
	for op := range ops {
		if op == ops/2 {
			require.NoError(t, kept.Close())
			m.Remount()
			kept = nil
		}
		if kept == nil {
			var err error
			kept, err = os.Open(rec)
			require.NoError(t, err)
		}
		switch k := rng.Intn(10); {
		case k < 5: // append 1..4 lines in one write
			var w []byte
			for range 1 + rng.Intn(4) {
				n := rng.Intn(70001)
				switch rng.Intn(4) {
				case 0:
					n = 4096 + rng.Intn(3) - 1
				case 1:
					n = 60000 + rng.Intn(10001) // a batch of its own of about 64 KiB
				}
				line := make([]byte, n)
				for i := range line {
					line[i] = 'a' + byte(rng.Intn(26))
				}
				w = append(append(w, line...), '\n')
			}
			f, err := os.OpenFile(app, os.O_WRONLY, 0)
			require.NoError(t, err)
			_, err = f.Write(w)
			require.NoError(t, err, "op %d", op)
			require.NoError(t, f.Close())
			model = append(model, w...)
		case k < 7: // read it all
			got, err := os.ReadFile(rec)
			require.NoError(t, err, "op %d", op)
			require.Equal(t, len(model), len(got), "op %d: cat length", op)
			require.True(t, bytes.Equal(model, got), "op %d: cat", op)
		case k < 8: // stat
			fi, err := os.Stat(rec)
			require.NoError(t, err)
			require.Equal(t, int64(len(model)), fi.Size(), "op %d: size", op)
		default: // seek and read
			if len(model) == 0 {
				continue
			}
			// One handle kept open across operations (its cursor and log
			// chunk stay where the last read left them), or a fresh one.
			f := kept
			if rng.Intn(2) == 0 {
				var err error
				f, err = os.Open(rec)
				require.NoError(t, err)
			}
			// Several reads on one handle, back and forth: near the start,
			// anywhere, near the end (a cursor seeks from wherever the
			// previous read left its log chunk).
			for range 8 {
				var off int64
				switch rng.Intn(4) {
				case 0, 1:
					off = rng.Int63n(int64(min(len(model), 150000)))
				case 2:
					off = rng.Int63n(int64(len(model)))
				default:
					off = int64(len(model)) - 1 - rng.Int63n(int64(min(len(model), 200000)))
				}
				buf := make([]byte, 1+rng.Intn(200000))
				if rng.Intn(2) == 0 {
					buf = make([]byte, 4096)
				}
				n, err := f.ReadAt(buf, off)
				if err != nil {
					require.ErrorIs(t, err, io.EOF)
				}
				end := min(int(off)+len(buf), len(model))
				require.Equal(t, end-int(off), n, "op %d: read %d at %d", op, len(buf), off)
				require.True(t, bytes.Equal(model[off:end], buf[:n]), "op %d: read %d at %d", op, len(buf), off)
			}
			if f != kept {
				require.NoError(t, f.Close())
			}
		}
	}
	require.NoError(t, kept.Close())
	got, err := os.ReadFile(rec)
	require.NoError(t, err)
	require.True(t, bytes.Equal(model, got), "the end")
	requireAlive(t, m)
}

// syncBuf is an io.Writer safe to read while a process writes it.
type syncBuf struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuf) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuf) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// eventuallyEqual waits (up to the harness deadline, a safety net) until
// get returns want, and fails showing the difference otherwise.
func eventuallyEqual(t *testing.T, want string, get func() string) {
	t.Helper()
	deadline := time.Now().Add(harnessDeadline)
	for get() != want && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	got := get()
	require.True(t, got == want, "got %d bytes (%.40q...), want %d", len(got), got, len(want))
}

// shaLine returns "SIZE SHA256" of s, to compare large view contents
// exactly without printing megabytes on a failure.
func shaLine(s string) string {
	return fmt.Sprintf("%d %x", len(s), sha256.Sum256([]byte(s)))
}

// TestNewUserBigLineSequences: a new-user trial's sequences that once
// failed a read of TOPIC/0/records with EIO (a panic in the segment
// index when a batch crossed the chunk a view loads): a line just under
// max.message.bytes after a small one, a 2 MB line with a raised limit,
// and a 70,000-byte line after a view was read once. cat shows every line.
func TestNewUserBigLineSequences(t *testing.T) {
	m := startMount(t, mountOpts{})
	cat := func(topic string) string { return shaLine(m.Sh(t, `cat $MNT/`+topic+`/0/records`)) }

	m.Sh(t, `mkdir $MNT/t; echo a > $MNT/t/append`)
	m.Sh(t, `python3 -c "import sys; sys.stdout.write('z'*1048505+'\n')" > $MNT/t/append`)
	assert.Equal(t, shaLine("a\n"+strings.Repeat("z", 1048505)+"\n"), cat("t"))

	m.Sh(t, `mkdir $MNT/t2; echo max.message.bytes=5000000 > $MNT/t2/config; echo a > $MNT/t2/append`)
	m.Sh(t, `python3 -c "import sys; sys.stdout.write('y'*2000000+'\n')" > $MNT/t2/append`)
	assert.Equal(t, shaLine("a\n"+strings.Repeat("y", 2000000)+"\n"), cat("t2"))

	assert.Equal(t, "a\n", m.Sh(t, `mkdir $MNT/min; echo a > $MNT/min/append; cat $MNT/min/0/records`))
	m.Sh(t, `printf '%070000d\n' 0 > $MNT/min/append`)
	assert.Equal(t, shaLine("a\n"+strings.Repeat("0", 70000)+"\n"), cat("min"))
	requireAlive(t, m)
}

// TestNewUserGrowingLinesTailFollow: lines of growing sizes (100 to
// 200,000 bytes, 70,000 to 80,000, 300,000 to 310,000), each followed by a
// cat, and tail -s 0.2 -f while three lines of 300-320 KB are appended:
// every read shows exactly the lines appended so far.
func TestNewUserGrowingLinesTailFollow(t *testing.T) {
	m := startMount(t, mountOpts{})
	for _, sizes := range [][]int{
		{100, 1000, 10000, 50000, 100000, 200000},
		{70000, 72000, 75000, 80000},
		{300000, 305000, 310000},
	} {
		topic := fmt.Sprintf("g%d", sizes[0])
		m.Sh(t, `mkdir $MNT/`+topic)
		want := ""
		for _, n := range sizes {
			m.Sh(t, fmt.Sprintf(`python3 -c "import sys; sys.stdout.write('q'*%d+'\n')" > $MNT/%s/append`, n, topic))
			want += strings.Repeat("q", n) + "\n"
			assert.Equal(t, shaLine(want), shaLine(m.Sh(t, `cat $MNT/`+topic+`/0/records`)), "%s after a line of %d", topic, n)
		}
	}

	m.Sh(t, `mkdir $MNT/tf`)
	tail := exec.Command("tail", "-s", "0.2", "-f", m.Path("tf", "0", "records"))
	var tailOut syncBuf
	tail.Stdout = &tailOut
	require.NoError(t, tail.Start())
	defer func() { _ = tail.Process.Kill(); _ = tail.Wait() }()
	want := ""
	for _, n := range []int{300000, 310000, 320000} {
		m.Sh(t, fmt.Sprintf(`python3 -c "import sys; sys.stdout.write('w'*%d+'\n')" > $MNT/tf/append`, n))
		want += strings.Repeat("w", n) + "\n"
		eventuallyEqual(t, shaLine(want), func() string { return shaLine(tailOut.String()) })
	}
	requireAlive(t, m)
}

// TestRecordAboveSegmentBytesRefusedAtWrite: a record that fits
// max.message.bytes but not segment.bytes is refused by the write that
// carries it (EMSGSIZE, as a broker answers RECORD_BATCH_TOO_LARGE), not
// accepted and then lost in the background with the records batched beside
// it. Found by TestModel.
func TestRecordAboveSegmentBytesRefusedAtWrite(t *testing.T) {
	m := startMount(t, mountOpts{})
	m.Sh(t, `mkdir $MNT/t; echo segment.bytes=50000 > $MNT/t/config`)
	out := m.Sh(t, `python3 -c '
import os, sys
fd = os.open(sys.argv[1], os.O_WRONLY)
for i, line in enumerate([b"{\"value\":\"c\"}\n", b"{\"value\":\"" + b"x"*60000 + b"\"}\n", b"{\"value\":\"d\"}\n"]):
    try:
        os.write(fd, line)
        print(i, "ok")
    except OSError as e:
        print(i, e.errno)
os.close(fd)
' $MNT/t/append.jsonl`)
	assert.Equal(t, "0 ok\n1 90\n2 ok\n", out, "only the write of the too-large record fails, with EMSGSIZE")
	assert.Equal(t, "c\nd\n", m.Sh(t, `cat $MNT/t/0/records`))

	// (bash -e would stop the group at the refused line: each step's status
	// is kept instead.)
	out = m.Sh(t, `{ echo a; head -c 60000 /dev/zero | tr '\0' x || echo "tr $?" >&3; echo || echo "echo $?" >&3; echo b; } 3>&1 >$MNT/t/append 2>/dev/null`)
	assert.Equal(t, "tr 1\necho 1\n", out, "tr's write and the echo ending the refused line fail")
	assert.Equal(t, "c\nd\na\nb\n", m.Sh(t, `cat $MNT/t/0/records`), "topic-level append: the lines around it are stored")
	requireAlive(t, m)
}

// TestEmptyLineIsAnEmptyValue: an empty line is a record with an empty
// value, never a tombstone, also when it is the first line a handle
// batches (linger.ms > 0 keeps it pending in the handle's arena, which was
// still nil then). Found by TestModel.
func TestEmptyLineIsAnEmptyValue(t *testing.T) {
	m := startMount(t, mountOpts{})
	m.Sh(t, `mkdir $MNT/t; printf '\n' > $MNT/t/0/append; printf '\n\n' > $MNT/t/0/append; printf '\na\n' > $MNT/t/append`)
	m.Sh(t, `printf '{"key":"","value":""}\n' > $MNT/t/0/append.jsonl`)
	got := m.Sh(t, `jq -c '[.key, .value]' $MNT/t/0/records.jsonl`)
	assert.Equal(t, "[null,\"\"]\n[null,\"\"]\n[null,\"\"]\n[null,\"\"]\n[null,\"a\"]\n[\"\",\"\"]\n", got)
}
