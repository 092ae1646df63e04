package fusefs

import (
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/topicfs/topicfs/engine/record"
)

// fakeLog records appends and fails them on demand.
type fakeLog struct {
	partitionLog // only Append is used
	fail         error
	got          []string
}

func (f *fakeLog) Append(recs []record.Record) (int64, int64, error) {
	if f.fail != nil {
		return 0, 0, f.fail
	}
	for _, r := range recs {
		f.got = append(f.got, string(r.Value))
	}
	return 0, int64(len(recs)) - 1, nil
}

func newTestHandle(p partitionLog, maxMessage int64) *appendHandle {
	return &appendHandle{
		fsys: newFsys(nil, Options{}), fixed: 0, fixedLog: p,
		maxMessage: maxMessage, checkSize: true, batchSize: 1 << 20,
	}
}

func TestAppendHandleFramingAndErrors(t *testing.T) {
	p := &fakeLog{}
	h := newTestHandle(p, 100)
	write := func(s string) syscall.Errno {
		n, errno := h.write([]byte(s))
		if errno == 0 {
			require.Equal(t, uint32(len(s)), n)
		}
		return errno
	}
	require.Zero(t, write("a\nbe"))
	require.Zero(t, write("gin\nmid"))
	assert.Equal(t, []string{"a", "begin"}, p.got, "lines split across writes are whole records")

	// A failing write leaves no trace; a retry of the same bytes continues.
	p.fail = syscall.ENOSPC
	assert.Equal(t, syscall.ENOSPC, write("dle\nnext\n"))
	p.fail = nil
	require.Zero(t, write("dle\nnext\n"))
	assert.Equal(t, []string{"a", "begin", "middle", "next"}, p.got)

	// A line begun before a failed write is not committed at close.
	require.Zero(t, write("torn-"))
	p.fail = syscall.ENOSPC
	assert.Equal(t, syscall.ENOSPC, write("rest\n"))
	p.fail = nil
	assert.Zero(t, h.flush())
	assert.Equal(t, []string{"a", "begin", "middle", "next"}, p.got, "no torn record")

	// A final line without '\n' is a record at close.
	require.Zero(t, write("last"))
	assert.Zero(t, h.flush())
	assert.Equal(t, "last", p.got[len(p.got)-1])

	// Too long: refused up to the end of the line, nothing applied.
	n := len(p.got)
	long := string(make([]byte, 150))
	assert.Equal(t, syscall.EMSGSIZE, write(long[:60]+"\n"+long[:20]), "a complete line over max.message.bytes")
	assert.Equal(t, syscall.EMSGSIZE, write(long), "an unterminated line that can never fit")
	assert.Equal(t, syscall.EMSGSIZE, write(long), "the rest of it")
	assert.Equal(t, syscall.EMSGSIZE, write("end\nlost\n"), "the write ending the long line is refused too")
	require.Zero(t, write("ok\n"))
	assert.Equal(t, []string{"ok"}, p.got[n:])
	assert.Zero(t, h.flush())
}

func TestRecordSizeMatchesEncoder(t *testing.T) {
	for _, r := range []record.Record{
		{Value: []byte("v")},
		{Key: []byte("key"), Value: make([]byte, 300)},
		{Value: nil, Headers: []record.Header{{Key: "h", Value: []byte("x")}, {Key: "n", Value: nil}}},
		{Key: []byte{}, Value: make([]byte, 70000)},
	} {
		b, err := record.Encode(nil, record.NewBatchSpec(0), []record.Record{r})
		require.NoError(t, err)
		assert.Equal(t, int64(len(b)), recordSize(&r))
	}
}
