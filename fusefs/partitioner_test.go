package fusefs

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

// Vectors from Kafka's UtilsTest.testMurmur2.
func TestMurmur2KafkaVectors(t *testing.T) {
	tests := []struct {
		name string
		in   []byte
		want int32
	}{
		{"21", []byte("21"), -973932308},
		{"foobar", []byte("foobar"), -790332482},
		{"a-little-bit-long-string", []byte("a-little-bit-long-string"), -985981536},
		{"a-little-bit-longer-string", []byte("a-little-bit-longer-string"), -1486304829},
		{"long", []byte("lkjh234lh9fiuh90y23oiuhsafujhadof229phr9h19h89h8"), -58897971},
		{"abc", []byte{'a', 'b', 'c'}, 479470107},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.want, murmur2(tt.in))
		})
	}
}

func TestPartitionForKey(t *testing.T) {
	// toPositive clears the sign bit: -973932308 & 0x7fffffff = 1173551340.
	assert.Equal(t, int32(1173551340), toPositive(murmur2([]byte("21"))))
	assert.Equal(t, 1173551340%7, partitionForKey([]byte("21"), 7))
	for n := 1; n < 20; n++ {
		p := partitionForKey([]byte("foobar"), n)
		assert.True(t, p >= 0 && p < n)
	}
}
