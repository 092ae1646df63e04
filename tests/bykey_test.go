package tests

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sort"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kgo"
)

// TestByKeySpillsAndLongKeys: with the smallest key.index.memory.bytes the
// index of 5,000 keys over two partitions spills to a file and still
// answers every key; a key too long for a file name is reachable by its
// digest name.
func TestByKeySpillsAndLongKeys(t *testing.T) {
	m := startMount(t, mountOpts{Config: "\"key.index.memory.bytes\" = 16384\n"})
	long := strings.Repeat("L", 300)
	out := m.Sh(t, `mkdir $MNT/u && printf 'parse.key=true\nnum.partitions=2\n' > $MNT/u/config
seq 1 5000 | sed 's/.*/k&\tv&/' > $MNT/u/append
printf '`+long+`\tlongvalue\n' > $MNT/u/append
cat $MNT/u/by-key/k4321 $MNT/u/by-key/k1
ls $MNT/u/by-key | wc -l
name=$(ls $MNT/u/by-key | grep '^%sha256-'); echo "$name" | wc -c
cat "$MNT/u/by-key/$name"
test "$name" = "%sha256-$(printf %s '`+long+`' | sha256sum | cut -d' ' -f1)" && echo digest ok
jq -r '.key_index.spilled' $MNT/u/0/stats $MNT/u/1/stats
{ echo x > "$MNT/u/by-key/$name"; } 2>&1 || true
rm "$MNT/u/by-key/$name"; ls $MNT/u/by-key | wc -l`)
	assert.Equal(t, "v4321\nv1\n5001\n73\nlongvalue\ndigest ok\ntrue\ntrue\n", out[:strings.Index(out, "true\ntrue\n")+10])
	assert.Contains(t, out, "Invalid argument")
	assert.True(t, strings.HasSuffix(out, "5000\n"), out)
	assert.Contains(t, m.Stderr(), "key index: built")
}

// TestByKeyReadOnly: a read-only mount reads keys and refuses to change
// them.
func TestByKeyReadOnly(t *testing.T) {
	m := startMount(t, mountOpts{})
	m.Sh(t, `mkdir $MNT/u && echo v > $MNT/u/by-key/k`)
	m.Stop()
	ro := startMount(t, mountOpts{Data: m.Data, ReadOnly: true})
	out := ro.Sh(t, `cat $MNT/u/by-key/k; ls $MNT/u/by-key; { echo w > $MNT/u/by-key/k; } 2>&1 || true; rm $MNT/u/by-key/k 2>&1 || true; cat $MNT/u/by-key/k`)
	assert.Equal(t, 2, countOf(out, "Read-only file system"), out)
	assert.True(t, strings.HasPrefix(out, "v\nk\n"), out)
	assert.True(t, strings.HasSuffix(out, "v\n"), out)
}

// TestByKeySeesOtherClients: in cluster mode by-key/ follows records any
// client produces (here franz-go, sharing no code with topicfs), and what
// topicfs writes through by-key/ is what that client reads.
func TestByKeySeesOtherClients(t *testing.T) {
	kc := startKfake(t)
	m := startMount(t, clusterMountOpts(t, kc, ""))
	m.Sh(t, `mkdir $MNT/t && echo num.partitions=3 > $MNT/t/config`)
	cl := kafkaClient(t, kc, kgo.DefaultProduceTopic("t"))
	ctx := context.Background()
	produce := func(k, v string) {
		r := &kgo.Record{Key: []byte(k), Value: []byte(v)}
		if v == "" {
			r.Value = nil
		}
		require.NoError(t, cl.ProduceSync(ctx, r).FirstErr())
	}
	for i := range 30 {
		produce(fmt.Sprint("k", i%10), fmt.Sprint("v", i))
	}
	produce("k3", "")
	out := m.Sh(t, `cat $MNT/t/by-key/k0 $MNT/t/by-key/k9; cat $MNT/t/by-key/k3 2>/dev/null || echo gone; ls $MNT/t/by-key | wc -l`)
	assert.Equal(t, "v20\nv29\ngone\n9\n", out)
	produce("k0", "later")
	m.Sh(t, `echo fromfs > $MNT/t/by-key/k5`)
	assert.Equal(t, "later\nfromfs\n", m.Sh(t, `cat $MNT/t/by-key/k0 $MNT/t/by-key/k5`))

	consumer := kafkaClient(t, kc, kgo.ConsumeTopics("t"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	last := map[string]string{}
	for n := 0; n < 33; {
		fs := consumer.PollFetches(ctx)
		require.NoError(t, fs.Err())
		fs.EachRecord(func(r *kgo.Record) {
			last[string(r.Key)] = string(r.Value)
			n++
		})
	}
	assert.Equal(t, "fromfs", last["k5"], "the value written through by-key/ is a record other clients read")
}

// TestByKeyMatchesModel drives by-key/ with random writes, appends, rm and
// reads through the shell and compares every answer and the listing with
// a map.
func TestByKeyMatchesModel(t *testing.T) {
	m := startMount(t, mountOpts{})
	m.Sh(t, `mkdir $MNT/t && echo num.partitions=3 > $MNT/t/config`)
	rng := rand.New(rand.NewPCG(5, 6))
	model := map[string]string{}
	keys := []string{"a", "b", "c", "d/e", "%", ".", "..", "x y", "sp\tc"}
	for round := range 8 {
		var script, want strings.Builder
		for range 25 {
			k := keys[rng.IntN(len(keys))]
			path := "$MNT/t/by-key/'" + nameOf(k) + "'"
			switch op := rng.IntN(4); op {
			case 0, 1:
				v := fmt.Sprint("v", round, rng.IntN(1000))
				fmt.Fprintf(&script, "echo %s > %s\n", v, path)
				model[k] = v
			case 2:
				if _, ok := model[k]; ok {
					fmt.Fprintf(&script, "echo more >> %s\n", path)
					model[k] += "\nmore"
				}
			case 3:
				fmt.Fprintf(&script, "rm %s 2>/dev/null || echo absent\n", path)
				if _, ok := model[k]; !ok {
					want.WriteString("absent\n")
				}
				delete(model, k)
			}
			fmt.Fprintf(&script, "cat %s 2>/dev/null || echo none\n", path)
			if v, ok := model[k]; ok {
				want.WriteString(v + "\n")
			} else {
				want.WriteString("none\n")
			}
		}
		script.WriteString("ls $MNT/t/by-key | sort | tr '\\n' '|'\n")
		var names []string
		for k := range model {
			names = append(names, nameOf(k))
		}
		sort.Strings(names)
		for _, n := range names {
			want.WriteString(n + "|")
		}
		require.Equal(t, want.String(), m.Sh(t, script.String()), "round %d", round)
	}
}

// nameOf is the by-key/ name of the test's keys (README, by-key).
func nameOf(k string) string {
	switch k {
	case ".":
		return "%2E"
	case "..":
		return "%2E%2E"
	}
	r := strings.NewReplacer("%", "%25", "/", "%2F", "\t", "%09")
	return r.Replace(k)
}

// TestByKeyTopicRecreated: a topic deleted and made again under the same
// name starts with an empty table.
func TestByKeyTopicRecreated(t *testing.T) {
	m := startMount(t, mountOpts{})
	out := m.Sh(t, `mkdir $MNT/t && echo 1 > $MNT/t/by-key/a && cat $MNT/t/by-key/a && rmdir $MNT/t && mkdir $MNT/t
cat $MNT/t/by-key/a 2>/dev/null || echo none; ls $MNT/t/by-key | wc -l; echo 2 > $MNT/t/by-key/a; cat $MNT/t/by-key/a`)
	assert.Equal(t, "1\nnone\n0\n2\n", out)
}

// TestByKeyTablesBuiltAtMount: a compacted topic's key index is built when
// the mount starts, before any by-key/ read (stats shows it once open).
func TestByKeyTablesBuiltAtMount(t *testing.T) {
	m := startMount(t, mountOpts{})
	m.Sh(t, `mkdir $MNT/t $MNT/plain && printf 'cleanup.policy=compact\nparse.key=true\n' > $MNT/t/config
seq 1 300 | sed 's/.*/k&\tv&/' > $MNT/t/append; echo x > $MNT/plain/append`)
	m.Stop()
	m2 := startMount(t, mountOpts{Data: m.Data})
	out := m2.Sh(t, `until jq -e .key_index $MNT/t/0/stats > /dev/null; do sleep 0.05; done
until [ "$(jq .key_index.indexed_to $MNT/t/0/stats)" = 300 ]; do sleep 0.05; done
jq -c '.key_index | [.live_keys, .spilled]' $MNT/t/0/stats; jq -c .key_index $MNT/plain/0/stats`)
	assert.Equal(t, "[300,false]\nnull\n", out, "the plain topic's index is not built until used")
	assert.Contains(t, m2.Stderr(), "key index: built")
}
