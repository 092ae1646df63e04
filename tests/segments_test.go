package tests

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// segmentsConfig makes a partition of 1 MiB segments whose retention runs
// every 100 ms and unlinks deleted segments 100 ms after renaming them.
const segmentsConfig = `"segment.bytes" = 1048576
"retention.check.interval.ms" = 100
"file.delete.delay.ms" = 100
`

// segmentsModes are the two ways segments/ is read: FUSE passthrough for
// sealed segments' files (the default where the kernel and root allow it,
// as on the project's machines) and everything through topicfs.
var segmentsModes = []struct {
	name string
	args []string
	pass bool
	log  string
}{
	{"passthrough", nil, true, "(FUSE passthrough)"},
	{"no-passthrough", []string{"--no-passthrough"}, false, "turned off (--no-passthrough)"},
}

// metricsURL returns the /metrics URL a mount started with --metrics-addr
// printed.
func metricsURL(t *testing.T, m *mountProc) string {
	t.Helper()
	match := metricsLine.FindStringSubmatch(m.Stderr())
	require.NotNil(t, match, "stderr names the metrics address:\n%s", m.Stderr())
	return match[1]
}

// fuseReads returns how many READ requests the mount has served (0 before
// the first: the metric appears with it).
func fuseReads(t *testing.T, url string) float64 {
	t.Helper()
	for _, s := range scrape(t, url)["topicfs_fuse_op_duration_seconds_count"] {
		if strings.Contains(s.labels, `op="read"`) {
			return s.value
		}
	}
	return 0
}

// compareFiles is a script comparing each file named in $FILES under
// segments/ with the one on disk through cat, cmp, dd, head, tail and wc.
const compareFiles = `
S=$MNT/seg/0/segments; D=$DATA/seg-0
for f in $FILES; do
	cat "$S/$f" | cmp - "$D/$f"
	cmp "$S/$f" "$D/$f"
	[ "$(wc -c < "$S/$f")" = "$(wc -c < "$D/$f")" ]
	[ "$(stat -c %s "$S/$f")" = "$(stat -c %s "$D/$f")" ]
	cmp <(head -c 1000 "$S/$f") <(head -c 1000 "$D/$f")
	cmp <(tail -c 5000 "$S/$f") <(tail -c 5000 "$D/$f")
	cmp <(dd if="$S/$f" bs=4096 skip=3 count=7 status=none) <(dd if="$D/$f" bs=4096 skip=3 count=7 status=none)
	cmp <(dd if="$S/$f" bs=1M iflag=skip_bytes skip=12345 status=none) <(dd if="$D/$f" bs=1M iflag=skip_bytes skip=12345 status=none)
done
`

// TestSegmentsReadLikeDisk reads every file of a partition through
// segments/ with shell tools and compares it with the file on disk: the
// sealed segments' .log, .index and .timeindex (passed through to the
// kernel by default: no READ reaches topicfs), and the active segment's,
// whose indexes are preallocated (10 MiB, mostly zeros, as on disk). Then
// retention deletes the segments while two descriptors hold the oldest
// .log open: they read it to the end.
func TestSegmentsReadLikeDisk(t *testing.T) {
	for _, mode := range segmentsModes {
		t.Run(mode.name, func(t *testing.T) {
			m := startMount(t, mountOpts{Config: segmentsConfig, Args: append([]string{"--metrics-addr", "127.0.0.1:0"}, mode.args...)})
			assert.Contains(t, m.Stderr(), mode.log, "the log says how segments/ is read")
			url := metricsURL(t, m)
			m.Sh(t, `mkdir $MNT/seg && seq 1 400000 > $MNT/seg/0/append`)
			sealed, active := partitionSegmentFiles(t, filepath.Join(m.Data, "seg-0"))
			require.GreaterOrEqual(t, len(sealed), 6, "at least two sealed segments")

			before := fuseReads(t, url)
			m.Sh(t, "FILES='"+strings.Join(sealed, " ")+"'\n"+compareFiles)
			if mode.pass {
				assert.Zero(t, fuseReads(t, url)-before, "sealed files read by the kernel, not through topicfs")
			} else {
				assert.Positive(t, fuseReads(t, url)-before, "sealed files read through topicfs")
			}
			before = fuseReads(t, url)
			m.Sh(t, "FILES='"+strings.Join(active, " ")+"'\n"+compareFiles)
			assert.Positive(t, fuseReads(t, url)-before, "the active segment is read through topicfs")
			assert.Equal(t, "10485760\n", m.Sh(t, `wc -c < $MNT/seg/0/segments/`+active[1]), "a preallocated index, as on disk")

			retentionWhileOpen(t, m, sealed[0])
		})
	}
}

// partitionSegmentFiles returns the .log, .index and .timeindex of the sealed
// segments of a partition directory and of its active segment (the last).
func partitionSegmentFiles(t *testing.T, dir string) (sealed, active []string) {
	t.Helper()
	ents, err := os.ReadDir(dir)
	require.NoError(t, err)
	var bases []string
	for _, e := range ents {
		if base, ok := strings.CutSuffix(e.Name(), ".log"); ok {
			bases = append(bases, base)
		}
	}
	slices.Sort(bases)
	require.NotEmpty(t, bases)
	for i, b := range bases {
		files := []string{b + ".log", b + ".index", b + ".timeindex"}
		if i == len(bases)-1 {
			active = files
		} else {
			sealed = append(sealed, files...)
		}
	}
	return sealed, active
}

// retentionWhileOpen opens the oldest segment's .log twice, has retention
// delete every sealed segment and unlink the files, and reads on.
func retentionWhileOpen(t *testing.T, m *mountProc, log string) {
	t.Helper()
	saved := filepath.Join(t.TempDir(), log)
	script := fmt.Sprintf(`
S=$MNT/seg/0/segments; D=$DATA/seg-0; f=%s
cp "$D/$f" %s
exec 3< "$S/$f" 4< "$S/$f"
head -c 100 <&3 > /dev/null
echo retention.bytes=1 > $MNT/seg/config
gone() { [ ! -e "$D/$f" ] && ! ls "$D" | grep -q deleted; }
for i in $(seq 1 600); do
	if gone; then break; fi
	sleep 0.05
done
if ! gone; then echo "retention left $f or a .deleted file" >&2; exit 1; fi
if ls "$S" | grep -qx "$f"; then echo "segments/ still lists $f" >&2; exit 1; fi
cmp <(tail -c +101 %[2]s) - <&3
cmp <(tail -c 3000 %[2]s) <(tail -c 3000 <&4)
`, log, saved)
	m.Sh(t, script)
}

// TestSegmentsReadOnlyCopy: a read-only mount of a copy of a data
// directory taken while its writer was running (killed here, as a copy of
// a live broker's directory looks) passes the sealed segments' files
// through and reads the active one, preallocated indexes and all, through
// topicfs; every byte as on disk.
func TestSegmentsReadOnlyCopy(t *testing.T) {
	w := startMount(t, mountOpts{Config: segmentsConfig})
	w.Sh(t, `mkdir $MNT/seg && seq 1 300000 > $MNT/seg/0/append`)
	w.Kill()
	cp := filepath.Join(t.TempDir(), "copy")
	w.Sh(t, `cp -a "$DATA" `+cp)

	m := startMount(t, mountOpts{Data: cp, ReadOnly: true, Args: []string{"--metrics-addr", "127.0.0.1:0"}})
	assert.Contains(t, m.Stderr(), "(FUSE passthrough)")
	url := metricsURL(t, m)
	sealed, active := partitionSegmentFiles(t, filepath.Join(cp, "seg-0"))
	require.NotEmpty(t, sealed)
	before := fuseReads(t, url)
	m.Sh(t, "FILES='"+strings.Join(sealed, " ")+"'\n"+compareFiles)
	assert.Zero(t, fuseReads(t, url)-before, "sealed files read by the kernel")
	m.Sh(t, "FILES='"+strings.Join(active, " ")+"'\n"+compareFiles)
	assert.Positive(t, fuseReads(t, url)-before, "the active segment read through topicfs")
	assert.Equal(t, "10485760\n", m.Sh(t, `wc -c < $MNT/seg/0/segments/`+active[1]), "the copy's preallocated index")
}

// TestSegmentsSealedWhileOpen: a descriptor opened on the active segment's
// .log, which then fills up and is sealed, reads the whole sealed file, as
// does a new cat of it while the first descriptor is still open.
func TestSegmentsSealedWhileOpen(t *testing.T) {
	for _, mode := range segmentsModes {
		t.Run(mode.name, func(t *testing.T) {
			m := startMount(t, mountOpts{Config: segmentsConfig, Args: mode.args})
			m.Sh(t, `
mkdir $MNT/seg && seq 1 1000 > $MNT/seg/0/append
f=00000000000000000000.log; S=$MNT/seg/0/segments; D=$DATA/seg-0
exec 3< "$S/$f"
head -c 10 <&3 > /dev/null
seq 1001 200000 >> $MNT/seg/0/append
[ "$(ls "$D" | grep -c '\.log$')" -ge 2 ]
cmp <(tail -c +11 "$D/$f") - <&3
cat "$S/$f" | cmp - "$D/$f"
[ "$(wc -c < "$S/$f")" = "$(stat -c %s "$D/$f")" ]
exec 3<&-
cmp "$S/$f" "$D/$f"
`)
		})
	}
}
