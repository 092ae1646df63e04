package tools

import "github.com/topicfs/topicfs/engine"

// ErrCorruptSnapshot reports a producer snapshot with an unknown version, a
// bad CRC or a size that does not match its entry count.
var ErrCorruptSnapshot = engine.ErrCorruptSnapshot

// ProducerEntry is one producer of a producer snapshot (<offset>.snapshot,
// docs/FORMATS.md §7).
type ProducerEntry = engine.ProducerEntry

// ParseProducerSnapshot decodes a producer snapshot file. Errors wrap
// ErrCorruptSnapshot and use the words of Kafka's CorruptSnapshotException.
func ParseProducerSnapshot(data []byte) ([]ProducerEntry, error) {
	return engine.ParseProducerSnapshot(data)
}
