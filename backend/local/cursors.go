package local

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"path/filepath"
	"strconv"
	"sync"

	"github.com/topicfs/topicfs/backend"
	"github.com/topicfs/topicfs/engine/vfs"
)

// CursorsFile holds the cursors of a data directory (docs/FORMATS.md):
//
//	{"version":1,"topics":{"orders":{"billing":{"0":42,"1":17}}}}
//
// topic → cursor name → partition → the offset of the next record to read.
// It is replaced whole with vfs.WriteFileAtomic at every commit, so a crash
// leaves the old file or the new one, and a commit that returned is on
// disk.
const CursorsFile = "topicfs-cursors.json"

const cursorsVersion = 1

type cursorsFile struct {
	Version int                                    `json:"version"`
	Topics  map[string]map[string]map[string]int64 `json:"topics"`
}

// cursorStore is CursorsFile as New read it, guarded by mu.
type cursorStore struct {
	mu     sync.Mutex
	err    error // the file could not be read: every cursor call fails with it
	topics map[string]map[string]map[int]int64
}

var _ backend.Cursors = (*Backend)(nil)

func (b *Backend) cursorsPath() string { return filepath.Join(b.d.Path(), CursorsFile) }

// loadLocked reads CursorsFile (New, once). An unreadable or malformed file is
// refused, not replaced: every cursor call then fails with an error naming
// it (EIO), and the file keeps its bytes for the operator to look at
// (docs/OPERATIONS.md). Cursors of topics that no longer exist (a crash
// between deleting a topic and dropping its cursors) are dropped.
func (b *Backend) loadLocked() error {
	s := &b.cursors
	s.topics, s.err = ReadCursorsFile(b.d.FS(), b.d.Path())
	if s.err != nil {
		return s.err
	}
	for topic := range s.topics {
		if _, err := b.d.Topic(topic); err != nil {
			delete(s.topics, topic)
		}
	}
	return nil
}

// ReadCursorsFile reads the cursors of data directory dir: topic → name →
// partition → offset, empty when there is no file. A file that does not
// parse is an error wrapping backend.ErrCorrupt.
func ReadCursorsFile(fsys vfs.FS, dir string) (map[string]map[string]map[int]int64, error) {
	path := filepath.Join(dir, CursorsFile)
	out := map[string]map[string]map[int]int64{}
	buf, err := vfs.ReadFile(fsys, path)
	if errors.Is(err, fs.ErrNotExist) {
		return out, nil
	}
	if err != nil {
		return nil, fmt.Errorf("local: read %s: %w", path, err)
	}
	var f cursorsFile
	if err := json.Unmarshal(buf, &f); err != nil {
		return nil, fmt.Errorf("%w: %s does not parse (%v); it is left as it is", backend.ErrCorrupt, path, err)
	}
	if f.Version != cursorsVersion {
		return nil, fmt.Errorf("%w: %s: unknown version %d", backend.ErrCorrupt, path, f.Version)
	}
	for topic, names := range f.Topics {
		for name, parts := range names {
			for ps, off := range parts {
				id, err := strconv.Atoi(ps)
				if err != nil || id < 0 || off < 0 {
					return nil, fmt.Errorf("%w: %s: cursor %s of %s: bad entry %q: %d", backend.ErrCorrupt, path, name, topic, ps, off)
				}
				if out[topic] == nil {
					out[topic] = map[string]map[int]int64{}
				}
				if out[topic][name] == nil {
					out[topic][name] = map[int]int64{}
				}
				out[topic][name][id] = off
			}
		}
	}
	return out, nil
}

// saveLocked writes topics as CursorsFile.
func (b *Backend) saveLocked(topics map[string]map[string]map[int]int64) error {
	f := cursorsFile{Version: cursorsVersion, Topics: map[string]map[string]map[string]int64{}}
	for topic, names := range topics {
		for name, parts := range names {
			if len(parts) == 0 {
				continue
			}
			if f.Topics[topic] == nil {
				f.Topics[topic] = map[string]map[string]int64{}
			}
			m := map[string]int64{}
			for id, off := range parts {
				m[strconv.Itoa(id)] = off
			}
			f.Topics[topic][name] = m
		}
	}
	data, err := json.Marshal(f) // map keys sorted: the same cursors give the same bytes
	if err != nil {
		return err
	}
	if err := vfs.WriteFileAtomic(b.d.FS(), b.cursorsPath(), append(data, '\n'), 0o644); err != nil {
		return fmt.Errorf("local: write %s: %w", b.cursorsPath(), err)
	}
	return nil
}

// change applies edit to a copy of the cursors and saves it; the loaded
// cursors change only once the file is written.
func (b *Backend) change(edit func(topics map[string]map[string]map[int]int64) error) error {
	if b.d.ReadOnly() {
		return fmt.Errorf("local: cursors: %w", backend.ErrReadOnly)
	}
	s := &b.cursors
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.err != nil {
		return s.err
	}
	next := make(map[string]map[string]map[int]int64, len(s.topics))
	for topic, names := range s.topics {
		next[topic] = make(map[string]map[int]int64, len(names))
		for name, parts := range names {
			next[topic][name] = maps.Clone(parts)
		}
	}
	if err := edit(next); err != nil {
		return err
	}
	if err := b.saveLocked(next); err != nil {
		return err
	}
	s.topics = next
	return nil
}

// Cursor returns the positions of cursor name on topic.
func (b *Backend) Cursor(ctx context.Context, topic, name string) (map[int]int64, bool, error) {
	s := &b.cursors
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.err != nil {
		return nil, false, s.err
	}
	parts := s.topics[topic][name]
	return maps.Clone(parts), len(parts) > 0, nil
}

// CommitCursor sets the positions of the partitions in offs.
func (b *Backend) CommitCursor(ctx context.Context, topic, name string, offs map[int]int64) error {
	if _, err := b.d.Topic(topic); err != nil {
		return err
	}
	return b.change(func(topics map[string]map[string]map[int]int64) error {
		if topics[topic] == nil {
			topics[topic] = map[string]map[int]int64{}
		}
		if topics[topic][name] == nil {
			topics[topic][name] = map[int]int64{}
		}
		maps.Copy(topics[topic][name], offs)
		return nil
	})
}

// DeleteCursor forgets the positions of partitions (nil: all) of name.
func (b *Backend) DeleteCursor(ctx context.Context, topic, name string, partitions []int) error {
	return b.change(func(topics map[string]map[string]map[int]int64) error {
		parts := topics[topic][name]
		n := len(parts)
		if partitions == nil {
			clear(parts)
		}
		for _, id := range partitions {
			delete(parts, id)
		}
		if len(parts) == n {
			return fmt.Errorf("local: cursor %s of %s: %w", name, topic, backend.ErrUnknownCursor)
		}
		if len(parts) == 0 {
			delete(topics[topic], name)
		}
		return nil
	})
}

// ListCursors returns every cursor of topic.
func (b *Backend) ListCursors(ctx context.Context, topic string) (map[string]map[int]int64, error) {
	s := &b.cursors
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.err != nil {
		return nil, s.err
	}
	out := map[string]map[int]int64{}
	for name, parts := range s.topics[topic] {
		out[name] = maps.Clone(parts)
	}
	return out, nil
}

// dropCursors forgets the cursors of a deleted topic. A failure is only
// logged by the caller: the next load drops them (loadLocked).
func (b *Backend) dropCursors(topic string) error {
	if b.d.ReadOnly() {
		return nil
	}
	s := &b.cursors
	s.mu.Lock()
	err := s.err
	_, has := s.topics[topic]
	s.mu.Unlock()
	if err != nil {
		return err
	}
	if !has {
		return nil
	}
	return b.change(func(topics map[string]map[string]map[int]int64) error {
		delete(topics, topic)
		return nil
	})
}
