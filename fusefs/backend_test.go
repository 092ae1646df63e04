package fusefs

import (
	"context"

	"github.com/topicfs/topicfs/backend"
	"github.com/topicfs/topicfs/backend/local"
	"github.com/topicfs/topicfs/engine"
)

// asPart is p as the tree sees a partition of a data directory.
func asPart(p *engine.Partition) backend.Partition { return &local.Partition{Partition: p} }

// partOf returns the partition value f's backend hands out for p (the key
// of f's per-partition state).
func partOf(f *fsys, p *engine.Partition) backend.Partition {
	t, err := f.b.Topic(context.Background(), p.Topic())
	if err != nil {
		panic(err)
	}
	bp, err := t.Partition(p.ID())
	if err != nil {
		panic(err)
	}
	return bp
}

// asTopic is t of d as the tree sees a topic.
func asTopic(d *engine.LogDir, t *engine.Topic) backend.Topic {
	bt, err := local.New(d).Topic(context.Background(), t.Name())
	if err != nil {
		panic(err)
	}
	return bt
}
