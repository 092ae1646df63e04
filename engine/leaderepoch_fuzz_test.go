package engine

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// FuzzParseLeaderEpochCheckpoint feeds arbitrary bytes to the
// leader-epoch-checkpoint parser (the engine's and topicfs check's). It
// must never panic; what it accepts has epochs and offsets in order, and
// written back in Kafka's form parses to the same entries.
func FuzzParseLeaderEpochCheckpoint(f *testing.F) {
	for _, s := range []string{"", "0\n", "0\n0\n", "0\n2\n0 0\n3 1500\n", "1\n0\n", "0\n1\n0 0 0\n",
		"0\n1\n2147483648 0\n", "0\n-1\n", "0\n1\n\t5   7 \n", "0\n\n", "0\r\n1\r\n4 9\r\n", "0\n2\n3 5\n1 7\n"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		entries, err := ParseLeaderEpochCheckpoint(data)
		if err != nil {
			require.ErrorIs(t, err, ErrCorrupt)
			return
		}
		for i := 1; i < len(entries); i++ {
			require.Greater(t, entries[i].Epoch, entries[i-1].Epoch)
			require.GreaterOrEqual(t, entries[i].StartOffset, entries[i-1].StartOffset)
		}
		back, err := ParseLeaderEpochCheckpoint(FormatLeaderEpochCheckpoint(entries))
		require.NoError(t, err)
		require.Equal(t, len(entries), len(back))
		for i := range entries {
			require.Equal(t, entries[i], back[i])
		}
	})
}
