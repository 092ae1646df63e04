package record

import (
	"fmt"
	"strings"
)

// Codec is a compression codec id, stored in attribute bits 0-2. Part of the
// format; never renumber.
type Codec int8

// Codecs (CompressionType ids in Kafka).
const (
	None   Codec = 0
	Gzip   Codec = 1
	Snappy Codec = 2
	LZ4    Codec = 3
	Zstd   Codec = 4
)

// ParseCodec maps a compression.type name ("none" or "uncompressed", "gzip",
// "snappy", "lz4", "zstd"; case-insensitive) to its Codec.
func ParseCodec(name string) (Codec, error) {
	switch strings.ToLower(strings.TrimSpace(name)) {
	case "none", "uncompressed":
		return None, nil
	case "gzip":
		return Gzip, nil
	case "snappy":
		return Snappy, nil
	case "lz4":
		return LZ4, nil
	case "zstd":
		return Zstd, nil
	}
	return None, fmt.Errorf("%w: compression type %q", ErrUnsupported, name)
}

// String returns Kafka's name of the codec ("none", "gzip", "snappy", "lz4",
// "zstd"), as DumpLogSegments prints it, or "unknown(N)".
func (c Codec) String() string {
	switch c {
	case None:
		return "none"
	case Gzip:
		return "gzip"
	case Snappy:
		return "snappy"
	case LZ4:
		return "lz4"
	case Zstd:
		return "zstd"
	}
	return fmt.Sprintf("unknown(%d)", int8(c))
}

// valid reports whether c is one of the five known codecs.
func (c Codec) valid() bool { return c >= None && c <= Zstd }
