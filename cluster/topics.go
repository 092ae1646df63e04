package cluster

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/topicfs/topicfs/backend"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

var _ backend.Backend = (*Cluster)(nil)

// reqCtx bounds a request (its retries included) by the request timeout.
func (c *Cluster) reqCtx(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx, c.opts.RequestTimeout)
}

// usable reports ErrClosed after Close.
func (c *Cluster) usable() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return fmt.Errorf("cluster: %w", backend.ErrClosed)
	}
	return nil
}

// metadata asks for topics (nil: every topic).
func (c *Cluster) metadata(ctx context.Context, topics []string) (*kmsg.MetadataResponse, error) {
	if err := c.usable(); err != nil {
		return nil, err
	}
	ctx, cancel := c.reqCtx(ctx)
	defer cancel()
	req := kmsg.NewPtrMetadataRequest()
	if topics != nil {
		req.Topics = make([]kmsg.MetadataRequestTopic, len(topics))
		for i, t := range topics {
			req.Topics[i].Topic = kmsg.StringPtr(t)
		}
	}
	return req.RequestWith(ctx, c.client)
}

// isInternal reports a topic Kafka keeps for itself.
func isInternal(t *kmsg.MetadataResponseTopic) bool {
	return t.IsInternal || t.Topic != nil && strings.HasPrefix(*t.Topic, "__")
}

// Topics returns the topics' names, sorted; internal topics only with
// Options.ShowInternal.
func (c *Cluster) Topics(ctx context.Context) ([]string, error) {
	resp, err := c.metadata(ctx, nil)
	if err != nil {
		return nil, mapErr("list topics", err)
	}
	var names []string
	for i := range resp.Topics {
		t := &resp.Topics[i]
		if t.Topic == nil || t.ErrorCode != 0 || (isInternal(t) && !c.opts.ShowInternal) {
			continue
		}
		names = append(names, *t.Topic)
	}
	slices.Sort(names)
	return names, nil
}

// Topic returns the topic name, its metadata and configuration read now.
func (c *Cluster) Topic(ctx context.Context, name string) (backend.Topic, error) {
	t, err := c.topic(ctx, name)
	if err != nil {
		return nil, err
	}
	return t, nil
}

// topic returns the one *Topic of name, refreshed. A name no topic can
// have is ErrUnknownTopic, as a name that none has.
func (c *Cluster) topic(ctx context.Context, name string) (*Topic, error) {
	if err := checkTopicName(name); err != nil {
		return nil, fmt.Errorf("%w: %w", backend.ErrUnknownTopic, err)
	}
	c.mu.Lock()
	t, ok := c.topics[name]
	if !ok {
		t = &Topic{c: c, name: name}
	}
	c.mu.Unlock()
	if ok && t.fresh() {
		return t, nil
	}
	if err := c.lookups.recent(c.conn.answered.Load()); err != nil {
		return nil, err
	}
	err := t.refresh(ctx)
	if c.lookups.note(err) {
		c.log.Warn("cluster: a topic lookup could not reach the cluster; lookups fail at once for a moment",
			"topic", name, "window", outageWindow, "err", err)
	}
	if err != nil {
		if ok && errors.Is(err, backend.ErrUnknownTopic) { // deleted by another client
			c.mu.Lock()
			forgot := c.topics[name] == t
			if forgot {
				delete(c.topics, name)
			}
			c.mu.Unlock()
			if forgot {
				c.purgeTopic(name) // a topic made again under the name has another id
			}
		}
		return nil, err
	}
	if !ok {
		c.mu.Lock()
		if prev, raced := c.topics[name]; raced {
			t = prev // another caller's: the same topic, refreshed as recently
		} else {
			c.topics[name] = t
		}
		c.mu.Unlock()
	}
	return t, nil
}

// checkTopicName applies Kafka's rule: 1 to 249 of [a-zA-Z0-9._-], not
// "." or "..".
func checkTopicName(name string) error {
	if len(name) > 249 || !kafkaName(name) {
		return fmt.Errorf("cluster: %w: %q: 1 to 249 of a-z A-Z 0-9 . _ - (not . or ..)", backend.ErrInvalidTopic, name)
	}
	return nil
}

// CreateTopic creates name with partitions partitions (0: Options.
// NumPartitions, else the broker's num.partitions) and
// Options.ReplicationFactor replicas. Settings stored for an earlier topic
// of the same name are forgotten.
func (c *Cluster) CreateTopic(ctx context.Context, name string, partitions int) (backend.Topic, error) {
	if err := checkTopicName(name); err != nil {
		return nil, err
	}
	if partitions == 0 {
		partitions = c.opts.NumPartitions
	}
	if partitions < 0 || partitions > maxPartitions {
		return nil, fmt.Errorf("cluster: create %s: %w: num.partitions=%d: must be 1 to %d",
			name, backend.ErrInvalidConfig, partitions, maxPartitions)
	}
	if err := c.usable(); err != nil {
		return nil, err
	}
	rctx, cancel := c.reqCtx(ctx)
	defer cancel()
	req := kmsg.NewPtrCreateTopicsRequest()
	req.TimeoutMillis = int32(c.opts.RequestTimeout.Milliseconds())
	rt := kmsg.NewCreateTopicsRequestTopic()
	rt.Topic = name
	rt.NumPartitions = int32(partitions)
	if partitions == 0 {
		rt.NumPartitions = -1
	}
	rt.ReplicationFactor = int16(c.opts.ReplicationFactor)
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(rctx, c.client)
	if err == nil {
		err = single(resp.Topics, func(t *kmsg.CreateTopicsResponseTopic) (int16, *string) { return t.ErrorCode, t.ErrorMessage })
	}
	if err != nil {
		return nil, mapErr("create "+name, err)
	}
	if err := c.removeSettings(name); err != nil {
		return nil, err
	}
	return c.awaitTopic(ctx, name)
}

// awaitTopic returns a topic just created: the brokers learn of it from the
// controller, so metadata may not list it at once.
func (c *Cluster) awaitTopic(ctx context.Context, name string) (*Topic, error) {
	ctx, cancel := c.reqCtx(ctx)
	defer cancel()
	for wait := 10 * time.Millisecond; ; wait = min(2*wait, 500*time.Millisecond) {
		t, err := c.topic(ctx, name)
		if !errors.Is(err, backend.ErrUnknownTopic) {
			return t, err
		}
		select {
		case <-ctx.Done():
			return nil, err
		case <-time.After(wait):
		}
	}
}

// DeleteTopic deletes name and forgets its local settings.
func (c *Cluster) DeleteTopic(ctx context.Context, name string) error {
	if err := checkTopicName(name); err != nil {
		return fmt.Errorf("%w: %w", backend.ErrUnknownTopic, err)
	}
	if err := c.usable(); err != nil {
		return err
	}
	rctx, cancel := c.reqCtx(ctx)
	defer cancel()
	req := kmsg.NewPtrDeleteTopicsRequest()
	req.TimeoutMillis = int32(c.opts.RequestTimeout.Milliseconds())
	rt := kmsg.NewDeleteTopicsRequestTopic()
	rt.Topic = kmsg.StringPtr(name)
	req.Topics = append(req.Topics, rt)
	req.TopicNames = []string{name} // versions before 6
	resp, err := req.RequestWith(rctx, c.client)
	if err == nil {
		err = single(resp.Topics, func(t *kmsg.DeleteTopicsResponseTopic) (int16, *string) { return t.ErrorCode, t.ErrorMessage })
	}
	if err != nil {
		return mapErr("delete "+name, err)
	}
	c.mu.Lock()
	delete(c.topics, name)
	c.mu.Unlock()
	c.purgeTopic(name) // a topic made again under the name has another id
	c.maxBytes.Delete(name)
	if err := c.mirror.RemoveTopic(c.clusterID, name); err != nil {
		c.log.Warn("cluster: could not remove the local copy of a deleted topic", "topic", name, "err", err)
	}
	return c.removeSettings(name)
}

// ReadOnly is false: a cluster mount changes what the credentials allow.
func (c *Cluster) ReadOnly() bool { return false }

// Topic is one topic of a Cluster: its partition count, replication factor
// and configuration as last read (Topic, ConfigText and AlterConfig read
// them again).
type Topic struct {
	c    *Cluster
	name string

	alterMu sync.Mutex // one AlterConfig at a time: the stored settings are read, changed, written
	readMu  sync.Mutex // held while read publishes what it read (after a purge, if the id changed)

	mu       sync.Mutex
	id       [16]byte // the topic id (zero from a broker before Kafka 2.8)
	parts    []*Partition
	rf       int
	configs  []brokerConfig
	stored   map[string]string // topicfs's settings set for this topic
	settings backend.Settings
	minISR   int
	readAt   time.Time // when the above were read; zero: read them again
}

// topicFresh is how long a topic's metadata and configuration are reused
// by lookups: one shell command looks a topic up at every level of a path
// and for every file it stats. What this mount changes (partitions,
// configs, deletion) is read again at once; what other clients change
// shows within topicFresh. The config and stats files always read anew.
const topicFresh = time.Second

// fresh reports whether the topic was read within topicFresh.
// topicID returns the topic's id as last read.
func (t *Topic) topicID() [16]byte {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.id
}

func (t *Topic) fresh() bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return !t.readAt.IsZero() && time.Since(t.readAt) < topicFresh
}

// stale makes the next lookup read the topic again (an answer said it
// changed).
func (t *Topic) stale() {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.readAt = time.Time{}
}

var _ backend.Topic = (*Topic)(nil)

// brokerConfig is one entry of the topic's DescribeConfigs answer.
type brokerConfig struct {
	name      string
	value     *string
	sensitive bool
}

func (t *Topic) Name() string { return t.name }

// NumPartitions is the partition count as last read.
func (t *Topic) NumPartitions() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return len(t.parts)
}

// Partition returns partition id as last read (ErrUnknownPartition beyond).
func (t *Topic) Partition(id int) (backend.Partition, error) {
	p, err := t.partition(id)
	if err != nil {
		return nil, err
	}
	return p, nil
}

func (t *Topic) partition(id int) (*Partition, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if id < 0 || id >= len(t.parts) {
		return nil, fmt.Errorf("cluster: %s: partition %d: %w (it has %d)", t.name, id, backend.ErrUnknownPartition, len(t.parts))
	}
	return t.parts[id], nil
}

// Settings returns what the file tree applies itself.
func (t *Topic) Settings() backend.Settings {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.settings
}

// refresh reads the topic's metadata, its broker configuration and its
// stored settings.
func (t *Topic) refresh(ctx context.Context) error {
	_, err := t.read(ctx)
	return err
}

// read is refresh, returning the metadata it read.
func (t *Topic) read(ctx context.Context) (*kmsg.MetadataResponseTopic, error) {
	mt, err := t.metadata(ctx)
	if err != nil {
		return nil, err
	}
	return mt, t.adopt(ctx, mt)
}

// metadata asks for the topic's metadata alone.
func (t *Topic) metadata(ctx context.Context) (*kmsg.MetadataResponseTopic, error) {
	resp, err := t.c.metadata(ctx, []string{t.name})
	if err != nil {
		return nil, mapErr("topic "+t.name, err)
	}
	return metadataTopic(resp, t.name)
}

// adopt takes mt, the topic's metadata just read, with the topic's broker
// configuration and stored settings read now, as what the topic is.
func (t *Topic) adopt(ctx context.Context, mt *kmsg.MetadataResponseTopic) error {
	configs, err := t.describeConfigs(ctx)
	if err != nil {
		return err
	}
	stored := t.c.loadSettings(t.name)
	local, err := t.c.defaults.apply(stored)
	if err != nil { // loadSettings dropped what does not pass alone
		return err
	}
	t.readMu.Lock() // one topic id change is noticed, and purged, once
	defer t.readMu.Unlock()
	if old := t.topicID(); old != ([16]byte{}) && mt.TopicID != ([16]byte{}) && mt.TopicID != old {
		// Deleted and made again by another client: the clients hold the
		// old id, with which every produce and request fails
		// (UNKNOWN_TOPIC_ID) until the topic is purged from them; records
		// they buffer fail. The purge comes before the new id and
		// partitions are seen, so appends that see them are not purged.
		// The local copies start over at their next fill
		// (MirrorPartition.Expect).
		t.c.log.Info("cluster: the topic was deleted and made again by another client", "topic", t.name,
			"partitions", len(mt.Partitions))
		t.c.purgeTopic(t.name)
		t.mu.Lock()
		// New Partition values: the new topic may have fewer partitions,
		// and nothing the mount keyed by the old ones (view and offset
		// state) belongs to it. Handles open on the old ones keep them.
		t.parts = nil
		t.mu.Unlock()
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	for len(t.parts) < len(mt.Partitions) {
		t.parts = append(t.parts, &Partition{c: t.c, t: t, topic: t.name, id: int32(len(t.parts))})
	}
	t.id, t.rf = mt.TopicID, replicationFactor(mt)
	t.configs, t.stored = configs, stored
	t.settings, t.minISR = t.derive(local)
	t.readAt = time.Now()
	t.c.maxBytes.Store(t.name, int32(t.settings.MaxRecordBytes))
	t.c.renewProducer(t.name, t.settings.MaxRecordBytes)
	return nil
}

// Verify asks the cluster for the topic's id and reads the topic again if
// it is another (backend.Verifier): a topic another client deleted and
// made again under the name is then the one a read takes records from,
// with no window in which the local copy of the old one is served, and
// the one an append goes to. Snapshots verify beside their ListOffsets
// (one more request, sent at once); appends at open. A fetch finds out by
// itself; a read the copy answers alone would not.
func (t *Topic) Verify(ctx context.Context) error {
	id := t.topicID()
	if id == ([16]byte{}) {
		return nil // a broker before Kafka 2.8: topics have no id
	}
	resp, err := t.c.metadata(ctx, []string{t.name})
	if err != nil {
		return mapErr("topic "+t.name, err)
	}
	mt, err := metadataTopic(resp, t.name)
	if err != nil {
		t.stale()
		return err
	}
	if mt.TopicID == id || mt.TopicID == ([16]byte{}) {
		return nil
	}
	return t.adopt(ctx, mt) // (the metadata it has, not a second request)
}

// verifying runs list (a listing of offsets) beside Verify, and returns
// Verify's error, else list's: a Snapshot's end and the topic's identity
// are asked at once.
func (t *Topic) verifying(ctx context.Context, list func() error) error {
	var err, ierr error
	together(
		func() { err = list() },
		func() { ierr = t.Verify(ctx) })
	return cmp.Or(ierr, err)
}

// metadataTopic finds topic in resp, mapping its error.
func metadataTopic(resp *kmsg.MetadataResponse, topic string) (*kmsg.MetadataResponseTopic, error) {
	for i := range resp.Topics {
		mt := &resp.Topics[i]
		if mt.Topic == nil || *mt.Topic != topic {
			continue
		}
		if err := codeErr(mt.ErrorCode, nil); err != nil {
			return nil, mapErr("topic "+topic, err)
		}
		slices.SortFunc(mt.Partitions, func(a, b kmsg.MetadataResponseTopicPartition) int {
			return int(a.Partition - b.Partition)
		})
		return mt, nil
	}
	return nil, mapErr("topic "+topic, kerr.UnknownTopicOrPartition)
}

// replicationFactor is the size of the replica set of the first partition.
func replicationFactor(mt *kmsg.MetadataResponseTopic) int {
	if len(mt.Partitions) == 0 {
		return 0
	}
	return len(mt.Partitions[0].Replicas)
}

// derive computes the Settings and min.insync.replicas from the broker
// configuration (held under t.mu) and the local settings.
func (t *Topic) derive(local localSettings) (backend.Settings, int) {
	s := backend.Settings{
		ParseKey: local.ParseKey, PrintKey: local.PrintKey, KeySeparator: local.KeySeparator, CursorStart: local.CursorStart,
		NullMarker: local.NullMarker, BatchSize: local.BatchSize, LingerMs: local.LingerMs,
		MaxRecordBytes: defaultMaxMessageBytes, Uncompressed: true,
	}
	minISR := 1
	for _, bc := range t.configs {
		if bc.value == nil {
			continue
		}
		v := strings.TrimSpace(*bc.value)
		switch bc.name {
		case "max.message.bytes":
			if n, err := parseRange(v, 0, 1<<31-1); err == nil {
				s.MaxRecordBytes = min(n, maxProduceBatch)
			}
		case "cleanup.policy":
			s.Compacted = slices.ContainsFunc(strings.Split(v, ","), func(p string) bool {
				return strings.EqualFold(strings.TrimSpace(p), "compact")
			})
		case "compression.type":
			s.Uncompressed = slices.ContainsFunc([]string{"producer", "uncompressed", "none"}, func(p string) bool {
				return strings.EqualFold(v, p)
			})
		case "min.insync.replicas":
			if n, err := parseRange(v, 1, maxInt16); err == nil {
				minISR = int(n)
			}
		}
	}
	return s, minISR
}

// describeConfigs reads the topic's broker configuration.
func (t *Topic) describeConfigs(ctx context.Context) ([]brokerConfig, error) {
	ctx, cancel := t.c.reqCtx(ctx)
	defer cancel()
	req := kmsg.NewPtrDescribeConfigsRequest()
	rr := kmsg.NewDescribeConfigsRequestResource()
	rr.ResourceType = kmsg.ConfigResourceTypeTopic
	rr.ResourceName = t.name
	req.Resources = append(req.Resources, rr)
	resp, err := req.RequestWith(ctx, t.c.client)
	if err == nil {
		err = single(resp.Resources, func(r *kmsg.DescribeConfigsResponseResource) (int16, *string) {
			return r.ErrorCode, r.ErrorMessage
		})
	}
	if err != nil {
		return nil, mapErr("describe configs of "+t.name, err)
	}
	var out []brokerConfig
	for _, rc := range resp.Resources[0].Configs {
		out = append(out, brokerConfig{name: rc.Name, value: rc.Value, sensitive: rc.IsSensitive})
	}
	slices.SortFunc(out, func(a, b brokerConfig) int { return strings.Compare(a.name, b.name) })
	return out, nil
}

// AddPartitions grows the topic to total partitions (CreatePartitions); it
// never shrinks (ErrInvalidConfig).
func (t *Topic) AddPartitions(ctx context.Context, total int) error {
	if err := t.refresh(ctx); err != nil {
		return err
	}
	if err := t.checkPartitions(total); err != nil {
		return err
	}
	if total == t.NumPartitions() {
		return nil
	}
	if err := t.createPartitions(ctx, total, false); err != nil {
		return err
	}
	return t.refresh(ctx)
}

// checkPartitions checks a new partition count against the current one.
func (t *Topic) checkPartitions(total int) error {
	if n := t.NumPartitions(); total < n || total > maxPartitions {
		return fmt.Errorf("cluster: %s: %w: num.partitions=%d: must be %d (the current count; partitions never shrink) to %d",
			t.name, backend.ErrInvalidConfig, total, n, maxPartitions)
	}
	return nil
}

// createPartitions asks the controller for total partitions.
func (t *Topic) createPartitions(ctx context.Context, total int, validateOnly bool) error {
	ctx, cancel := t.c.reqCtx(ctx)
	defer cancel()
	req := kmsg.NewPtrCreatePartitionsRequest()
	req.TimeoutMillis = int32(t.c.opts.RequestTimeout.Milliseconds())
	req.ValidateOnly = validateOnly
	rt := kmsg.NewCreatePartitionsRequestTopic()
	rt.Topic = t.name
	rt.Count = int32(total)
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(ctx, t.c.client)
	if err == nil {
		err = single(resp.Topics, func(t *kmsg.CreatePartitionsResponseTopic) (int16, *string) { return t.ErrorCode, t.ErrorMessage })
	}
	return mapErr(fmt.Sprintf("%s: num.partitions=%d", t.name, total), err)
}
