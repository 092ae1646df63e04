package bench

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"sync"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// The cluster rows' Kafka: franz-go's in-process cluster (kfake) in the
// bench process, and the plain franz-go clients (kgo) whose work the
// baselines are. The mount and the baselines talk to the same brokers in
// the same run, so kfake's own cost bounds both sides alike.

const (
	kafkaBrokers = 3
	// kafkaReplicas is the replication factor of every topic of the rows,
	// the mount's (mount.toml's replication.factor) and the baselines'.
	// kfake keeps one in-memory log per partition whatever the factor:
	// acks=all costs no replication round trip.
	kafkaReplicas = 3
)

// kafka is a running kfake cluster and a client of the bench's own for its
// requests (create and delete topics, list offsets).
type kafka struct {
	kc *kfake.Cluster
	cl *kgo.Client
}

func startKafka() (*kafka, error) {
	kc, err := kfake.NewCluster(kfake.NumBrokers(kafkaBrokers))
	if err != nil {
		return nil, fmt.Errorf("start kfake: %w", err)
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(kc.ListenAddrs()...))
	if err != nil {
		kc.Close()
		return nil, err
	}
	return &kafka{kc: kc, cl: cl}, nil
}

func (k *kafka) close() {
	k.cl.Close()
	k.kc.Close()
}

// withClusterMount mounts k (`BIN mount --bootstrap-server ... MNT`) with
// state and cache directories of its own (an empty local copy), topics
// made by mkdir having one partition and kafkaReplicas replicas, runs fn
// with the mount, unmounts it whatever fn returned and removes the
// directories.
func (r *runner) withClusterMount(ctx context.Context, k *kafka, fn func(*mountProc) error) error {
	xdg, err := os.MkdirTemp(r.root, "xdg-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(xdg) // the local copies: as much as the partitions read
	env := []string{"XDG_STATE_HOME=" + xdg + "/state", "XDG_CACHE_HOME=" + xdg + "/cache"}
	flags := []string{"--bootstrap-server", strings.Join(k.kc.ListenAddrs(), ",")}
	config := map[string]string{"num.partitions": "1", "replication.factor": fmt.Sprint(kafkaReplicas)}
	m, err := r.launch(ctx, "", env, flags, config)
	if err != nil {
		return err
	}
	err = fn(m)
	if serr := m.stop(); err == nil {
		err = serr
	}
	return err
}

// createTopic creates topic with one partition of kafkaReplicas replicas.
func (k *kafka) createTopic(ctx context.Context, topic string) error {
	req := kmsg.NewPtrCreateTopicsRequest()
	rt := kmsg.NewCreateTopicsRequestTopic()
	rt.Topic, rt.NumPartitions, rt.ReplicationFactor = topic, 1, kafkaReplicas
	req.Topics = append(req.Topics, rt)
	req.TimeoutMillis = 30_000
	resp, err := req.RequestWith(ctx, k.cl)
	if err != nil {
		return fmt.Errorf("create topic %s: %w", topic, err)
	}
	for _, t := range resp.Topics {
		if err := kerr.ErrorForCode(t.ErrorCode); err != nil {
			return fmt.Errorf("create topic %s: %w", topic, err)
		}
	}
	return nil
}

func (k *kafka) deleteTopic(ctx context.Context, topic string) error {
	req := kmsg.NewPtrDeleteTopicsRequest()
	rt := kmsg.NewDeleteTopicsRequestTopic()
	rt.Topic = &topic
	req.Topics = append(req.Topics, rt)
	req.TopicNames = []string{topic}
	req.TimeoutMillis = 30_000
	resp, err := req.RequestWith(ctx, k.cl)
	if err != nil {
		return fmt.Errorf("delete topic %s: %w", topic, err)
	}
	for _, t := range resp.Topics {
		if err := kerr.ErrorForCode(t.ErrorCode); err != nil {
			return fmt.Errorf("delete topic %s: %w", topic, err)
		}
	}
	return nil
}

// endOffset is the high watermark of topic's partition 0.
func (k *kafka) endOffset(ctx context.Context, topic string) (int64, error) {
	req := kmsg.NewPtrListOffsetsRequest()
	rt := kmsg.NewListOffsetsRequestTopic()
	rt.Topic = topic
	rp := kmsg.NewListOffsetsRequestTopicPartition()
	rp.Partition, rp.Timestamp = 0, -1 // latest
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(ctx, k.cl)
	if err != nil {
		return 0, fmt.Errorf("list offsets of %s: %w", topic, err)
	}
	if len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 1 {
		return 0, fmt.Errorf("list offsets of %s: no answer for partition 0", topic)
	}
	p := resp.Topics[0].Partitions[0]
	if err := kerr.ErrorForCode(p.ErrorCode); err != nil {
		return 0, fmt.Errorf("list offsets of %s: %w", topic, err)
	}
	return p.Offset, nil
}

// checkEnd fails unless topic holds want records.
func (k *kafka) checkEnd(ctx context.Context, topic string, want int64) error {
	end, err := k.endOffset(ctx, topic)
	if err != nil {
		return err
	}
	if end != want {
		return fmt.Errorf("%s ends at offset %d after %d records were appended", topic, end, want)
	}
	return nil
}

// newProducer is a plain franz-go producer configured as the mount's
// (cluster/producer.go): acks=all, idempotent (kgo's default), records to
// the partition they name, no compression, no linger.
func (k *kafka) newProducer() (*kgo.Client, error) {
	return kgo.NewClient(
		kgo.SeedBrokers(k.kc.ListenAddrs()...),
		kgo.RequiredAcks(kgo.AllISRAcks()),
		kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.ProducerLinger(0),
		kgo.ProducerBatchCompression(kgo.NoCompression()),
	)
}

// produceChunk is how much of the file produceFile reads at a time: what
// cat writes to an append file per write(2) (its st_blksize).
const produceChunk = 1 << 20

// produceFile sends every '\n'-terminated line of the file at path as a
// value-only record to topic's partition 0, as a program streaming a file
// into Kafka would: it reads the file a chunk at a time into a buffer of
// its own (which the chunk's records alias until acknowledged), produces
// each line without waiting (the client batches and keeps up to five
// requests in flight per broker), and returns the number of records once
// every one is acknowledged (one Flush at the end).
func produceFile(ctx context.Context, cl *kgo.Client, topic, path string) (int64, error) {
	f, err := os.Open(path)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	var mu sync.Mutex
	var first error
	done := func(_ *kgo.Record, err error) {
		if err != nil {
			mu.Lock()
			first = cmp.Or(first, err)
			mu.Unlock()
		}
	}
	var n int64
	var carry []byte // the begun line at the end of the last chunk
	for eof := false; !eof; {
		buf := append(make([]byte, 0, len(carry)+produceChunk), carry...)
		m, err := io.ReadFull(f, buf[len(buf):cap(buf)])
		switch {
		case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF):
			eof = true
		case err != nil:
			return 0, err
		}
		buf = buf[:len(buf)+m]
		end := bytes.LastIndexByte(buf, '\n') + 1
		lines := buf[:end]
		carry = buf[end:]
		recs := make([]kgo.Record, 0, bytes.Count(lines, []byte{'\n'}))
		for len(lines) > 0 {
			i := bytes.IndexByte(lines, '\n')
			recs = append(recs, kgo.Record{Topic: topic, Value: lines[:i:i]})
			lines = lines[i+1:]
		}
		for i := range recs {
			cl.Produce(ctx, &recs[i], done)
		}
		n += int64(len(recs))
	}
	if len(carry) > 0 {
		return 0, fmt.Errorf("%s does not end with a newline", path)
	}
	if err := cl.Flush(ctx); err != nil {
		return 0, err
	}
	mu.Lock()
	defer mu.Unlock()
	if first != nil {
		return 0, fmt.Errorf("produce to %s: %w", topic, first)
	}
	return n, nil
}

// newConsumer is a plain franz-go consumer of topic's partition 0 from
// its first offset, kgo's defaults otherwise.
func (k *kafka) newConsumer(topic string) (*kgo.Client, error) {
	return kgo.NewClient(
		kgo.SeedBrokers(k.kc.ListenAddrs()...),
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: {0: kgo.NewOffset().AtStart()}}),
	)
}

// consumeLines polls cl until it has n records and writes each value and
// '\n' to out (the lines a view renders).
func consumeLines(ctx context.Context, cl *kgo.Client, n int64, out *bytes.Buffer) error {
	for got := int64(0); got < n; {
		fs := cl.PollFetches(ctx)
		if err := fetchErr(fs); err != nil {
			return err
		}
		for it := fs.RecordIter(); !it.Done(); {
			r := it.Next()
			out.Write(r.Value)
			out.WriteByte('\n')
			got++
		}
	}
	return nil
}

func fetchErr(fs kgo.Fetches) error {
	var errs []error
	fs.EachError(func(t string, p int32, err error) {
		errs = append(errs, fmt.Errorf("fetch %s/%d: %w", t, p, err))
	})
	return errors.Join(errs...)
}

// tail is the baseline of by-offset/-N: the two requests a tail of the
// last N records needs, sent through a connected franz-go client to the
// partition's leader (found once, as a consumer caches it): ListOffsets
// for the high watermark, then one Fetch from N before it, whose records
// kgo decodes (ProcessFetchPartition) and run writes to out as lines.
type tail struct {
	cl      *kgo.Client
	leader  *kgo.Broker
	topic   string
	topicID [16]byte
	epoch   int32
	dec     kgo.Decompressor
}

// newTail is a tail of topic's partition 0 on a client of its own.
func (k *kafka) newTail(ctx context.Context, topic string) (*tail, error) {
	cl, err := kgo.NewClient(kgo.SeedBrokers(k.kc.ListenAddrs()...))
	if err != nil {
		return nil, err
	}
	req := kmsg.NewPtrMetadataRequest()
	rt := kmsg.NewMetadataRequestTopic()
	rt.Topic = &topic
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(ctx, cl)
	if err == nil && (len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 1) {
		err = fmt.Errorf("metadata of %s: no partition 0", topic)
	}
	if err == nil {
		err = kerr.ErrorForCode(resp.Topics[0].Partitions[0].ErrorCode)
	}
	if err != nil {
		cl.Close()
		return nil, err
	}
	t, p := resp.Topics[0], resp.Topics[0].Partitions[0]
	return &tail{cl: cl, leader: cl.Broker(int(p.Leader)), topic: topic, topicID: t.TopicID, epoch: p.LeaderEpoch,
		dec: kgo.DefaultDecompressor()}, nil
}

func (t *tail) close() { t.cl.Close() }

// run writes the last n records of the partition to out, one line each.
func (t *tail) run(ctx context.Context, n int, out *bytes.Buffer) error {
	lreq := kmsg.NewPtrListOffsetsRequest()
	lreq.ReplicaID = -1
	lt := kmsg.NewListOffsetsRequestTopic()
	lt.Topic = t.topic
	lp := kmsg.NewListOffsetsRequestTopicPartition()
	lp.Partition, lp.CurrentLeaderEpoch, lp.Timestamp = 0, t.epoch, -1 // latest
	lt.Partitions = append(lt.Partitions, lp)
	lreq.Topics = append(lreq.Topics, lt)
	lresp, err := lreq.RequestWith(ctx, t.leader)
	if err != nil {
		return err
	}
	if len(lresp.Topics) != 1 || len(lresp.Topics[0].Partitions) != 1 {
		return fmt.Errorf("list offsets of %s: no answer for partition 0", t.topic)
	}
	lpr := lresp.Topics[0].Partitions[0]
	if err := kerr.ErrorForCode(lpr.ErrorCode); err != nil {
		return err
	}
	from := max(lpr.Offset-int64(n), 0)

	freq := kmsg.NewPtrFetchRequest()
	freq.ReplicaID, freq.MinBytes, freq.MaxBytes = -1, 1, 1<<20
	freq.SessionID, freq.SessionEpoch = 0, -1 // a full fetch, no session
	ft := kmsg.NewFetchRequestTopic()
	ft.Topic, ft.TopicID = t.topic, t.topicID
	fp := kmsg.NewFetchRequestTopicPartition()
	fp.Partition, fp.CurrentLeaderEpoch, fp.FetchOffset, fp.LogStartOffset, fp.PartitionMaxBytes = 0, t.epoch, from, -1, 1<<20
	ft.Partitions = append(ft.Partitions, fp)
	freq.Topics = append(freq.Topics, ft)
	fresp, err := freq.RequestWith(ctx, t.leader)
	if err != nil {
		return err
	}
	if err := kerr.ErrorForCode(fresp.ErrorCode); err != nil {
		return err
	}
	if len(fresp.Topics) != 1 || len(fresp.Topics[0].Partitions) != 1 {
		return fmt.Errorf("fetch of %s: no answer for partition 0", t.topic)
	}
	part, _ := kgo.ProcessFetchPartition(kgo.ProcessFetchPartitionOpts{Offset: from, Topic: t.topic},
		&fresp.Topics[0].Partitions[0], t.dec, nil)
	if part.Err != nil {
		return part.Err
	}
	for _, r := range part.Records {
		out.Write(r.Value)
		out.WriteByte('\n')
	}
	return nil
}
