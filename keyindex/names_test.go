package keyindex

import (
	"bytes"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestNames(t *testing.T) {
	for key, name := range map[string]string{
		"user-1": "user-1", "a/b": "a%2Fb", "50%": "50%25", "": "%", ".": "%2E", "..": "%2E%2E",
		"...": "...", "a\x00b": "a%00b", "line\n": "line%0A", "tab\there": "tab%09here", "é": "é",
	} {
		assert.Equal(t, name, Name([]byte(key)), "key %q", key)
		ref, err := ParseName(name)
		require.NoError(t, err)
		assert.Equal(t, key, string(ref.Key))
	}
	ref, err := ParseName("%41%2f")
	require.NoError(t, err)
	assert.Equal(t, "A/", string(ref.Key), "any %XX decodes, either case")
	for _, bad := range []string{"50%", "%4", "%zz", "%sha256-00", "%sha256-" + strings.Repeat("g", 64)} {
		_, err := ParseName(bad)
		assert.ErrorIs(t, err, ErrBadName, "name %q", bad)
	}
	long := bytes.Repeat([]byte("/"), 100) // 300 bytes escaped
	name := Name(long)
	assert.True(t, strings.HasPrefix(name, "%sha256-"))
	assert.Len(t, name, len("%sha256-")+64)
	ref, err = ParseName(name)
	require.NoError(t, err)
	assert.True(t, ref.matches(long))
	assert.False(t, ref.matches(long[1:]))
	assert.Equal(t, 255, escapedLen(bytes.Repeat([]byte("a"), 255)))
	assert.False(t, strings.HasPrefix(Name(bytes.Repeat([]byte("a"), 255)), "%"), "255 bytes still fit a name")
}

// FuzzNames: every key has a name a file can have, and the name leads back
// to the key and to no other.
func FuzzNames(f *testing.F) {
	for _, s := range []string{"", ".", "..", "a/b", "%", "%2F", "\x00", strings.Repeat("%", 90)} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, key []byte) {
		name := Name(key)
		if name == "" || name == "." || name == ".." || len(name) > MaxNameLen || strings.ContainsAny(name, "/\x00") {
			t.Fatalf("key %q: bad file name %q", key, name)
		}
		ref, err := ParseName(name)
		if err != nil {
			t.Fatalf("key %q: name %q does not parse: %v", key, name, err)
		}
		if !ref.matches(key) {
			t.Fatalf("key %q: name %q names another key", key, name)
		}
		if ref.Digest == nil && !bytes.Equal(ref.Key, key) {
			t.Fatalf("key %q: name %q decodes to %q", key, name, ref.Key)
		}
	})
}

// FuzzParseName: any name either fails with ErrBadName or names a key
// whose own name parses to the same key.
func FuzzParseName(f *testing.F) {
	for _, s := range []string{"%", "%2", "%2F", "%sha256-", "a%zzb", "%%"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, name string) {
		ref, err := ParseName(name)
		if err != nil {
			return
		}
		if ref.Digest != nil {
			return
		}
		back, err := ParseName(Name(ref.Key))
		if err != nil || !back.matches(ref.Key) {
			t.Fatalf("name %q: key %q does not round-trip (%v)", name, ref.Key, err)
		}
	})
}
