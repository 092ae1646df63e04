package tests

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
)

// backendCase is one shell-level case that must behave the same whatever
// stores the topics: run on a new topic t of one partition,
// script (bash -euo pipefail, $MNT the mountpoint) prints want; a want
// without a final newline need only be contained in the output.
type backendCase struct {
	name   string
	script string
	want   string
}

// backendCases run against every backend (backendMounts), so the modes
// cannot drift apart.
var backendCases = []backendCase{
	{"append and cat", `printf 'a\nb\n' > $MNT/t/0/append; cat $MNT/t/0/records`, "a\nb\n"},
	{"last N offsets", `seq 1 100 > $MNT/t/0/append; cat $MNT/t/0/by-offset/-10 | tr '\n' ' '`, "91 92 93 94 95 96 97 98 99 100 "},
	{"last N beyond the log", `seq 1 3 > $MNT/t/0/append; cat $MNT/t/0/by-offset/-10 | wc -l`, "3\n"},
	{"last N moves with the log", `seq 1 5 > $MNT/t/0/append; head -1 $MNT/t/0/by-offset/-2; echo 6 >> $MNT/t/0/append; head -1 $MNT/t/0/by-offset/-2`, "4\n5\n"},
	{"last N as JSON", `echo x > $MNT/t/0/append; echo y > $MNT/t/0/append; jq -r .value $MNT/t/0/by-offset/-1.jsonl`, "y\n"},
	{"last N size at open", `seq 1 100 > $MNT/t/0/append; tail -c 7 $MNT/t/0/by-offset/-3`, "99\n100\n"},
	{"tail -n of records", `seq 1 5000 > $MNT/t/0/append; tail -n 3 $MNT/t/0/records`, "4998\n4999\n5000\n"},
	{"head of records", `seq 1 5000 > $MNT/t/0/append; head -n 2 $MNT/t/0/records`, "1\n2\n"},
	{"last N with tail", `seq 1 1000 > $MNT/t/0/append; tail -n 2 $MNT/t/0/by-offset/-5`, "999\n1000\n"},
	{"by-offset -0 is no name", `ls $MNT/t/0/by-offset/-0 2>&1 || true`, "No such file or directory"},
	{"wc of records", `seq 1 2500 > $MNT/t/0/append; wc -l < $MNT/t/0/records`, "2500\n"},
	{"grep", `printf 'apple\nbanana\ncherry\n' > $MNT/t/0/append; grep an $MNT/t/0/records`, "banana\n"},
	{"topic-level append", `echo k > $MNT/t/append; cat $MNT/t/0/records`, "k\n"},
	{"topic stats", `seq 1 3 > $MNT/t/0/append; jq -e 'type == "object"' $MNT/t/stats > /dev/null && echo ok`, "ok\n"},
	{"topic stats fields", `echo num.partitions=2 > $MNT/t/config; seq 1 3 > $MNT/t/0/append; seq 1 4 > $MNT/t/1/append; jq -c '[.partitions, .offsets, [.by_partition[] | [.partition, .log_start_offset, .log_end_offset, (.size_bytes > 0)]]]' $MNT/t/stats`, `[2,7,[[0,0,3,true],[1,0,4,true]]]` + "\n"},
	{"partition stats", `seq 1 3 > $MNT/t/0/append; jq -e 'type == "object"' $MNT/t/0/stats > /dev/null && echo ok`, "ok\n"},
	{"config line without a name or of no such config", `for l in =5 ' =5' foo.bar=1; do { echo "$l" > $MNT/t/config; } 2>/dev/null || echo refused; done; grep -c -e '^ *=' -e '^foo' $MNT/t/config || true`, "refused\nrefused\nrefused\n0\n"},
	{"longest topic name", `L=$(head -c 249 /dev/zero | tr '\0' b); mkdir $MNT/$L && echo parse.key=true > $MNT/$L/config && grep parse.key= $MNT/$L/config; { mkdir $MNT/$L 2>&1 || true; } | grep -o exists; { mkdir $MNT/${L}b 2>&1 || true; } | grep -o Invalid`, "parse.key=true\nexists\nInvalid\n"},
	{"unknown topic", `cat $MNT/nope/0/records 2>&1 || true`, "No such file or directory"},
	{"unknown partition", `cat $MNT/t/7/records 2>&1 || true`, "No such file or directory"},
	{"offset past the end", `echo a > $MNT/t/0/append; cat $MNT/t/0/by-offset/5 2>&1 || true`, "No such file or directory"},
	// Cursors (README, Cursors): each record once, head commits nothing.
	{"cursor reads each record once", `seq 1 3 > $MNT/t/0/append; cat $MNT/t/0/cursors/c; seq 4 5 > $MNT/t/0/append; cat $MNT/t/0/cursors/c; cat $MNT/t/0/cursors/c`, "1\n2\n3\n4\n5\n"},
	{"cursor head commits nothing", `seq 1 5000 > $MNT/t/0/append; head -n 2 $MNT/t/0/cursors/c; wc -l < $MNT/t/0/cursors/c; wc -l < $MNT/t/0/cursors/c`, "1\n2\n5000\n0\n"},
	{"cursor as JSON", `echo x > $MNT/t/0/append; jq -r .value $MNT/t/0/cursors/c.jsonl; echo y > $MNT/t/0/append; jq -r .value $MNT/t/0/cursors/c.jsonl`, "x\ny\n"},
	{"cursor moved by echo", `seq 1 5 > $MNT/t/0/append; echo 3 > $MNT/t/0/cursors/c; cat $MNT/t/0/cursors/c; echo earliest > $MNT/t/0/cursors/c; wc -l < $MNT/t/0/cursors/c; echo latest > $MNT/t/0/cursors/c; wc -l < $MNT/t/0/cursors/c`, "4\n5\n5\n0\n"},
	{"cursor moved by time", `seq 1 5 > $MNT/t/0/append; echo -1h > $MNT/t/0/cursors/c; wc -l < $MNT/t/0/cursors/c`, "5\n"},
	{"cursor bad position", `echo a > $MNT/t/0/append; { echo 7 > $MNT/t/0/cursors/c; } 2>&1 || echo refused; { echo nope > $MNT/t/0/cursors/c; } 2>&1 || echo refused`, "write error: Invalid argument\nrefused\nbash: line 1: echo: write error: Invalid argument\nrefused"},
	{"cursor listed and removed", `seq 1 4 > $MNT/t/0/append; echo 1 > $MNT/t/0/cursors/c; ls $MNT/t/0/cursors/ | tr '\n' ' '; ls $MNT/t/cursors/ | tr '\n' ' '; rm $MNT/t/0/cursors/c; ls $MNT/t/0/cursors/ | wc -l; rm $MNT/t/0/cursors/c 2>&1 || true`, "c c.jsonl c c.jsonl 0\nrm: cannot remove"},
	{"cursor busy", `seq 1 3 > $MNT/t/0/append; exec 3< $MNT/t/0/cursors/c; cat $MNT/t/0/cursors/c 2>&1 || true; exec 3<&-`, "Device or resource busy"},
	{"cursor starts at latest", `echo cursor.start=latest > $MNT/t/config; seq 1 3 > $MNT/t/0/append; wc -l < $MNT/t/0/cursors/c; echo 4 > $MNT/t/0/append; cat $MNT/t/0/cursors/c`, "0\n4\n"},
	{"cursor stats", `seq 1 5 > $MNT/t/0/append; echo 2 > $MNT/t/0/cursors/c; jq -c .cursors $MNT/t/0/stats; jq -c .cursors $MNT/t/stats`, "{\"c\":{\"offset\":2,\"lag\":3}}\n{\"c\":{\"offsets\":{\"0\":2},\"lag\":3}}\n"},
	// Keyed views (README, Keyed views): the latest value per key.
	{"by-key one record per open file", `exec 5> $MNT/t/by-key/k; echo a >&5; (true); /bin/true; echo b >&5; exec 5>&-; jq -c '[.key, .value]' $MNT/t/0/records.jsonl`, "[\"k\",\"a\\nb\"]\n"},
	{"by-key refused near the limit", `echo max.message.bytes=200 > $MNT/t/config; echo old > $MNT/t/by-key/k; printf '%0150d\n' 0 > $MNT/t/by-key/k 2>/dev/null || echo refused; { head -c 300 /dev/zero; echo after; } > $MNT/t/by-key/k 2>/dev/null || echo refused; truncate -s 2M $MNT/t/by-key/new 2>/dev/null || echo refused; cat $MNT/t/by-key/k; cat $MNT/t/by-key/new 2>/dev/null || echo none; wc -l < $MNT/t/0/records`, "refused\nrefused\nrefused\nold\nnone\n1\n"},
	{"cursor globs", `seq 1 3 > $MNT/t/0/append; cat $MNT/t/*/records | wc -l; ls $MNT/t/0/cursors | wc -l; echo 1 > $MNT/t/0/cursors/stats; cat $MNT/t/0/cursors/stats`, "3\n0\n2\n3\n"},
	{"by-key reads the latest value", `echo parse.key=true > $MNT/t/config; printf 'a\t1\nb\t2\na\t3\n' > $MNT/t/append; cat $MNT/t/by-key/a; cat $MNT/t/by-key/b`, "3\n2\n"},
	{"by-key write and read back", `echo hello > $MNT/t/by-key/k; cat $MNT/t/by-key/k; echo again > $MNT/t/by-key/k; cat $MNT/t/by-key/k; jq -r .key $MNT/t/0/by-offset/-1.jsonl`, "hello\nagain\nk\n"},
	{"by-key ls and rm", `echo 1 > $MNT/t/by-key/x; echo 2 > $MNT/t/by-key/y; ls $MNT/t/by-key | tr '\n' ' '; rm $MNT/t/by-key/x; ls $MNT/t/by-key | tr '\n' ' '; cat $MNT/t/by-key/x 2>/dev/null || echo gone`, "x y y gone\n"},
	{"by-key name naming no key", `{ echo v > "$MNT/t/by-key/50%"; } 2>&1 || true; ls "$MNT/t/by-key/50%" 2>&1 || true`, "Invalid argument\nls: cannot access"},
	{"by-key absent key", `cat $MNT/t/by-key/none 2>&1 || true; rm $MNT/t/by-key/none 2>&1 || true`, "No such file or directory\nrm: cannot remove"},
	{"by-key escaped names", `printf 'a/b\x01v\n' | tr '\001' '\t' > /dev/null; echo v > "$MNT/t/by-key/a%2Fb"; echo w > "$MNT/t/by-key/%2E"; ls $MNT/t/by-key | tr '\n' ' '; cat "$MNT/t/by-key/a%2fb"`, "%2E a%2Fb v\n"},
	{"by-key empty value", `echo a > $MNT/t/by-key/k; : > $MNT/t/by-key/k; stat -c %s $MNT/t/by-key/k; touch $MNT/t/by-key/new; cat $MNT/t/by-key/new | wc -c`, "1\n1\n"},
	{"by-key size and append", `echo abc > $MNT/t/by-key/k; stat -c %s $MNT/t/by-key/k; echo def >> $MNT/t/by-key/k; cat $MNT/t/by-key/k`, "4\nabc\ndef\n"},
	{"by-key one record per echo", `echo a > $MNT/t/by-key/k; echo b > $MNT/t/by-key/k; : > $MNT/t/by-key/k; jq -c '[.key, .value]' $MNT/t/0/records.jsonl`, "[\"k\",\"a\"]\n[\"k\",\"b\"]\n[\"k\",\"\"]\n"},
	{"by-key refused write keeps the value", `echo precious > $MNT/t/by-key/k; head -c 2000000 /dev/zero > $MNT/t/by-key/k 2>/dev/null || echo refused; cat $MNT/t/by-key/k; wc -l < $MNT/t/0/records`, "refused\nprecious\n1\n"},
	{"by-key edited in place", `echo abcdef > $MNT/t/by-key/k; printf X | dd of=$MNT/t/by-key/k bs=1 seek=2 conv=notrunc 2>/dev/null; cat $MNT/t/by-key/k; truncate -s 3 $MNT/t/by-key/k; cat $MNT/t/by-key/k`, "abXdef\nabX\n"},
	{"by-key read and write", `echo abc > $MNT/t/by-key/k; exec 3<> $MNT/t/by-key/k; head -c 2 <&3; exec 3>&-; echo; exec 6< $MNT/t/by-key/k; echo secondlonger > $MNT/t/by-key/k; stat -c %s $MNT/t/by-key/k; exec 6<&-`, "ab\n13\n"},
	{"topic cursor", `echo num.partitions=2 > $MNT/t/config; printf '1\n2\n' > $MNT/t/0/append; echo 3 > $MNT/t/1/append; cat $MNT/t/cursors/c; echo 4 > $MNT/t/1/append; cat $MNT/t/cursors/c; cat $MNT/t/1/cursors/c | wc -l`, "1\n2\n3\n4\n0\n"},
}

// backendMounts starts one mount per backend: a data directory, and a
// kfake cluster of three brokers.
func backendMounts(t *testing.T) map[string]*mountProc {
	kc := startKfake(t)
	return map[string]*mountProc{
		"local":   startMount(t, mountOpts{}),
		"cluster": startMount(t, clusterMountOpts(t, kc, "")),
	}
}

// TestSameTreeOnEveryBackend runs backendCases against every backend, each
// case on a fresh topic.
func TestSameTreeOnEveryBackend(t *testing.T) {
	for name, m := range backendMounts(t) {
		t.Run(name, func(t *testing.T) {
			for i, c := range backendCases {
				t.Run(c.name, func(t *testing.T) {
					topic := "t" + strings.Repeat("x", i)
					m.Sh(t, `mkdir "$MNT/`+topic+`"`)
					script := strings.ReplaceAll(c.script, "$MNT/t/", "$MNT/"+topic+"/")
					got := m.Sh(t, script)
					if strings.HasSuffix(c.want, "\n") {
						assert.Equal(t, c.want, got)
					} else {
						assert.Contains(t, got, c.want)
					}
				})
			}
		})
	}
}
