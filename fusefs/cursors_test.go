package fusefs

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestCursorName(t *testing.T) {
	for _, c := range []struct {
		entry, name string
		jsonl, ok   bool
	}{
		{"billing", "billing", false, true},
		{"billing.jsonl", "billing", true, true},
		{"a.b_c-D9", "a.b_c-D9", false, true},
		{strings.Repeat("c", 249), strings.Repeat("c", 249), false, true},
		{strings.Repeat("c", 250), "", false, false},
		{"", "", false, false},
		{".jsonl", "", false, false},
		{".", "", false, false},
		{"..", "", false, false},
		{"x.jsonl.jsonl", "", false, false},
		{"a b", "", false, false},
		{"a/b", "", false, false},
		{"é", "", false, false},
	} {
		name, jsonl, ok := cursorName(c.entry)
		assert.Equal(t, c.ok, ok, c.entry)
		if c.ok {
			assert.Equal(t, c.name, name, c.entry)
			assert.Equal(t, c.jsonl, jsonl, c.entry)
		}
	}
}

func TestSpliceField(t *testing.T) {
	for _, in := range []string{"{\n  \"a\": 1\n}\n", "{}\n", "{\n}", "{\"a\":{\"b\":2}}"} {
		out, err := spliceField([]byte(in), "cursors", map[string]cursorStat{"c": {Offset: 2, Lag: 3}})
		require.NoError(t, err)
		var m map[string]any
		require.NoError(t, json.Unmarshal(out, &m), string(out))
		assert.Equal(t, map[string]any{"c": map[string]any{"offset": 2.0, "lag": 3.0}}, m["cursors"], in)
		var orig map[string]any
		require.NoError(t, json.Unmarshal([]byte(in), &orig))
		for k, v := range orig {
			assert.Equal(t, v, m[k], "field %s kept", k)
		}
	}
	out, err := spliceField([]byte("[1]\n"), "cursors", 1)
	require.NoError(t, err)
	assert.Equal(t, "[1]\n", string(out), "not an object: unchanged")
}
