package index

import (
	"bytes"
	"os"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/topicfs/topicfs/engine/vfs"
)

// FuzzTxnIndex opens arbitrary bytes as a .txnindex. OpenTxnIndex must
// never panic; an index it accepts holds one entry per whole 34-byte entry
// of the file (a partial tail ignored), with a version Kafka reads (its
// high byte, at most the current version), and those entries encode back
// to the file's bytes after the version field (which is not kept).
func FuzzTxnIndex(f *testing.F) {
	entry := func(pid, first, last, lso int64) []byte {
		b := make([]byte, TxnEntrySize)
		encodeTxnEntry(b, AbortedTxn{ProducerID: pid, FirstOffset: first, LastOffset: last, LastStableOffset: lso})
		return b
	}
	f.Add([]byte{})
	f.Add(entry(7, 10, 20, 21))
	f.Add(append(entry(7, 10, 20, 21), entry(8, 22, 30, 31)...))
	f.Add(append(entry(1, 2, 3, 4), 0, 0, 1))
	bad := entry(1, 2, 3, 4)
	bad[0] = 1
	f.Add(bad)
	f.Fuzz(func(t *testing.T, data []byte) {
		mem := vfs.NewMem()
		require.NoError(t, mem.MkdirAll("/d", 0o755))
		file, err := mem.OpenFile("/d/0.txnindex", os.O_CREATE|os.O_RDWR, 0o644)
		require.NoError(t, err)
		_, err = file.WriteAt(data, 0)
		require.NoError(t, err)
		require.NoError(t, file.Close())
		x, err := OpenTxnIndex(mem, "/d/0.txnindex")
		if err != nil {
			require.ErrorIs(t, err, ErrCorruptIndex)
			return
		}
		all := x.All()
		require.Len(t, all, len(data)/TxnEntrySize)
		var out []byte
		for _, e := range all {
			b := make([]byte, TxnEntrySize)
			encodeTxnEntry(b, e)
			out = append(out, b...)
		}
		for i := 0; i < len(all); i++ {
			e := data[i*TxnEntrySize : (i+1)*TxnEntrySize]
			require.LessOrEqual(t, int8(e[0]), int8(txnVersion), "entry %d", i)
			require.True(t, bytes.Equal(e[2:], out[i*TxnEntrySize+2:(i+1)*TxnEntrySize]), "entry %d", i)
		}
	})
}
