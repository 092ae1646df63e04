package fusefs

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"maps"
	"slices"
	"strconv"

	"github.com/topicfs/topicfs/backend"
)

// cursorStat is one cursor in a partition's stats: its committed offset
// and lag, the offsets between it and the end (high watermark).
type cursorStat struct {
	Offset int64 `json:"offset"`
	Lag    int64 `json:"lag"`
}

// topicCursorStat is one cursor in a topic's stats: its offsets per
// partition that has one, and their lags summed.
type topicCursorStat struct {
	Offsets map[string]int64 `json:"offsets"`
	Lag     int64            `json:"lag"`
}

// render renders the stats file: the backend's or the local one, with a
// "cursors" object added where the backend keeps cursors.
func (s *statsNode) render(ctx context.Context) ([]byte, error) {
	b, err := s.renderBase(ctx)
	if err != nil {
		return nil, err
	}
	if b, err = s.withKeyIndex(b); err != nil {
		return nil, err
	}
	cb, err := s.fsys.cursorsOf()
	if err != nil {
		return b, nil
	}
	cursors, err := s.cursorStats(ctx, cb)
	if errors.Is(err, backend.ErrNotAuthorized) {
		// Credentials that may read a topic but not describe groups get
		// the stats without cursors, as before cursors existed.
		return b, nil
	}
	if err != nil {
		return nil, err
	}
	return spliceField(b, "cursors", cursors)
}

// cursorStats returns the "cursors" object of the file.
func (s *statsNode) cursorStats(ctx context.Context, cb backend.Cursors) (any, error) {
	t, err := s.fsys.topic(ctx, s.loc.topic, s.loc.gen)
	if err != nil {
		return nil, err
	}
	all, err := cb.ListCursors(ctx, s.loc.topic)
	if err != nil {
		return nil, err
	}
	// The ends of the partitions the cursors are at, in one round (a
	// cursor may name partitions the topic no longer has: skipped).
	at := map[int]bool{}
	for _, pos := range all {
		for id := range pos {
			if id >= 0 && id < t.NumPartitions() && (s.loc.id < 0 || id == s.loc.id) {
				at[id] = true
			}
		}
	}
	ends, err := backend.TopicOffsets(ctx, t, slices.Collect(maps.Keys(at)))
	if err != nil {
		return nil, err
	}
	if s.loc.id >= 0 {
		out := map[string]cursorStat{}
		for name, pos := range all {
			if off, ok := pos[s.loc.id]; ok {
				out[name] = cursorStat{Offset: off, Lag: max(ends[s.loc.id].End-off, 0)}
			}
		}
		return out, nil
	}
	out := map[string]topicCursorStat{}
	for name, pos := range all {
		cs := topicCursorStat{Offsets: map[string]int64{}}
		for _, id := range slices.Sorted(maps.Keys(pos)) {
			e, ok := ends[id]
			if !ok {
				continue
			}
			cs.Offsets[strconv.Itoa(id)] = pos[id]
			cs.Lag += max(e.End-pos[id], 0)
		}
		out[name] = cs
	}
	return out, nil
}

// spliceField adds "name": v as the last field of js, an indented JSON
// object (a stats file), keeping its indentation.
func spliceField(js []byte, name string, v any) ([]byte, error) {
	val, err := json.MarshalIndent(v, "  ", "  ")
	if err != nil {
		return nil, err
	}
	body := bytes.TrimRight(js, " \n\t")
	if len(body) == 0 || body[len(body)-1] != '}' {
		return js, nil // not an object: leave it as it is
	}
	body = bytes.TrimRight(body[:len(body)-1], " \n\t")
	var out bytes.Buffer
	out.Write(body)
	if len(body) > 0 && body[len(body)-1] != '{' {
		out.WriteByte(',')
	}
	out.WriteString("\n  ")
	key, _ := json.Marshal(name)
	out.Write(key)
	out.WriteString(": ")
	out.Write(val)
	out.WriteString("\n}\n")
	return out.Bytes(), nil
}
