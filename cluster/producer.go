package cluster

import (
	"context"
	"fmt"
	"sync"

	"github.com/topicfs/topicfs/backend"
	"github.com/twmb/franz-go/pkg/kgo"
)

// defaultMaxMessageBytes is Kafka's max.message.bytes default.
const defaultMaxMessageBytes = 1048588

// maxProduceBatch bounds the batches the producer makes, whatever a
// topic's max.message.bytes: a batch travels in one produce request, and
// brokers refuse requests above socket.request.max.bytes (100 MiB).
const maxProduceBatch = 64 << 20

// producer is the client appends go through: acks=all, idempotent,
// records to the partition they name, no compression, no linger (the file
// tree batches). The client takes a topic's batch limit once, when it
// first produces to a partition of it (kgo's ProducerBatchMaxBytesFn), and
// keeps it; caps says which it took.
type producer struct {
	cl   *kgo.Client
	caps sync.Map // topic → int32
}

func (c *Cluster) newProducer() (*producer, error) {
	opts, err := c.clientOpts()
	if err != nil {
		return nil, err
	}
	pr := &producer{}
	pr.cl, err = kgo.NewClient(append(opts,
		kgo.RequiredAcks(kgo.AllISRAcks()),
		kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.ProducerLinger(0),
		kgo.ProducerBatchCompression(kgo.NoCompression()),
		kgo.ProducerBatchMaxBytesFn(func(topic string) int32 {
			limit := c.batchMaxBytes(topic)
			if topic != "" {
				pr.caps.Store(topic, limit)
			}
			return limit
		}),
		kgo.ProduceRequestTimeout(c.opts.RequestTimeout),
		// No kgo.RecordDeliveryTimeout: the client measures it from the
		// record's timestamp, which an append may set in the past. Each
		// append's context carries the delivery budget instead.
	)...)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", backend.ErrInvalidConfig, err)
	}
	return pr, nil
}

// batchMaxBytes is the producer's batch limit of topic: its
// max.message.bytes as last read, within what kgo accepts.
func (c *Cluster) batchMaxBytes(topic string) int32 {
	if v, ok := c.maxBytes.Load(topic); ok {
		return min(max(v.(int32), 512), maxProduceBatch)
	}
	return defaultMaxMessageBytes
}

func (c *Cluster) currentProducer() *producer {
	c.prodMu.Lock()
	defer c.prodMu.Unlock()
	return c.producer
}

// purgeTopic makes the clients forget topic (a topic deleted and made
// again under its name): the producer's records still buffered for the
// old topic fail, and the next produce and request look the new one up.
func (c *Cluster) purgeTopic(topic string) {
	c.client.PurgeTopicsFromClient(topic)
	if pr := c.currentProducer(); pr != nil {
		pr.cl.PurgeTopicsFromClient(topic)
	}
}

// renewProducer replaces the producer if it makes batches of topic larger
// than limit, its max.message.bytes now: lowered since the producer took
// it, every batch of many small records would be refused
// (MESSAGE_TOO_LARGE). Appends that have begun finish on the old producer,
// which then closes (retire); new ones take the new.
func (c *Cluster) renewProducer(topic string, limit int64) {
	c.prodMu.Lock()
	defer c.prodMu.Unlock()
	old := c.producer
	if old == nil || c.closing {
		return
	}
	took, ok := old.caps.Load(topic)
	if !ok || int64(took.(int32)) <= max(limit, 512) {
		return
	}
	pr, err := c.newProducer()
	if err != nil {
		c.log.Warn("cluster: could not renew the producer; appends to the topic may fail with EMSGSIZE",
			"topic", topic, "max.message.bytes", limit, "err", err)
		return
	}
	c.log.Info("cluster: a new producer for a lowered max.message.bytes", "topic", topic,
		"max.message.bytes", limit, "old_batch_limit", took)
	c.producer = pr
	c.retiring[old] = struct{}{}
	go c.retire(old)
}

// retire closes a replaced producer once the records it holds are
// acknowledged or failed (at most delivery.timeout.ms).
func (c *Cluster) retire(pr *producer) {
	ctx, cancel := context.WithTimeout(context.Background(), c.opts.DeliveryTimeout)
	defer cancel()
	_ = pr.cl.Flush(ctx)
	pr.cl.Close()
	c.prodMu.Lock()
	defer c.prodMu.Unlock()
	delete(c.retiring, pr)
}
