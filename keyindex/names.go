package keyindex

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
)

// MaxNameLen is the longest file name Linux takes (NAME_MAX).
const MaxNameLen = 255

// digestPrefix starts the name of a key whose escaped form is longer than
// MaxNameLen: the SHA-256 of the key in hex follows.
const digestPrefix = "%sha256-"

// emptyName is the name of the empty key.
const emptyName = "%"

// ErrBadName reports a by-key name that names no key: a '%' not followed by
// two hex digits (or the digest form), or a name that is not the canonical
// form of a key and cannot be decoded.
var ErrBadName = errors.New("keyindex: not a key name")

// Ref names a key as a by-key file name does: the key itself, or, for a
// key too long for a name, its SHA-256.
type Ref struct {
	Key    []byte
	Digest *[sha256.Size]byte // set for the %sha256- form; Key is then nil
}

// escaped reports whether byte c is written as %XX in a name: the escape
// character itself, '/', NUL and the other control characters (a newline
// in a name breaks `ls | while read`).
func escaped(c byte) bool { return c == '%' || c == '/' || c < 0x20 || c == 0x7f }

// escapedLen is the length of key's escaped name, before the long-key rule.
func escapedLen(key []byte) int {
	n := len(key)
	for _, c := range key {
		if escaped(c) {
			n += 2
		}
	}
	return n
}

// long reports whether key is named by its digest.
func long(key []byte) bool { return escapedLen(key) > MaxNameLen }

// Name returns the file name of key in by-key/: the key, with '%', '/' and
// control characters written %XX (upper-case hex); "." and ".." as %2E and
// %2E%2E; the empty key as "%"; and a key whose name would pass 255 bytes
// as %sha256-<64 hex digits of its SHA-256>.
func Name(key []byte) string {
	switch {
	case len(key) == 0:
		return emptyName
	case string(key) == ".":
		return "%2E"
	case string(key) == "..":
		return "%2E%2E"
	case long(key):
		d := sha256.Sum256(key)
		return digestPrefix + hex.EncodeToString(d[:])
	}
	var b strings.Builder
	b.Grow(escapedLen(key))
	for _, c := range key {
		if escaped(c) {
			fmt.Fprintf(&b, "%%%02X", c)
		} else {
			b.WriteByte(c)
		}
	}
	return b.String()
}

// ParseName returns the key a by-key file name names. Any %XX is decoded
// (so "%41" names "A", whose own name is "A"); a '%' that starts no escape
// is ErrBadName.
func ParseName(name string) (Ref, error) {
	switch {
	case name == emptyName:
		return Ref{Key: []byte{}}, nil
	case len(name) >= len(digestPrefix) && strings.EqualFold(name[:len(digestPrefix)], digestPrefix):
		h := name[len(digestPrefix):]
		var d [sha256.Size]byte
		if len(h) != 2*sha256.Size {
			return Ref{}, fmt.Errorf("%w: %q: want %s and 64 hex digits", ErrBadName, name, digestPrefix)
		}
		if _, err := hex.Decode(d[:], []byte(h)); err != nil {
			return Ref{}, fmt.Errorf("%w: %q: %v", ErrBadName, name, err)
		}
		return Ref{Digest: &d}, nil
	}
	key := make([]byte, 0, len(name))
	for i := 0; i < len(name); i++ {
		c := name[i]
		if c != '%' {
			key = append(key, c)
			continue
		}
		if i+2 >= len(name) {
			return Ref{}, fmt.Errorf("%w: %q: %% at %d starts no %%XX escape", ErrBadName, name, i)
		}
		var v [1]byte
		if _, err := hex.Decode(v[:], []byte(name[i+1:i+3])); err != nil {
			return Ref{}, fmt.Errorf("%w: %q: %% at %d starts no %%XX escape", ErrBadName, name, i)
		}
		key = append(key, v[0])
		i += 2
	}
	return Ref{Key: key}, nil
}

// matches reports whether key is the key r names.
func (r Ref) matches(key []byte) bool {
	if key == nil {
		return false
	}
	if r.Digest != nil {
		return long(key) && sha256.Sum256(key) == *r.Digest
	}
	return bytes.Equal(key, r.Key)
}

// String names the key in logs and errors.
func (r Ref) String() string {
	if r.Digest != nil {
		return digestPrefix + hex.EncodeToString(r.Digest[:])
	}
	return Name(r.Key)
}
