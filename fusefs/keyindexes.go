package fusefs

import (
	"context"
	"strings"
	"sync"

	"github.com/topicfs/topicfs/backend"
	"github.com/topicfs/topicfs/keyindex"
)

// DefaultKeyIndexMemory is key.index.memory.bytes when Options leaves it 0.
const DefaultKeyIndexMemory = 64 << 20

// keyIndexes are the key indexes of one mount (by-key/), one per
// partition, opened on first use (at mount for compacted topics, which are
// tables) and closed at unmount. They share one memory budget.
type keyIndexes struct {
	f      *fsys
	budget *keyindex.Budget
	mu     sync.Mutex
	open   map[partLoc]openIndex
	closed bool
}

func newKeyIndexes(f *fsys, memory int64, dir string) *keyIndexes {
	if memory <= 0 {
		memory = DefaultKeyIndexMemory
	}
	return &keyIndexes{f: f, budget: keyindex.NewBudget(memory, dir), open: map[partLoc]openIndex{}}
}

// get returns the index of l's partition, opening it on first use.
func (k *keyIndexes) get(ctx context.Context, l partLoc) (*keyindex.Index, error) {
	t, err := k.f.topic(ctx, l.topic, l.gen)
	if err != nil {
		return nil, err
	}
	p, err := t.Partition(l.id)
	if err != nil {
		return nil, err
	}
	return k.of(l, p)
}

func (k *keyIndexes) of(l partLoc, p backend.Partition) (*keyindex.Index, error) {
	k.mu.Lock()
	if k.closed {
		k.mu.Unlock()
		return nil, backend.ErrClosed
	}
	o := k.open[l]
	var replaced *keyindex.Index
	if o.x == nil || o.p != p {
		// A new partition value for the name is another log (a topic
		// made again by another client): its keys are indexed anew.
		replaced = o.x
		o = openIndex{x: keyindex.Open(p, k.budget, k.f.log), p: p}
		k.open[l] = o
	}
	k.mu.Unlock()
	if replaced != nil {
		replaced.Close() // closing waits for its follower: not under k.mu
	}
	return o.x, nil
}

// openIndex is an open index and the partition value it indexes.
type openIndex struct {
	x *keyindex.Index
	p backend.Partition
}

// peek returns l's index if it is open.
func (k *keyIndexes) peek(l partLoc) *keyindex.Index {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.open[l].x
}

// startTables opens the indexes of every partition of the compacted
// topics (not Kafka's internal __ topics) of a local mount, so that their
// first by-key read does not wait for a build. A cluster's topics are
// indexed on first use: building means reading them whole.
func (k *keyIndexes) startTables(ctx context.Context) {
	if k.f.local == nil {
		return
	}
	names, err := k.f.b.Topics(ctx)
	if err != nil {
		return
	}
	for _, name := range names {
		t, err := k.f.b.Topic(ctx, name)
		if err != nil || strings.HasPrefix(name, "__") || !t.Settings().Compacted {
			continue
		}
		for id := range t.NumPartitions() {
			if p, err := t.Partition(id); err == nil {
				_, _ = k.of(partLoc{topic: name, gen: k.f.gen(name), id: id}, p)
			}
		}
	}
}

// dropTopic closes the indexes of a deleted topic: its generations
// before gen.
func (k *keyIndexes) dropTopic(topic string, gen uint64) {
	k.mu.Lock()
	var drop []*keyindex.Index
	for l, o := range k.open {
		if l.topic == topic && l.gen < gen {
			drop = append(drop, o.x)
			delete(k.open, l)
		}
	}
	k.mu.Unlock()
	for _, x := range drop {
		x.Close()
	}
}

// close stops every index and frees its table.
func (k *keyIndexes) close() {
	k.mu.Lock()
	k.closed = true
	open := k.open
	k.open = nil
	k.mu.Unlock()
	for _, o := range open {
		o.x.Close()
	}
}

// keyIndexStat is a partition's by-key/ index in its stats file.
type keyIndexStat struct {
	LiveKeys   int64  `json:"live_keys"`
	IndexedTo  int64  `json:"indexed_to"`
	TableBytes int64  `json:"table_bytes"`
	Spilled    bool   `json:"spilled"`
	Error      string `json:"error,omitempty"`
}

// withKeyIndex adds "key_index" to a partition's stats: its index, or
// null while none is open (stats never starts a build).
func (s *statsNode) withKeyIndex(b []byte) ([]byte, error) {
	if s.loc.id < 0 {
		return b, nil
	}
	x := s.fsys.keys.peek(s.loc)
	if x == nil {
		return spliceField(b, "key_index", nil)
	}
	st := x.Stats()
	return spliceField(b, "key_index", keyIndexStat{
		LiveKeys: st.LiveKeys, IndexedTo: st.IndexedTo, TableBytes: st.TableBytes, Spilled: st.Spilled, Error: st.Err,
	})
}
