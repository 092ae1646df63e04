package tests

// Bad input through the mount: every row of README.md's error table and
// then some, each driven with bash and real tools. Each row asserts the errno
// by the message bash or the tool prints and a non-zero exit status; after
// every row the mount must still accept and show a new record, and no earlier
// record may be lost or half-applied.

import (
	"fmt"
	"os"
	"sort"
	"strings"
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

// readOnlyMsgs are the answers DESIGN allows for a write to something
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
		{name: "by-offset negative", script: `cat $MNT/good/0/by-offset/-5`, want: []string{msgENOENT}},
		{name: "by-offset garbage jsonl", script: `cat $MNT/good/0/by-offset/12abc.jsonl`, want: []string{msgENOENT}},
		{name: "by-offset below log start", script: fmt.Sprintf(`cat $MNT/ret/0/by-offset/%d`, logStart-1), want: []string{msgENOENT}},
		{name: "by-offset 0 below log start", script: `cat $MNT/ret/0/by-offset/0.jsonl`, want: []string{msgENOENT}},
		{name: "by-time garbage", script: `cat $MNT/good/0/by-time/yesterday-ish`, want: []string{msgENOENT}},
		{name: "by-time bad relative", script: `cat $MNT/good/0/by-time/-15x`, want: []string{msgENOENT}},
		{name: "unknown file in partition", script: `cat $MNT/good/0/nosuchview`, want: []string{msgENOENT}},
		{name: "unknown segment", script: `cat $MNT/good/0/segments/99999999999999999999.log`, want: []string{msgENOENT}},

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
		{name: "config all or nothing", script: `printf 'retention.ms=1234567\nsegment.bytes=banana\n' > $MNT/good/config`, want: []string{msgEINVAL},
			after: func(t *testing.T, m *mountProc) {
				cfg := m.Sh(t, `cat $MNT/good/config`)
				assert.NotContains(t, cfg, "retention.ms=1234567", "a config write with one bad line changes nothing")
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
