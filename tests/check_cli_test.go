package tests

// topicfs check and dump, end to end with the built binary: a damaged
// sealed segment is planned, then repaired without losing an intact record;
// --repair refuses a mounted directory; check refuses what is not a data
// directory; dump says one clear thing about a missing file.

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// partitionFiles reads every file of a partition directory by name.
func partitionFiles(t *testing.T, dir string) map[string][]byte {
	t.Helper()
	ents, err := os.ReadDir(dir)
	require.NoError(t, err)
	out := map[string][]byte{}
	for _, e := range ents {
		b, err := os.ReadFile(filepath.Join(dir, e.Name()))
		require.NoError(t, err)
		out[e.Name()] = b
	}
	return out
}

// TestCheckRepairKeepsIntactRecords flips one bit in the middle of the
// sealed middle segment of a three-segment partition. check prints the plan,
// fails and changes nothing; check --repair moves exactly the damaged batch
// aside (byte-identical), keeps every other record at its offset, rebuilds
// the segment's indexes and leaves the other segments byte-identical; the
// mount then reads every intact record. (It used to truncate the log at the
// damaged batch and delete the later segments.)
func TestCheckRepairKeepsIntactRecords(t *testing.T) {
	m := startMount(t, mountOpts{Config: corruptionConfig})
	m.Sh(t, `mkdir $MNT/c`)
	partDir := filepath.Join(m.Data, "c-0")
	var lines []string
	for len(segmentFiles(t, partDir, ".log")) < 3 && len(lines) < 5000 {
		more := make([]string, 40)
		for i := range more {
			more[i] = relPayload(0, len(lines)+i)
		}
		writeLines(t, m.Path("c", "append"), more, 8)
		lines = append(lines, more...)
	}
	m.Stop()
	logs := segmentFiles(t, partDir, ".log")
	require.Len(t, logs, 3, "a three-segment partition")

	victim := logs[1]
	name := filepath.Base(victim)
	batches := logBatches(t, victim)
	require.GreaterOrEqual(t, len(batches), 3)
	bad, next := batches[len(batches)/2], batches[len(batches)/2+1]
	data, err := os.ReadFile(victim)
	require.NoError(t, err)
	data[bad.Pos+bad.Size/2] ^= 0x10 // one bit in the middle of the batch
	require.NoError(t, os.WriteFile(victim, data, 0o644))
	before := partitionFiles(t, partDir)
	aside := fmt.Sprintf("%s.damaged-%d-%d", name, bad.Pos, bad.Pos+bad.Size)

	res := runCheck(t, m.Data)
	require.NotEqual(t, 0, res.Code, "check fails on the damaged segment: %s", res)
	assert.Contains(t, res.Stdout, fmt.Sprintf("c-0: would move bytes %d..%d (%d bytes) of %s to %s; offsets %d..%d lost, between intact offsets %d and %d",
		bad.Pos, bad.Pos+bad.Size, bad.Size, name, aside, bad.Base, next.Base-1, bad.Base-1, next.Base), res)
	assert.Contains(t, res.Stdout, fmt.Sprintf("c-0: would rewrite %s to its %d intact batches", name, len(batches)-1), res)
	assert.Contains(t, res.Stderr, "--repair would do")
	assert.Equal(t, before, partitionFiles(t, partDir), "check without --repair changes nothing")

	rep := runCheck(t, "--repair", m.Data)
	require.Equal(t, 0, rep.Code, "check --repair: %s", rep)
	assert.Contains(t, rep.Stdout, fmt.Sprintf("repair: c-0: moved bytes %d..%d", bad.Pos, bad.Pos+bad.Size), rep)
	after := partitionFiles(t, partDir)
	assert.Equal(t, data[bad.Pos:bad.Pos+bad.Size], after[aside], "the damaged bytes are aside, byte for byte as the segment held them")
	assert.Equal(t, append(data[:bad.Pos:bad.Pos], data[bad.Pos+bad.Size:]...), after[name], "the segment keeps every other batch unchanged")
	stem := strings.TrimSuffix(name, ".log")
	for f, b := range before {
		if !strings.HasPrefix(f, stem) {
			assert.Equal(t, b, after[f], "%s is byte-identical", f)
		}
	}
	assert.Contains(t, after, stem+".index", "rebuilt")
	assert.NotEmpty(t, after[stem+".timeindex"], "rebuilt")
	requireCheckPasses(t, m.Data)

	m.Remount()
	want := append(append([]string(nil), lines[:bad.Base]...), lines[next.Base:]...)
	assert.Equal(t, want, linesOf(m.Sh(t, `cat $MNT/c/0/records`)), "every intact record, in order")
	recs, err := readJSONL(m.Path("c", "0", "records.jsonl"))
	require.NoError(t, err)
	require.Len(t, recs, len(want))
	for _, r := range recs {
		v, _ := r.ValueString()
		require.Equal(t, lines[r.Offset], v, "offset %d keeps its record", r.Offset)
	}
	assert.Equal(t, lines[next.Base:], linesOf(m.Sh(t, fmt.Sprintf(`cat $MNT/c/0/by-offset/%d`, next.Base))))
	m.Sh(t, `echo after-repair >> $MNT/c/0/append`)
	recs, err = readJSONL(m.Path("c", "0", "records.jsonl"))
	require.NoError(t, err)
	assert.Equal(t, int64(len(lines)), recs[len(recs)-1].Offset, "appends continue at the old log end")
	m.Stop()
	requireCheckPasses(t, m.Data)
}

// TestCheckAndDumpRefusals: --repair of a mounted data directory is refused
// even with nothing to repair (it used to say OK); check of a mountpoint,
// /etc or an empty directory fails (they used to pass); dump of a missing
// file is one clear line (it was "segment name is not an offset", twice);
// dump of a live active time index reports no mismatch.
func TestCheckAndDumpRefusals(t *testing.T) {
	m := startMount(t, mountOpts{})
	m.Sh(t, `mkdir $MNT/t && echo one >> $MNT/t/append && echo two >> $MNT/t/append`)

	for _, tc := range []struct {
		args     []string
		contains []string
	}{
		{[]string{"--repair", m.Data}, []string{"in use", "unmount"}},
		{[]string{"--repair", filepath.Join(m.Data, "t-0")}, []string{"in use"}},
		{[]string{m.Dir}, []string{"inside the topicfs mount"}},
		{[]string{"--repair", m.Dir}, []string{"inside the topicfs mount"}},
		{[]string{filepath.Join(m.Dir, "t", "0")}, []string{"inside the topicfs mount"}},
		{[]string{"/etc"}, []string{"/etc is not a data directory"}},
		{[]string{t.TempDir()}, []string{"not a data directory", "is empty"}},
	} {
		res := runCheck(t, tc.args...)
		assert.Equal(t, 1, res.Code, "check %v: %s", tc.args, res)
		assert.NotContains(t, res.Stdout, "OK", "check %v", tc.args)
		requireOneLineError(t, res.Stderr, "topicfs check: ", tc.contains...)
	}
	res := runCheck(t, m.Data)
	assert.Equal(t, 0, res.Code, "check (without --repair) reads a mounted data directory: %s", res)

	missing := filepath.Join(t.TempDir(), "00000000000000000000.log")
	out, errOut, code := runTopicfs(t, nil, "dump", missing)
	assert.Equal(t, 1, code)
	requireOneLineError(t, errOut, "topicfs dump: ", missing+": no such file or directory")
	assert.NotContains(t, out+errOut, "not an offset")

	tix := filepath.Join(m.Data, "t-0", "00000000000000000000.timeindex")
	out, errOut, code = runTopicfs(t, nil, "dump", tix, strings.TrimSuffix(tix, ".timeindex")+".index")
	assert.Equal(t, 0, code, errOut)
	assert.Empty(t, errOut, "no mismatch on a live active segment's indexes")
	assert.NotContains(t, out, "timestamp: 0 offset: 0")
}
