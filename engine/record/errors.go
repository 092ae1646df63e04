package record

import "errors"

// Sentinel errors. Callers test with errors.Is; this package wraps them with
// context (offset, position, field).
var (
	// ErrCorrupt reports bytes that fail a CRC or a structural check.
	ErrCorrupt = errors.New("record: corrupt batch")
	// ErrTruncated reports a header or body that runs past the end of the data.
	ErrTruncated = errors.New("record: truncated batch")
	// ErrUnsupported reports a valid but unsupported feature (e.g. an unknown codec).
	ErrUnsupported = errors.New("record: unsupported")
)

const (
	// HeaderSize is the size of a v2 RecordBatch header (offset..recordsCount).
	HeaderSize = 61
	// LogOverhead is the size of the offset (8) and length/size (4) fields that
	// precede every entry of a .log file.
	LogOverhead = 12
)
