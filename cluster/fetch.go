// Raw fetches of one partition from its leader: the record batches as the
// broker stores them (Kafka's on-disk format), with the partition's high
// watermark, last stable offset, log start offset and, read_committed, the
// aborted transactions. The Mirror stores what they return.

package cluster

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/topicfs/topicfs/backend"
	"github.com/topicfs/topicfs/engine/record"
)

// Isolation is a fetch's isolation level (Kafka's isolation.level).
type Isolation int8

const (
	// ReadUncommitted returns every batch up to the high watermark.
	ReadUncommitted Isolation = 0
	// ReadCommitted returns batches up to the last stable offset, with the
	// aborted transactions among them.
	ReadCommitted Isolation = 1
)

// Defaults of FetchOptions.
const (
	DefaultFetchTimeout  = 30 * time.Second
	DefaultFetchMaxBytes = 1 << 20 // max.partition.fetch.bytes: larger responses were slower (docs/PERFORMANCE.md)
	DefaultFetchBackoff  = 100 * time.Millisecond
	// maxBatchBytes bounds the one batch a fetch asks for alone when a
	// response held only part of it: more than Kafka's largest
	// message.max.bytes in practice, little enough to allocate.
	maxBatchBytes = 1 << 30
)

// FetchOptions configure a Fetcher. Zero values are the defaults.
type FetchOptions struct {
	// Timeout bounds one call, its retries included (request.timeout.ms).
	Timeout time.Duration
	// MaxBytes is how many bytes of batches one response may carry
	// (fetch.max.bytes and max.partition.fetch.bytes, for the one
	// partition). A first batch larger than it still comes whole.
	MaxBytes int32
	// MaxWait is how long the broker may wait for records when there are
	// none past the offset (fetch.max.wait.ms); 0 answers at once.
	MaxWait time.Duration
	// Backoff is the pause before a retry (retry.backoff.ms).
	Backoff time.Duration
}

// AbortedTxn is an aborted transaction a read_committed fetch reports: its
// producer's records from FirstOffset on, up to its ABORT marker, are
// aborted.
type AbortedTxn struct {
	ProducerID  int64
	FirstOffset int64
}

// FetchResult is one fetch of one partition.
type FetchResult struct {
	// Batches holds whole record batches only, in offset order, each
	// ending past the fetch offset (the first may begin before it: Kafka
	// returns the batch holding the offset). A partial batch at the end of
	// the response is dropped: the next fetch, from NextOffset, gets it.
	Batches []byte
	// NextOffset is the offset after the last batch (the fetch offset if
	// there is none).
	NextOffset       int64
	HighWatermark    int64
	LastStableOffset int64 // -1 if the broker did not say (fetch v3 and older)
	LogStartOffset   int64 // -1 if the broker did not say (fetch v4 and older)
	Aborted          []AbortedTxn
	// TopicID is the topic's id in the metadata the fetch was routed by
	// (zero if the cluster has none): a changed id is another topic of
	// the same name.
	TopicID     [16]byte
	Leader      int32
	LeaderEpoch int32
}

// Fetcher fetches partitions raw from their leaders through a franz-go
// client. It caches each partition's leader and leader epoch and refreshes
// them from the cluster's metadata when a broker says they moved. Safe for
// concurrent use.
type Fetcher struct {
	cl       *kgo.Client
	opts     FetchOptions
	requests atomic.Int64

	mu      sync.Mutex
	leaders map[topicPartition]leaderInfo
}

type topicPartition struct {
	topic     string
	partition int32
}

// leaderInfo is a partition's leader as the metadata last said.
type leaderInfo struct {
	node    int32
	epoch   int32
	topicID [16]byte
}

// NewFetcher returns a Fetcher that sends its requests through cl.
func NewFetcher(cl *kgo.Client, opts FetchOptions) *Fetcher {
	if opts.Timeout <= 0 {
		opts.Timeout = DefaultFetchTimeout
	}
	if opts.MaxBytes <= 0 {
		opts.MaxBytes = DefaultFetchMaxBytes
	}
	if opts.Backoff <= 0 {
		opts.Backoff = DefaultFetchBackoff
	}
	return &Fetcher{cl: cl, opts: opts, leaders: map[topicPartition]leaderInfo{}}
}

// Requests returns how many requests (fetch, metadata, list offsets) the
// Fetcher has sent.
func (f *Fetcher) Requests() int64 { return f.requests.Load() }

// Fetch reads the batches of topic's partition from offset on from its
// leader. Leader moves (NOT_LEADER_OR_FOLLOWER, FENCED_LEADER_EPOCH,
// UNKNOWN_LEADER_EPOCH, and every other retriable error) refresh the
// metadata and retry until FetchOptions.Timeout. An offset outside the
// partition's log wraps backend.ErrOffsetOutOfRange; a topic or partition
// the cluster does not have, backend.ErrUnknownTopic or
// ErrUnknownPartition; a refusal, backend.ErrNotAuthorized; running out of
// time, backend.ErrTimedOut (or ctx's error when ctx ended first); bytes
// that are not record batches, backend.ErrCorrupt.
func (f *Fetcher) Fetch(ctx context.Context, topic string, partition int32, offset int64, iso Isolation) (*FetchResult, error) {
	return f.FetchUpTo(ctx, topic, partition, offset, iso, 0)
}

// FetchUpTo is Fetch with a smaller response asked for: maxBytes, at most
// FetchOptions.MaxBytes (0 or negative: that). A first batch larger than
// it still comes whole.
func (f *Fetcher) FetchUpTo(ctx context.Context, topic string, partition int32, offset int64, iso Isolation, maxBytes int32) (*FetchResult, error) {
	if maxBytes <= 0 || maxBytes > f.opts.MaxBytes {
		maxBytes = f.opts.MaxBytes
	}
	if offset < 0 {
		return nil, fmt.Errorf("%w: fetch at offset %d", backend.ErrOffsetOutOfRange, offset)
	}
	var res *FetchResult
	err := f.withLeader(ctx, topic, partition, func(ctx context.Context, li leaderInfo) error {
		var err error
		res, err = f.fetchOnce(ctx, li, topic, partition, offset, iso, maxBytes)
		return err
	})
	return res, err
}

// LogStartOffset returns the first offset the partition's leader still has
// (ListOffsets, earliest), with Fetch's retries and errors.
func (f *Fetcher) LogStartOffset(ctx context.Context, topic string, partition int32) (int64, error) {
	var start int64
	err := f.withLeader(ctx, topic, partition, func(ctx context.Context, li leaderInfo) error {
		req := kmsg.NewPtrListOffsetsRequest()
		req.ReplicaID = -1
		rt := kmsg.NewListOffsetsRequestTopic()
		rt.Topic = topic
		rp := kmsg.NewListOffsetsRequestTopicPartition()
		rp.Partition = partition
		rp.CurrentLeaderEpoch = li.epoch
		rp.Timestamp = -2 // earliest
		rt.Partitions = append(rt.Partitions, rp)
		req.Topics = append(req.Topics, rt)
		f.requests.Add(1)
		resp, err := req.RequestWith(ctx, f.cl.Broker(int(li.node)))
		if err != nil {
			return err
		}
		for _, t := range resp.Topics {
			for _, p := range t.Partitions {
				if t.Topic == topic && p.Partition == partition {
					start = p.Offset
					return kerr.ErrorForCode(p.ErrorCode)
				}
			}
		}
		return errNoPartition
	})
	return start, err
}

// errNoPartition reports a response without the partition asked for.
var errNoPartition = errors.New("the response does not hold the partition")

// withLeader calls fn with the partition's leader until it succeeds, fails
// for good, or the time is up. A failure that says the leader moved
// refreshes the metadata first.
func (f *Fetcher) withLeader(ctx context.Context, topic string, partition int32, fn func(context.Context, leaderInfo) error) error {
	ctx, cancel := context.WithTimeout(ctx, f.opts.Timeout)
	defer cancel()
	tp := topicPartition{topic, partition}
	var last error
	for attempt := 0; ; attempt++ {
		if attempt > 0 {
			t := time.NewTimer(f.opts.Backoff)
			select {
			case <-ctx.Done():
				t.Stop()
				return timedOut(ctx, topic, partition, last)
			case <-t.C:
			}
		}
		li, err := f.leader(ctx, tp, last != nil)
		if err == nil {
			err = fn(ctx, li)
		}
		if err == nil {
			return nil
		}
		if ctx.Err() != nil {
			return timedOut(ctx, topic, partition, err)
		}
		if fatal := fetchError(err, topic, partition); fatal != nil {
			return fatal
		}
		last = err
	}
}

// timedOut is the error of a call whose context ended: the caller's own
// cancellation as is, else ErrTimedOut with the last failure.
func timedOut(ctx context.Context, topic string, partition int32, last error) error {
	if cause := context.Cause(ctx); !errors.Is(cause, context.DeadlineExceeded) {
		return cause
	}
	return fmt.Errorf("%w: %s-%d: %v", backend.ErrTimedOut, topic, partition, last)
}

// fetchError maps a failure to the error the caller gets, or nil when it
// is worth a retry (with fresh metadata).
func fetchError(err error, topic string, partition int32) error {
	var ke *kerr.Error
	switch {
	case errors.Is(err, backend.ErrCorrupt), errors.Is(err, record.ErrUnsupported), errors.Is(err, backend.ErrUnknownTopic),
		errors.Is(err, backend.ErrUnknownPartition), errors.Is(err, backend.ErrOffsetOutOfRange):
		return err
	case errors.Is(err, kerr.OffsetOutOfRange):
		return fmt.Errorf("%w: %s-%d: %v", backend.ErrOffsetOutOfRange, topic, partition, err)
	case errors.Is(err, kerr.TopicAuthorizationFailed), errors.Is(err, kerr.ClusterAuthorizationFailed):
		return fmt.Errorf("%w: %s-%d: %v", backend.ErrNotAuthorized, topic, partition, err)
	case errors.As(err, &ke) && !ke.Retriable && !errors.Is(err, kerr.UnknownTopicID) &&
		!errors.Is(err, kerr.InconsistentTopicID):
		return fmt.Errorf("cluster: fetch %s-%d: %w", topic, partition, err)
	}
	return nil // a moved leader, a lost connection, an unknown topic id (recreated): retry
}

// leader returns the partition's leader, from the cache unless refresh.
func (f *Fetcher) leader(ctx context.Context, tp topicPartition, refresh bool) (leaderInfo, error) {
	f.mu.Lock()
	li, ok := f.leaders[tp]
	f.mu.Unlock()
	if ok && !refresh {
		return li, nil
	}
	req := kmsg.NewPtrMetadataRequest()
	rt := kmsg.NewMetadataRequestTopic()
	rt.Topic = kmsg.StringPtr(tp.topic)
	req.Topics = append(req.Topics, rt)
	req.AllowAutoTopicCreation = false
	f.requests.Add(1)
	resp, err := req.RequestWith(ctx, f.cl)
	if err != nil {
		return leaderInfo{}, err
	}
	for _, t := range resp.Topics {
		if t.Topic == nil || *t.Topic != tp.topic {
			continue
		}
		if err := kerr.ErrorForCode(t.ErrorCode); err != nil {
			if errors.Is(err, kerr.UnknownTopicOrPartition) {
				return leaderInfo{}, fmt.Errorf("%w: %s", backend.ErrUnknownTopic, tp.topic)
			}
			return leaderInfo{}, err
		}
		for _, p := range t.Partitions {
			if p.Partition != tp.partition {
				continue
			}
			if err := kerr.ErrorForCode(p.ErrorCode); err != nil && !errors.Is(err, kerr.ReplicaNotAvailable) {
				return leaderInfo{}, err
			}
			if p.Leader < 0 {
				return leaderInfo{}, kerr.LeaderNotAvailable
			}
			li = leaderInfo{node: p.Leader, epoch: p.LeaderEpoch, topicID: t.TopicID}
			f.mu.Lock()
			f.leaders[tp] = li
			f.mu.Unlock()
			return li, nil
		}
		return leaderInfo{}, fmt.Errorf("%w: %s-%d", backend.ErrUnknownPartition, tp.topic, tp.partition)
	}
	return leaderInfo{}, kerr.UnknownTopicOrPartition // not in this answer: ask again
}

// fetchOnce sends one FetchRequest to the leader and checks the answer.
func (f *Fetcher) fetchOnce(ctx context.Context, li leaderInfo, topic string, partition int32, offset int64, iso Isolation, maxBytes int32) (*FetchResult, error) {
	req := kmsg.NewPtrFetchRequest()
	req.ReplicaID = -1
	req.MaxWaitMillis = int32(f.opts.MaxWait.Milliseconds())
	req.MinBytes = 1
	req.MaxBytes = maxBytes
	req.IsolationLevel = int8(iso)
	req.SessionID, req.SessionEpoch = 0, -1 // a full fetch, no session
	rt := kmsg.NewFetchRequestTopic()
	rt.Topic, rt.TopicID = topic, li.topicID
	rp := kmsg.NewFetchRequestTopicPartition()
	rp.Partition = partition
	rp.CurrentLeaderEpoch = li.epoch
	rp.FetchOffset = offset
	rp.LogStartOffset = -1
	rp.PartitionMaxBytes = maxBytes
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	f.requests.Add(1)
	resp, err := req.RequestWith(ctx, f.cl.Broker(int(li.node)))
	if err != nil {
		return nil, err
	}
	if err := kerr.ErrorForCode(resp.ErrorCode); err != nil {
		return nil, err
	}
	p, err := responsePartition(resp, topic, li.topicID, partition)
	if err != nil {
		return nil, err
	}
	if err := kerr.ErrorForCode(p.ErrorCode); err != nil {
		return nil, err
	}
	res := &FetchResult{NextOffset: offset, HighWatermark: p.HighWatermark, LastStableOffset: p.LastStableOffset,
		LogStartOffset: p.LogStartOffset, TopicID: li.topicID, Leader: li.node, LeaderEpoch: li.epoch}
	for _, a := range p.AbortedTransactions {
		res.Aborted = append(res.Aborted, AbortedTxn{ProducerID: a.ProducerID, FirstOffset: a.FirstOffset})
	}
	whole, next, partial, err := wholeBatches(p.RecordBatches, offset)
	if err != nil {
		return nil, fmt.Errorf("cluster: fetch %s-%d at %d: %w", topic, partition, offset, err)
	}
	if len(whole) == 0 && partial > int64(maxBytes) && partial <= maxBatchBytes {
		// Only part of one batch larger than asked for (brokers before
		// KIP-74 cut it): ask for that batch alone, whole.
		return f.fetchOnce(ctx, li, topic, partition, offset, iso, int32(partial))
	}
	res.Batches, res.NextOffset = whole, max(next, offset)
	return res, nil
}

// responsePartition finds the partition asked for in a fetch response.
func responsePartition(resp *kmsg.FetchResponse, topic string, id [16]byte, partition int32) (*kmsg.FetchResponseTopicPartition, error) {
	for i := range resp.Topics {
		t := &resp.Topics[i]
		if t.Topic != topic && (resp.Version < 13 || t.TopicID != id) {
			continue
		}
		for j := range t.Partitions {
			if t.Partitions[j].Partition == partition {
				return &t.Partitions[j], nil
			}
		}
	}
	return nil, errNoPartition
}

// wholeBatches checks raw, the records of a fetch at offset: every entry's
// length lies within raw and its header parses; entries that end before
// offset are skipped. It returns the whole entries, the offset after the
// last of them, and the declared size of a partial entry at the end (0 if
// none).
func wholeBatches(raw []byte, offset int64) (whole []byte, next int64, partial int64, err error) {
	start, end := -1, 0
	next = -1
	for pos := 0; pos < len(raw); {
		if len(raw)-pos < record.LogOverhead {
			return whole, next, int64(record.LogOverhead), nil
		}
		length := int64(int32(binary.BigEndian.Uint32(raw[pos+8:])))
		size := int64(record.LogOverhead) + length
		if length < 14 { // the smallest legacy message; a v2 batch is larger
			return nil, 0, 0, fmt.Errorf("%w: batch at byte %d of the response: length %d", backend.ErrCorrupt, pos, length)
		}
		if size > int64(len(raw)-pos) {
			partial = size
			break
		}
		b, err := record.Parse(raw[pos : pos+int(size)])
		if err != nil {
			return nil, 0, 0, fmt.Errorf("batch at byte %d of the response: %w", pos, err)
		}
		if b.NextOffset() > offset {
			if b.BaseOffset < next {
				return nil, 0, 0, fmt.Errorf("%w: batch at byte %d of the response: offset %d after %d",
					backend.ErrCorrupt, pos, b.BaseOffset, next)
			}
			if start < 0 {
				start = pos
			}
			end, next = pos+int(size), b.NextOffset()
		}
		pos += int(size)
	}
	if start < 0 {
		return nil, -1, partial, nil
	}
	return raw[start:end], next, partial, nil
}

// PartitionFetcher is a Fetcher bound to one partition, read_uncommitted:
// the Source a Mirror fetches through.
type PartitionFetcher struct {
	f         *Fetcher
	topic     string
	partition int32
}

// Partition returns f bound to topic's partition.
func (f *Fetcher) Partition(topic string, partition int32) PartitionFetcher {
	return PartitionFetcher{f: f, topic: topic, partition: partition}
}

// Fetch fetches from offset, read_uncommitted, about maxBytes (0: the
// Fetcher's MaxBytes).
func (pf PartitionFetcher) Fetch(ctx context.Context, offset int64, maxBytes int32) (*FetchResult, error) {
	return pf.f.FetchUpTo(ctx, pf.topic, pf.partition, offset, ReadUncommitted, maxBytes)
}

// LogStartOffset returns the partition's log start offset.
func (pf PartitionFetcher) LogStartOffset(ctx context.Context) (int64, error) {
	return pf.f.LogStartOffset(ctx, pf.topic, pf.partition)
}
