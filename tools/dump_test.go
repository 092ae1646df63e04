package tools

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestJavaString(t *testing.T) {
	tests := []struct {
		in   []byte
		want string
	}{
		{[]byte("plain"), "plain"},
		{[]byte("h\u00e9llo \u20ac"), "h\u00e9llo \u20ac"},
		{[]byte{0xff}, "\ufffd"},
		{[]byte{'a', 0x80, 'b'}, "a\ufffdb"},
		{[]byte{0xe2, 0x82, 'A'}, "\ufffdA"},             // truncated 3-byte sequence: one replacement
		{[]byte{0xe2, 0x82}, "\ufffd"},                   // truncated at the end
		{[]byte{0xf0, 0x9f, 0x98}, "\ufffd"},             // truncated 4-byte sequence
		{[]byte{0xe0, 0x80, 0x80}, "\ufffd\ufffd\ufffd"}, // overlong: E0 needs A0..BF next
		{[]byte{0xed, 0xa0, 0x80}, "\ufffd\ufffd\ufffd"}, // surrogate
		{[]byte{0xc0, 0xaf}, "\ufffd\ufffd"},             // C0 is never a lead byte
		{[]byte{0xf4, 0x90, 0x80, 0x80}, "\ufffd\ufffd\ufffd\ufffd"},
	}
	for _, tt := range tests {
		assert.Equal(t, tt.want, javaString(tt.in), "% x", tt.in)
	}
}
