package tests

// Bad input through the mount: every row of README.md's error table and
// then some, each driven with bash and real tools. Each row asserts the errno
// by the message bash or the tool prints and a non-zero exit status; after
// every row the mount must still accept and show a new record, and no earlier
// record may be lost or half-applied.

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

const badInputConfig = `
"segment.bytes" = 4096
"retention.check.interval.ms" = 100
"file.delete.delay.ms" = 100
"linger.ms" = 1
"num.partitions" = 2

[topics.small]
"max.message.bytes" = 1024

[topics.ret]
"num.partitions" = 1
"retention.bytes" = 8192
`

// strerror texts as glibc prints them.
const (
	msgENOENT    = "No such file or directory"
	msgEACCES    = "Permission denied"
	msgEROFS     = "Read-only file system"
	msgEPERM     = "Operation not permitted"
	msgEMSGSIZE  = "Message too long"
	msgEINVAL    = "Invalid argument"
	msgEEXIST    = "File exists"
	msgEIO       = "Input/output error"
	msgENOSPC    = "No space left on device"
	msgEBUSY     = "Device or resource busy"
	msgENOTEMPTY = "Directory not empty"
)

// readOnlyMsgs are the answers the README allows for a write to something
// read-only (EACCES or EROFS).
var readOnlyMsgs = []string{msgEACCES, msgEROFS}

type badRow struct {
	name   string
	script string   // bash -euo pipefail; $MNT and $DATA are set
	want   []string // the failure must print one of these
	// after runs extra checks once the row failed as it should.
	after func(t *testing.T, m *mountProc)
}

func TestBadInputThroughMount(t *testing.T) {
	m := startMount(t, mountOpts{Config: badInputConfig})
	m.Sh(t, `mkdir $MNT/good $MNT/small $MNT/ret $MNT/busy`)
	topics := map[string]bool{"good": true, "small": true, "ret": true, "busy": true}

	// good/0 holds exactly the records in want, in order; every row checks it.
	var want []string
	appendOK := func(t *testing.T, line string) {
		t.Helper()
		m.Sh(t, fmt.Sprintf(`echo %q >> $MNT/good/0/append`, line))
		want = append(want, line)
	}
	for i := 0; i < 50; i++ {
		appendOK(t, fmt.Sprintf("seed-%03d-%s", i, strings.Repeat("x", 100)))
	}
	m.Sh(t, `echo '{"key":"k","value":"json-ok"}' >> $MNT/good/0/append.jsonl`)
	want = append(want, "json-ok")

	// A retention topic whose log start has moved past 0.
	for i := 0; i < 40; i++ {
		m.Sh(t, fmt.Sprintf(`for i in $(seq 1 20); do echo "ret-%d-$i-%s"; done >> $MNT/ret/0/append`, i, strings.Repeat("r", 60)))
	}
	var logStart int64
	eventually(t, harnessDeadline, "retention moves ret/0's log start past 0", func() error {
		logStart = logStartFromStats(t, m.Path("ret", "0", "stats"))
		if logStart <= 1 {
			return fmt.Errorf("log start still %d", logStart)
		}
		return nil
	})
	seg := strings.TrimSpace(m.Sh(t, `ls $MNT/good/0/segments | grep '\.log$' | head -n1`))
	require.NotEmpty(t, seg, "good/0/segments lists a .log file")
	big := strings.Repeat("B", 2000)

	rows := []badRow{
		// ENOENT
		{name: "unknown topic", script: `cat $MNT/nosuch/0/records`, want: []string{msgENOENT}},
		{name: "unknown partition", script: `cat $MNT/good/7/records`, want: []string{msgENOENT}},
		{name: "append to unknown partition", script: `echo x > $MNT/good/7/append`, want: []string{msgENOENT}},
		{name: "append to unknown topic", script: `echo x > $MNT/nosuch/append`, want: []string{msgENOENT}},
		{name: "by-offset garbage", script: `cat $MNT/good/0/by-offset/garbage`, want: []string{msgENOENT}},
		{name: "by-offset minus zero", script: `cat $MNT/good/0/by-offset/-0`, want: []string{msgENOENT}},
		{name: "by-offset garbage jsonl", script: `cat $MNT/good/0/by-offset/12abc.jsonl`, want: []string{msgENOENT}},
		{name: "by-offset below log start", script: fmt.Sprintf(`cat $MNT/ret/0/by-offset/%d`, logStart-1), want: []string{msgENOENT}},
		{name: "by-offset 0 below log start", script: `cat $MNT/ret/0/by-offset/0.jsonl`, want: []string{msgENOENT}},
		{name: "by-time garbage", script: `cat $MNT/good/0/by-time/yesterday-ish`, want: []string{msgENOENT}},
		{name: "by-time bad relative", script: `cat $MNT/good/0/by-time/-15x`, want: []string{msgENOENT}},
		{name: "by-time past int64", script: `cat $MNT/good/0/by-time/9223372036854775808`, want: []string{msgENOENT}},
		{name: "unknown file in partition", script: `cat $MNT/good/0/nosuchview`, want: []string{msgENOENT}},
		{name: "unknown segment", script: `cat $MNT/good/0/segments/99999999999999999999.log`, want: []string{msgENOENT}},

		{name: "cursor name outside Kafka's characters", script: `cat "$MNT/good/0/cursors/a b"`, want: []string{msgENOENT}},
		{name: "cursor name too long", script: `cat $MNT/good/0/cursors/` + strings.Repeat("c", 250), want: []string{msgENOENT}},
		{name: "rm of a cursor that does not exist", script: `rm $MNT/good/0/cursors/never`, want: []string{msgENOENT}},

		// Cursor moves that name no position: EINVAL, the cursor unmoved.
		{name: "cursor moved to garbage", script: `echo garbage > $MNT/good/0/cursors/bad`, want: []string{msgEINVAL}},
		{name: "cursor moved past the end", script: `echo 99999999 > $MNT/good/0/cursors/bad`, want: []string{msgEINVAL}},
		{name: "cursor moved to a negative offset", script: `echo -5 > $MNT/good/0/cursors/bad`, want: []string{msgEINVAL}},
		{name: "cursor truncated to a size", script: `truncate -s 5 $MNT/good/0/cursors/bad`, want: []string{msgEINVAL}},
		{name: "chmod of a cursor", script: `chmod 600 $MNT/good/0/cursors/bad`, want: []string{msgEPERM}},

		// Read-only files: EACCES or EROFS.
		{name: "write to records", script: `echo x > $MNT/good/0/records`, want: readOnlyMsgs},
		{name: "append to records", script: `echo x >> $MNT/good/0/records`, want: readOnlyMsgs},
		{name: "write to records.jsonl", script: `echo '{"value":"x"}' >> $MNT/good/0/records.jsonl`, want: readOnlyMsgs},
		{name: "write to by-offset view", script: `echo x >> $MNT/good/0/by-offset/0`, want: readOnlyMsgs},
		{name: "write to by-time view", script: `echo x >> $MNT/good/0/by-time/0`, want: readOnlyMsgs},
		{name: "write to stats", script: `echo x > $MNT/good/0/stats`, want: readOnlyMsgs},
		{name: "write to a segment file", script: `echo x >> $MNT/good/0/segments/` + seg, want: readOnlyMsgs},
		{name: "dd into a segment file", script: `dd if=/dev/zero of=$MNT/good/0/segments/` + seg + ` bs=1 count=1 conv=notrunc status=none`, want: readOnlyMsgs},
		{name: "create a file in segments", script: `touch $MNT/good/0/segments/00000000000000000000.log.swap`, want: append([]string{msgEPERM}, readOnlyMsgs...)},
		{name: "truncate a view", script: `truncate -s 0 $MNT/good/0/records`, want: readOnlyMsgs},
		{name: "truncate a segment", script: `truncate -s 0 $MNT/good/0/segments/` + seg, want: readOnlyMsgs},
		{name: "rm a segment file", script: `rm -f $MNT/good/0/segments/` + seg, want: append([]string{msgEPERM}, readOnlyMsgs...),
			after: func(t *testing.T, m *mountProc) {
				_, err := os.Stat(m.Path("good", "0", "segments", seg))
				assert.NoError(t, err, "the segment is still listed after a refused rm")
			}},
		{name: "rm a view", script: `rm -f $MNT/good/0/records`, want: append([]string{msgEPERM}, readOnlyMsgs...)},
		{name: "rename a view", script: `mv $MNT/good/0/records $MNT/good/0/records2`, want: append([]string{msgEPERM}, readOnlyMsgs...)},
		{name: "chmod config", script: `chmod 600 $MNT/good/config`, want: []string{msgEPERM}},
		{name: "chown config", script: `chown nobody $MNT/good/config`, want: []string{msgEPERM}},
		{name: "chgrp config", script: `chgrp 65534 $MNT/good/config`, want: []string{msgEPERM}},
		{name: "chown append", script: `chown nobody $MNT/good/append`, want: []string{msgEPERM}},

		// EMSGSIZE: nothing of the write is applied.
		{name: "line above max.message.bytes", script: `echo "` + big + `" >> $MNT/small/0/append`, want: []string{msgEMSGSIZE},
			after: func(t *testing.T, m *mountProc) {
				assert.Empty(t, m.Sh(t, `cat $MNT/small/0/records`), "nothing of a refused record is applied")
			}},
		{name: "unterminated line above max.message.bytes", script: `printf '%s' "` + big + `" >> $MNT/small/0/append`, want: []string{msgEMSGSIZE}},
		{name: "huge single line above the default max.message.bytes", script: `{ head -c 2000000 /dev/zero | tr '\0' x; echo; } >> $MNT/good/0/append`, want: []string{msgEMSGSIZE}},
		{name: "huge json value", script: `{ printf '{"value":"'; head -c 1100000 /dev/zero | tr '\0' x; printf '"}\n'; } >> $MNT/good/0/append.jsonl`, want: []string{msgEMSGSIZE}},

		// EINVAL: malformed append.jsonl, all or nothing.
		{name: "binary garbage into append.jsonl", script: `printf '\x00\xff\xfe\x01garbage\x7f\n' >> $MNT/good/0/append.jsonl`, want: []string{msgEINVAL}},
		{name: "random bytes into append.jsonl", script: `{ head -c 4096 /dev/urandom | tr -d '\n'; echo; } >> $MNT/good/0/append.jsonl`, want: []string{msgEINVAL}},
		{name: "truncated json", script: `echo '{"value":' >> $MNT/good/0/append.jsonl`, want: []string{msgEINVAL}},
		{name: "json array", script: `echo '["a","b"]' >> $MNT/good/0/append.jsonl`, want: []string{msgEINVAL}},
		{name: "json wrong types", script: `echo '{"value":"v","timestamp":"noon"}' >> $MNT/good/0/append.jsonl`, want: []string{msgEINVAL}},
		{name: "json number value", script: `echo '{"value":1}' >> $MNT/good/0/append.jsonl`, want: []string{msgEINVAL}},
		{name: "json object key", script: `echo '{"key":{"a":1},"value":"v"}' >> $MNT/good/0/append.jsonl`, want: []string{msgEINVAL}},
		{name: "json negative timestamp", script: `echo '{"value":"v","timestamp":-5}' >> $MNT/good/0/append.jsonl`, want: []string{msgEINVAL}},
		{name: "json min int64 timestamp", script: `echo '{"value":"v","timestamp":-9223372036854775808}' >> $MNT/good/0/append.jsonl`, want: []string{msgEINVAL}},
		{name: "good line then bad line in one write", script: oneWrite(`{"value":"half-1"}\n{"value":\n`, `$MNT/good/0/append.jsonl`), want: []string{msgEINVAL}},
		{name: "topic-level append.jsonl garbage", script: `echo 'not json' >> $MNT/good/append.jsonl`, want: []string{msgEINVAL}},

		// EINVAL: config, validated all or nothing.
		{name: "config bad value", script: `echo 'retention.ms=banana' > $MNT/good/config`, want: []string{msgEINVAL}},
		{name: "config unknown name", script: `echo 'no.such.setting=1' > $MNT/good/config`, want: []string{msgEINVAL}},
		{name: "config no equals", script: `echo 'garbage' > $MNT/good/config`, want: []string{msgEINVAL}},
		{name: "config negative segment.bytes", script: `echo 'segment.bytes=-1' > $MNT/good/config`, want: []string{msgEINVAL}},
		{name: "config bad cleanup.policy", script: `echo 'cleanup.policy=shred' > $MNT/good/config`, want: []string{msgEINVAL}},
		{name: "config all or nothing in one write", script: oneWrite(`retention.ms=1234568\nsegment.bytes=banana\n`, `$MNT/good/config`), want: []string{msgEINVAL},
			after: func(t *testing.T, m *mountProc) {
				assert.NotContains(t, m.Sh(t, `cat $MNT/good/config`), "retention.ms=1234568", "a config write with one bad line changes nothing")
			}},
		{name: "config all or nothing per write", script: `printf 'retention.ms=1234567\nsegment.bytes=banana\n' > $MNT/good/config`, want: []string{msgEINVAL},
			after: func(t *testing.T, m *mountProc) {
				// bash's printf writes line by line: the first write is
				// applied, the second refused.
				cfg := m.Sh(t, `cat $MNT/good/config`)
				assert.Contains(t, cfg, "retention.ms=1234567\n", "the write before the bad one")
				assert.NotContains(t, cfg, "segment.bytes=banana")
			}},

		// EINVAL / kernel answers for topic names.
		{name: "topic name with space", script: `mkdir "$MNT/bad name"`, want: []string{msgEINVAL}},
		{name: "topic name 250 characters", script: `mkdir $MNT/` + strings.Repeat("a", 250), want: []string{msgEINVAL}},
		{name: "topic name 256 characters", script: `mkdir $MNT/` + strings.Repeat("a", 256), want: []string{"File name too long", msgEINVAL}},
		{name: "topic name with colon", script: `mkdir $MNT/a:b`, want: []string{msgEINVAL}},
		{name: "topic name with star", script: `mkdir "$MNT/a*b"`, want: []string{msgEINVAL, msgENOENT}},
		{name: "topic name non-ascii", script: `mkdir $MNT/$(printf 'caf\xc3\xa9')`, want: []string{msgEINVAL}},
		{name: "topic name with control byte", script: `mkdir "$MNT/$(printf 'a\x01b')"`, want: []string{msgEINVAL}},
		{name: "topic name with newline", script: `mkdir "$MNT/$(printf 'a\nb')"`, want: []string{msgEINVAL}},
		{name: "topic name dotdot", script: `mkdir $MNT/..`, want: []string{msgEEXIST, msgEINVAL}},
		{name: "topic name dot", script: `mkdir $MNT/.`, want: []string{msgEEXIST, msgEINVAL}},
		{name: "topic name a/b", script: `mkdir $MNT/a/b`, want: []string{msgENOENT}},
		{name: "directory inside a topic", script: `mkdir $MNT/good/sub`, want: append([]string{msgEPERM, msgEINVAL, msgENOENT}, readOnlyMsgs...)},
		{name: "directory inside a partition", script: `mkdir $MNT/good/0/sub`, want: append([]string{msgEPERM, msgEINVAL, msgENOENT}, readOnlyMsgs...)},
		{name: "file created at the root", script: `echo x > $MNT/plainfile`, want: append([]string{msgEPERM, msgEINVAL, msgENOENT}, readOnlyMsgs...)},
		{name: "existing topic", script: `mkdir $MNT/good`, want: []string{msgEEXIST}},
	}

	tried := 0
	for _, row := range rows {
		t.Run(row.name, func(t *testing.T) {
			tried++
			out, errOut, err := m.ShErr(row.script)
			require.Error(t, err, "the bad input must fail\nscript: %s\nstdout: %s", row.script, out)
			matched := false
			for _, w := range row.want {
				if strings.Contains(errOut, w) {
					matched = true
				}
			}
			assert.True(t, matched, "script %s\nwant one of %q\nstderr: %s", row.script, row.want, errOut)
			if row.after != nil {
				row.after(t, m)
			}
			checkBadInputSurvivors(t, m, topics, &want, appendOK)
		})
	}

	t.Run("valid topic name of 249 characters", func(t *testing.T) {
		tried++
		name := strings.Repeat("v", 249)
		m.Sh(t, `mkdir $MNT/`+name+` && echo ok > $MNT/`+name+`/0/append && test "$(cat $MNT/`+name+`/0/records)" = ok && rmdir $MNT/`+name)
		checkBadInputSurvivors(t, m, topics, &want, appendOK)
	})

	t.Run("rmdir of a topic with an open writer", func(t *testing.T) {
		tried++
		// The writer's fd stays open across the rmdir: rmdir refuses with
		// EBUSY, the topic stays, and the open writer keeps working.
		out, errOut, err := m.ShErr(`exec 3>>$MNT/busy/0/append; echo before >&3; ` +
			`if rmdir $MNT/busy; then echo RMDIR_OK; else echo RMDIR_FAILED; fi; ` +
			`echo after >&3; exec 3>&-`)
		require.NoError(t, err, "stdout %s stderr %s", out, errOut)
		assert.Equal(t, "RMDIR_FAILED\n", out, "rmdir of a topic with an open writer is refused")
		assert.Contains(t, errOut, msgEBUSY)
		assert.Equal(t, "before\nafter\n", m.Sh(t, `cat $MNT/busy/0/records`), "the open writer keeps working")
		m.Sh(t, `rmdir $MNT/busy`)
		delete(topics, "busy")
		checkBadInputSurvivors(t, m, topics, &want, appendOK)
	})

	t.Run("everything survives a restart", func(t *testing.T) {
		m.Remount()
		checkBadInputSurvivors(t, m, topics, &want, appendOK)
	})

	t.Run("read-only mount", func(t *testing.T) {
		m.Stop()
		ro := startMount(t, mountOpts{Data: m.Data, ReadOnly: true})
		got := linesOf(ro.Sh(t, `cat $MNT/good/0/records`))
		require.Empty(t, firstDiff(want, got), "a read-only mount shows the same records")
		roRows := []badRow{
			{name: "append", script: `echo x >> $MNT/good/0/append`},
			{name: "append.jsonl", script: `echo '{"value":"x"}' >> $MNT/good/0/append.jsonl`},
			{name: "topic append", script: `echo x >> $MNT/good/append`},
			{name: "config", script: `echo 'retention.ms=1000' > $MNT/good/config`},
			{name: "mkdir", script: `mkdir $MNT/newtopic`},
			{name: "rmdir", script: `rmdir $MNT/good`},
			{name: "records", script: `echo x >> $MNT/good/0/records`},
		}
		for _, row := range roRows {
			tried++
			_, errOut, err := ro.ShErr(row.script)
			if assert.Error(t, err, "read-only mount: %s must fail", row.name) {
				assert.True(t, strings.Contains(errOut, msgEROFS) || strings.Contains(errOut, msgEACCES),
					"read-only mount: %s: want EROFS or EACCES, got %s", row.name, errOut)
			}
		}
		got = linesOf(ro.Sh(t, `cat $MNT/good/0/records`))
		require.Empty(t, firstDiff(want, got), "nothing changed on the read-only mount")
		var names []string
		for n := range topics {
			names = append(names, n)
		}
		sort.Strings(names)
		assert.Equal(t, names, linesOf(ro.Sh(t, `ls $MNT`)))
		ro.Stop()
	})

	msg := fmt.Sprintf("bad input: %d inputs tried, %d records in good/0 intact", tried, len(want))
	t.Log(msg)
	reportSummary(msg)
}

// checkBadInputSurvivors asserts the mount still works and lost nothing: a new
// record appends and shows, good/0 holds exactly the expected records, and
// only the expected topics exist.
func checkBadInputSurvivors(t *testing.T, m *mountProc, topics map[string]bool, want *[]string, appendOK func(*testing.T, string)) {
	t.Helper()
	appendOK(t, fmt.Sprintf("alive-%03d", len(*want)))
	got := linesOf(m.Sh(t, `cat $MNT/good/0/records`))
	if d := firstDiff(*want, got); d != "" {
		t.Errorf("good/0 must hold exactly the records written successfully, in order: %s", d)
		*want = got // report each divergence once, not in every later row
	}
	var names []string
	for n := range topics {
		names = append(names, n)
	}
	sort.Strings(names)
	require.Equal(t, names, linesOf(m.Sh(t, `ls $MNT`)), "only the topics made on purpose exist")
}

// firstDiff describes where got first differs from want ("" if equal),
// briefly, so a long record list does not flood the output.
func firstDiff(want, got []string) string {
	for i := 0; i < len(want) || i < len(got); i++ {
		var w, g string
		if i < len(want) {
			w = want[i]
		}
		if i < len(got) {
			g = got[i]
		}
		if i >= len(want) || i >= len(got) || w != g {
			return fmt.Sprintf("%d records expected, %d present; first difference at line %d: want %.60q, got %.60q (%d lines from there: %.200q)",
				len(want), len(got), i+1, w, g, len(got)-i, strings.Join(got[i:min(len(got), i+3)], " | "))
		}
	}
	return ""
}

// oneWrite is a bash snippet that appends the printf-format text to dst in a
// single write(2) (bash's own printf and echo write line by line).
func oneWrite(text, dst string) string {
	return `t=$(mktemp); trap 'rm -f "$t"' EXIT; printf '` + text + `' > "$t"; cat "$t" >> ` + dst
}

// TestWrongDataThroughMount reproduces issue #17's "wrong data" cases
// through a real mount with shell tools and python3, and asserts the exact
// records stored:
//   - a line over max.message.bytes stores nothing of itself, whatever the
//     writer (python's retries, a bare write(2) that returns a short count,
//     cat, bash's echo through glibc) and however the kernel cut it into
//     WRITEs; the lines before it, and the lines the writer sends after it,
//     are stored;
//   - a final line without '\n' is one record, cut when the file is
//     released, not at each close of a shared descriptor, and is still
//     visible to the next command;
//   - an append.jsonl line without "value" is EINVAL, not a tombstone;
//   - a config write that cannot be persisted fails that write(2).
func TestWrongDataThroughMount(t *testing.T) {
	m := startMount(t, mountOpts{Config: `
"linger.ms" = 1

[topics.small]
"max.message.bytes" = 1024
`})
	records := func(t *testing.T, topic string) []string {
		t.Helper()
		return linesOf(m.Sh(t, `cat $MNT/`+topic+`/0/records`))
	}
	noLong := func(t *testing.T, got []string, what string) {
		t.Helper()
		for _, r := range got {
			assert.Less(t, len(r), 1000, "%s: nothing of the long line is stored: a record of %d bytes", what, len(r))
		}
	}

	t.Run("python write of a long line between two", func(t *testing.T) {
		m.Sh(t, `mkdir $MNT/py`)
		out := m.Sh(t, `python3 -c '
import sys
try:
    with open(sys.argv[1], "a") as f:
        f.write("before\n" + "x" * 2000000 + "\nafter\n")
        print("write returned")
    print("no error")
except OSError as e:
    print("errno", e.errno)
' $MNT/py/0/append`)
		// write() returns (python buffers); the flush at the end of the
		// with block raises, as docs/NOTES.md says.
		assert.Equal(t, fmt.Sprintf("write returned\nerrno %d\n", syscall.EMSGSIZE), out, "python sees EMSGSIZE at close")
		got := records(t, "py")
		noLong(t, got, "python")
		// Python writes a refused buffer again at close: after the two
		// refusals, the end of the long line is dropped and after stored.
		assert.Equal(t, []string{"before", "after"}, got)
	})

	t.Run("bare write of a long line returns a short count", func(t *testing.T) {
		m.Sh(t, `mkdir $MNT/raw`)
		// The kernel cuts the write into WRITEs of up to 1 MiB, the first
		// shorter by the buffer's offset in its page: write(2) returns a
		// short count (the first WRITE was taken), or EMSGSIZE when the
		// first WRITE alone was too long. Either way the program goes on
		// with its next line, writing it again if it is refused.
		out := m.Sh(t, `python3 -c '
import os, sys
fd = os.open(sys.argv[1], os.O_WRONLY | os.O_APPEND)
try:
    n = os.write(fd, b"y" * 1500000 + b"\n")
    print("short" if n < 1500001 else "whole")
except OSError as e:
    print("errno", e.errno)
for attempt in range(3):
    try:
        os.write(fd, b"next\n")
        break
    except OSError as e:
        print("next: errno", e.errno)
os.close(fd)
' $MNT/raw/0/append`)
		assert.Contains(t, []string{"short\n", fmt.Sprintf("errno %d\nnext: errno %d\n", syscall.EMSGSIZE, syscall.EMSGSIZE)}, out)
		assert.Equal(t, []string{"next"}, records(t, "raw"), "no prefix of the long line")
	})

	t.Run("cat of a file with a long line", func(t *testing.T) {
		m.Sh(t, `mkdir $MNT/cat`)
		big := filepath.Join(t.TempDir(), "big.txt")
		require.NoError(t, os.WriteFile(big, []byte("a\n"+strings.Repeat("z", 2000000)+"\nb\n"), 0o644))
		_, errOut, err := m.ShErr(`cat ` + big + ` > $MNT/cat/0/append`)
		require.Error(t, err, "cat stops at the long line")
		assert.Contains(t, errOut, "cat: write error: "+msgEMSGSIZE)
		assert.Equal(t, []string{"a"}, records(t, "cat"))
	})

	t.Run("bash echo of a long line between two", func(t *testing.T) {
		m.Sh(t, `mkdir $MNT/echo`)
		_, errOut, err := m.ShErr(`set +e; big=$(head -c 1500000 /dev/zero | tr '\0' y); ` +
			`{ echo b2; echo "$big"; echo a2; } > $MNT/echo/0/append; exit 0`)
		require.NoError(t, err)
		assert.Contains(t, errOut, "echo: write error: "+msgEMSGSIZE)
		assert.Equal(t, []string{"b2", "a2"}, records(t, "echo"))
	})

	t.Run("long line inside one write", func(t *testing.T) {
		// max.message.bytes 1024: the lines before it are taken with a
		// short count, cat's next write starts with it and fails.
		m.Sh(t, `mkdir $MNT/small`)
		_, errOut, err := m.ShErr(oneWrite(`l1\nl2\n`+strings.Repeat("L", 2000)+`\nl3\n`, `$MNT/small/0/append`))
		require.Error(t, err)
		assert.Contains(t, errOut, msgEMSGSIZE)
		assert.Equal(t, []string{"l1", "l2"}, records(t, "small"))
	})

	t.Run("final line is cut at release, not at every close", func(t *testing.T) {
		m.Sh(t, `mkdir $MNT/tail`)
		nonl := filepath.Join(t.TempDir(), "nonl")
		require.NoError(t, os.WriteFile(nonl, []byte("abc"), 0o644))
		m.Sh(t, `(cat `+nonl+`; echo def) > $MNT/tail/0/append`)
		assert.Equal(t, []string{"abcdef"}, records(t, "tail"), "as in a plain file")
		m.Sh(t, `(cat `+nonl+`; echo) > $MNT/tail/0/append`)
		assert.Equal(t, []string{"abcdef", "abc"}, records(t, "tail"), "no empty record")
		// The next command sees the final line (RELEASE follows close).
		out := m.Sh(t, `for i in $(seq 1 30); do printf "x$i" > $MNT/tail/0/append; tail -n 1 $MNT/tail/0/records; done`)
		var want []string
		for i := 1; i <= 30; i++ {
			want = append(want, fmt.Sprintf("x%d", i))
		}
		assert.Equal(t, want, linesOf(out))
	})

	t.Run("append.jsonl line without a value", func(t *testing.T) {
		m.Sh(t, `mkdir $MNT/js`)
		for _, line := range []string{`{}`, `{"key":"k"}`, `{"key":"k","timestamp":5}`} {
			_, errOut, err := m.ShErr(`echo '` + line + `' >> $MNT/js/0/append.jsonl`)
			require.Error(t, err, "%s is refused", line)
			assert.Contains(t, errOut, msgEINVAL)
		}
		assert.Contains(t, m.Stderr(), `no \"value\" field`, "the log says why")
		m.Sh(t, `echo '{"key":"k","value":null}' >> $MNT/js/0/append.jsonl`)
		js := m.Sh(t, `cat $MNT/js/0/records.jsonl`)
		assert.Equal(t, 1, strings.Count(js, "\n"), "only the explicit tombstone: %s", js)
		assert.Contains(t, js, `"key":"k","value":null`)
	})

	t.Run("config write with too many open files", func(t *testing.T) {
		m.Sh(t, `mkdir $MNT/cfg`)
		pid := m.Cmd.Process.Pid
		fds, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
		require.NoError(t, err)
		used := map[string]bool{}
		for _, fd := range fds {
			used[fd.Name()] = true
		}
		free := 0 // the lowest free descriptor: a limit of it leaves none
		for used[strconv.Itoa(free)] {
			free++
		}
		// No descriptor left for the mount (its soft limit lowered to what
		// it has open): persisting the change fails.
		soft := strings.TrimSpace(m.Sh(t, fmt.Sprintf(`prlimit --pid %d --nofile --output SOFT --noheadings`, pid)))
		m.Sh(t, fmt.Sprintf(`prlimit --pid %d --nofile=%d:`, pid, free))
		_, errOut, err := m.ShErr(`echo retention.ms=1234567 > $MNT/cfg/config`)
		m.Sh(t, fmt.Sprintf(`prlimit --pid %d --nofile=%s:`, pid, soft))
		require.Error(t, err, "the shell sees the failure")
		assert.Contains(t, errOut, "echo: write error: Too many open files")
		assert.NotContains(t, m.Sh(t, `cat $MNT/cfg/config`), "retention.ms=1234567\n", "nothing applied")
		m.Sh(t, `echo retention.ms=1234567 > $MNT/cfg/config`)
		assert.Contains(t, m.Sh(t, `cat $MNT/cfg/config`), "retention.ms=1234567\n")
	})
}

// TestConfigDiskFull: a config change on a full disk fails the write(2)
// that carries it with ENOSPC, nothing of it is applied, and it applies
// once there is room.
func TestConfigDiskFull(t *testing.T) {
	requireFUSE(t)
	root, data := smallTmpfs(t, "4m")
	m := startMount(t, mountOpts{Data: data, Config: `
"segment.bytes" = 65536
"segment.index.bytes" = 4096
`})
	m.Sh(t, `mkdir $MNT/full`)
	ballast := filepath.Join(root, "ballast")
	m.Sh(t, `dd if=/dev/zero of=`+ballast+` bs=64k status=none 2>/dev/null || true`)

	_, errOut, err := m.ShErr(`echo retention.ms=1234567 > $MNT/full/config`)
	require.Error(t, err, "exit status 0 on a full disk")
	assert.Contains(t, errOut, "echo: write error: "+msgENOSPC)
	assert.NotContains(t, m.Sh(t, `cat $MNT/full/config`), "retention.ms=1234567\n", "nothing applied")

	require.NoError(t, os.Remove(ballast))
	m.Sh(t, `echo retention.ms=1234567 > $MNT/full/config`)
	assert.Contains(t, m.Sh(t, `cat $MNT/full/config`), "retention.ms=1234567\n")
	m.Remount()
	assert.Contains(t, m.Sh(t, `cat $MNT/full/config`), "retention.ms=1234567\n", "persisted")
}

// TestMkdirTooManyOpenFilesRollsBack: a mkdir that fails with EMFILE part
// way (a partition directory and log file made, an index not) once left a
// half-made topic: mkdir said File exists, ls said No such file, rmdir
// ENOENT, and the topic came back after a remount. The failed creation
// now leaves nothing, logs a warning with the errno, and the same mkdir
// succeeds once descriptors are free again.
func TestMkdirTooManyOpenFilesRollsBack(t *testing.T) {
	m := startMount(t, mountOpts{})
	pid := m.Cmd.Process.Pid
	fds, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
	require.NoError(t, err)
	soft := strings.TrimSpace(m.Sh(t, fmt.Sprintf(`prlimit --pid %d --nofile --output SOFT --noheadings`, pid)))
	// A few descriptors more than the mount has open: some topics are
	// made, then one mkdir runs out part way.
	m.Sh(t, fmt.Sprintf(`prlimit --pid %d --nofile=%d:`, pid, len(fds)+12))
	out, errOut, err := m.ShErr(`for i in $(seq 200); do mkdir $MNT/t$i || { echo $i; break; }; done`)
	m.Sh(t, fmt.Sprintf(`prlimit --pid %d --nofile=%s:`, pid, soft))
	require.NoError(t, err, errOut)
	failed := "t" + strings.TrimSpace(out)
	require.NotEqual(t, "t", failed, "a mkdir failed")
	assert.Regexp(t, "mkdir: cannot create directory .+/"+failed+".: Too many open files", errOut)
	assert.Contains(t, m.Stderr(), `msg="fusefs: mkdir failed, no topic created" topic=`+failed+` errno="too many open files"`)

	// Nothing of the failed topic is left: not in the tree, not on disk.
	_, errOut, err = m.ShErr(`ls $MNT/` + failed)
	require.Error(t, err)
	assert.Contains(t, errOut, "No such file or directory")
	assert.NotContains(t, m.Sh(t, `ls $MNT`), failed+"\n")
	// Its partition directory was renamed to Kafka's <topic>-0.<uuid>-delete
	// (a rename needs no descriptor); what could not be removed for want of
	// descriptors goes at the next open.
	left := func() string {
		dirs, err := filepath.Glob(filepath.Join(m.Data, failed+"-*"))
		require.NoError(t, err)
		out := ""
		for _, d := range dirs {
			if !strings.HasSuffix(d, "-delete") {
				out += filepath.Base(d) + "\n"
			}
		}
		return out
	}
	assert.Empty(t, left(), "no partition directory of the failed topic")

	// The name is free: mkdir makes it, and it works.
	assert.Equal(t, "x\n", m.Sh(t, `mkdir $MNT/`+failed+`; echo x > $MNT/`+failed+`/append; cat $MNT/`+failed+`/0/records`))
	m.Remount()
	assert.Equal(t, "x\n", m.Sh(t, `cat $MNT/`+failed+`/0/records`))
	assert.Equal(t, failed+"-0\n", left())
	eventuallyEqual(t, "1", func() string {
		dirs, _ := filepath.Glob(filepath.Join(m.Data, failed+"-*"))
		return strconv.Itoa(len(dirs))
	})
	requireAlive(t, m)
}

// TestByTimeFarFuture: by-time/<MaxInt64 ms> was ENOENT (a 18-digit
// bound) though the README says a future time is an empty view that grows:
// it is empty when opened and shows what is appended after.
func TestByTimeFarFuture(t *testing.T) {
	m := startMount(t, mountOpts{})
	view := m.Path("t", "0", "by-time", "9223372036854775807")
	m.Sh(t, `mkdir $MNT/t; echo a > $MNT/t/append`)
	st, err := os.Stat(view)
	require.NoError(t, err)
	assert.Equal(t, int64(0), st.Size())
	assert.Equal(t, "", m.Sh(t, `cat `+view))
	assert.Equal(t, "", m.Sh(t, `cat `+view+`.jsonl`))
	f, err := os.Open(view)
	require.NoError(t, err)
	defer f.Close()
	m.Sh(t, `echo b > $MNT/t/append`)
	got, err := io.ReadAll(f)
	require.NoError(t, err)
	assert.Equal(t, "b\n", string(got), "the open view grows with later appends")
}
