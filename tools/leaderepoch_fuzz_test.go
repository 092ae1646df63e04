package tools

import (
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// FuzzParseLeaderEpochs feeds arbitrary bytes to the leader-epoch-checkpoint
// parser. It must never panic; what it accepts has as many entries as its
// count line says, and written back in Kafka's form ("0", count, then
// "epoch offset" lines) parses to the same entries.
func FuzzParseLeaderEpochs(f *testing.F) {
	for _, s := range []string{"", "0\n", "0\n0\n", "0\n2\n0 0\n3 1500\n", "1\n0\n", "0\n1\n0 0 0\n",
		"0\n1\n2147483648 0\n", "0\n-1\n", "0\n1\n\t5   7 \n", "0\n\n"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		entries, err := parseLeaderEpochs(data)
		if err != nil {
			return
		}
		if len(entries) == 0 {
			return
		}
		var b strings.Builder
		fmt.Fprintf(&b, "0\n%d\n", len(entries))
		for _, e := range entries {
			fmt.Fprintf(&b, "%d %d\n", e[0], e[1])
		}
		back, err := parseLeaderEpochs([]byte(b.String()))
		require.NoError(t, err, "%q", b.String())
		require.Equal(t, entries, back)
	})
}
