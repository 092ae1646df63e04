package engine

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"slices"
	"strconv"
	"strings"

	"github.com/topicfs/topicfs/engine/vfs"
)

// TopicPartition names one partition in a checkpoint file.
type TopicPartition struct {
	Topic     string
	Partition int
}

// checkpointVersion is the only version of Kafka's offset checkpoint files.
const checkpointVersion = 0

// Offset checkpoint file (recovery-point-offset-checkpoint,
// log-start-offset-checkpoint, cleaner-offset-checkpoint), UTF-8 text, each
// line ending in "\n", entries in any order:
//
//	0                         version
//	2                         entry count
//	orders 0 1234             topic SP partition SP offset (fields split on \s+)
//	__consumer_offsets 28 2
//
// An empty file, or one holding only the version line, has no entries.

// ReadCheckpoint reads an offset checkpoint file. A missing or empty file is
// an empty map. A wrong version, a count that disagrees with the lines, or a
// malformed line is an error wrapping ErrCorrupt that names the file.
func ReadCheckpoint(fsys vfs.FS, path string) (map[TopicPartition]int64, error) {
	buf, err := vfs.ReadFile(fsys, path)
	if errors.Is(err, fs.ErrNotExist) {
		return map[TopicPartition]int64{}, nil
	}
	if err != nil {
		return nil, fmt.Errorf("engine: read checkpoint %s: %w", path, err)
	}
	return parseCheckpoint(path, buf)
}

func parseCheckpoint(path string, buf []byte) (map[TopicPartition]int64, error) {
	out := map[TopicPartition]int64{}
	if len(buf) == 0 {
		return out, nil
	}
	lines := strings.Split(string(buf), "\n")
	if lines[len(lines)-1] == "" {
		lines = lines[:len(lines)-1] // the final newline
	}
	bad := func(line int, format string, args ...any) error {
		return fmt.Errorf("%w: checkpoint %s line %d: %s", ErrCorrupt, path, line, fmt.Sprintf(format, args...))
	}
	for i := range lines {
		lines[i] = strings.TrimSuffix(lines[i], "\r")
	}
	version, err := strconv.Atoi(strings.TrimSpace(lines[0]))
	if err != nil {
		return nil, bad(1, "version %q is not a number", lines[0])
	}
	if version != checkpointVersion {
		return nil, bad(1, "unsupported version %d", version)
	}
	if len(lines) == 1 {
		return out, nil
	}
	count, err := strconv.Atoi(strings.TrimSpace(lines[1]))
	if err != nil || count < 0 {
		return nil, bad(2, "entry count %q is not a count", lines[1])
	}
	entries := lines[2:]
	if len(entries) != count {
		return nil, bad(2, "expected %d entries, found %d", count, len(entries))
	}
	for i, line := range entries {
		fields := strings.Fields(line)
		if len(fields) != 3 {
			return nil, bad(i+3, "malformed entry %q (want: topic partition offset)", line)
		}
		p, err := strconv.Atoi(fields[1])
		if err != nil || p < 0 {
			return nil, bad(i+3, "malformed partition %q", fields[1])
		}
		off, err := strconv.ParseInt(fields[2], 10, 64)
		if err != nil {
			return nil, bad(i+3, "malformed offset %q", fields[2])
		}
		out[TopicPartition{Topic: fields[0], Partition: p}] = off
	}
	return out, nil
}

// formatCheckpoint encodes m, sorted by topic then partition.
func formatCheckpoint(m map[TopicPartition]int64) ([]byte, error) {
	keys := make([]TopicPartition, 0, len(m))
	for tp := range m {
		if tp.Topic == "" || strings.ContainsFunc(tp.Topic, func(r rune) bool { return r <= ' ' }) || tp.Partition < 0 {
			return nil, fmt.Errorf("%w: cannot checkpoint %q partition %d", ErrInvalidTopic, tp.Topic, tp.Partition)
		}
		keys = append(keys, tp)
	}
	slices.SortFunc(keys, func(a, b TopicPartition) int {
		if c := strings.Compare(a.Topic, b.Topic); c != 0 {
			return c
		}
		return a.Partition - b.Partition
	})
	var b bytes.Buffer
	fmt.Fprintf(&b, "%d\n%d\n", checkpointVersion, len(keys))
	for _, tp := range keys {
		fmt.Fprintf(&b, "%s %d %d\n", tp.Topic, tp.Partition, m[tp])
	}
	return b.Bytes(), nil
}

// WriteCheckpoint replaces path atomically with m: it writes path+".tmp",
// fsyncs it, renames it over path and fsyncs the directory, so a crash
// leaves either the old file or the new one, never a torn one.
func WriteCheckpoint(fsys vfs.FS, path string, m map[TopicPartition]int64) error {
	data, err := formatCheckpoint(m)
	if err != nil {
		return err
	}
	if err := vfs.WriteFileAtomic(fsys, path, data, 0o644); err != nil {
		return fmt.Errorf("engine: write checkpoint %s: %w", path, err)
	}
	return nil
}
