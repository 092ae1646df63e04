package kfakelog

import (
	"context"
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// filler pads every value so that even a one-record batch compresses
// smaller: kgo sends a batch uncompressed when compression would not
// shrink it.
var filler = strings.Repeat("compressible filler ", 16)

// Codecs are the codec names Options.Codec accepts, in Kafka's attribute
// order (attributes & 7).
var Codecs = []string{"none", "gzip", "snappy", "lz4", "zstd"}

// Record is one record a producer sent.
type Record struct {
	Key, Value []byte
	Headers    []kgo.RecordHeader
	Timestamp  int64 // milliseconds
	Producer   int   // index of the producer that sent it
	Aborted    bool  // sent in a transaction that was aborted
}

// Options says what to produce.
type Options struct {
	Codec         string // one of Codecs; "" is none
	Batches       int    // flushes (kgo may split one flush into two batches)
	PerBatch      int    // records per batch
	Producers     int    // producers taking turns by batch; 0 is 1
	Transactional bool   // each batch in its own transaction; every third is aborted
	// Timestamp gives record i's timestamp (i counts every record sent);
	// nil is 1_700_000_000_000 + i.
	Timestamp func(i int) int64
}

// Log is what Produce made.
type Log struct {
	Raw  []byte   // the partition's batches from offset 0, as fetched
	Sent []Record // every record, in the order sent (batch by batch)
}

// Produce runs a one-broker kfake cluster with one single-partition topic,
// produces o's records with kgo and fetches the partition's raw batches.
func Produce(t testing.TB, o Options) Log {
	t.Helper()
	codec, err := compression(o.Codec)
	if err != nil {
		t.Fatal(err)
	}
	if o.Producers < 1 {
		o.Producers = 1
	}
	if o.Timestamp == nil {
		o.Timestamp = func(i int) int64 { return 1_700_000_000_000 + int64(i) }
	}
	const topic = "t"
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(1, topic))
	if err != nil {
		t.Fatalf("kfake: %v", err)
	}
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	clients := newProducers(t, c, topic, codec, o)
	for _, cl := range clients {
		defer cl.Close() // before the cluster closes
	}
	var log Log
	n := 0
	for b := range o.Batches {
		p := b % o.Producers
		cl := clients[p]
		abort := o.Transactional && b%3 == 2
		if o.Transactional {
			if err := cl.BeginTransaction(); err != nil {
				t.Fatalf("begin transaction: %v", err)
			}
		}
		var results []error
		done := make(chan struct{}, o.PerBatch)
		for range o.PerBatch {
			r := Record{
				Key:       fmt.Appendf(nil, "key-%d", n%7),
				Value:     fmt.Appendf(nil, "value %d of batch %d (%s) %s", n, b, o.Codec, filler),
				Headers:   []kgo.RecordHeader{{Key: "n", Value: fmt.Appendf(nil, "%d", n)}},
				Timestamp: o.Timestamp(n),
				Producer:  p,
				Aborted:   abort,
			}
			if n%5 == 4 {
				r.Value = nil // a tombstone now and then
			}
			log.Sent = append(log.Sent, r)
			n++
			cl.Produce(ctx, &kgo.Record{Key: r.Key, Value: r.Value, Headers: r.Headers, Timestamp: time.UnixMilli(r.Timestamp)},
				func(_ *kgo.Record, err error) { results = append(results, err); done <- struct{}{} })
		}
		if err := cl.Flush(ctx); err != nil {
			t.Fatalf("flush: %v", err)
		}
		for range o.PerBatch {
			<-done
		}
		for _, err := range results {
			if err != nil {
				t.Fatalf("produce: %v", err)
			}
		}
		if o.Transactional {
			if err := cl.EndTransaction(ctx, kgo.TransactionEndTry(!abort)); err != nil {
				t.Fatalf("end transaction: %v", err)
			}
		}
	}
	log.Raw = fetchAll(ctx, t, c, topic)
	return log
}

// newProducers returns o.Producers kgo clients producing to topic with
// codec, each flushing only when told, transactional when o says so.
func newProducers(t testing.TB, c *kfake.Cluster, topic string, codec kgo.CompressionCodec, o Options) []*kgo.Client {
	t.Helper()
	clients := make([]*kgo.Client, o.Producers)
	for i := range clients {
		opts := []kgo.Opt{
			kgo.SeedBrokers(c.ListenAddrs()...),
			kgo.DefaultProduceTopic(topic),
			kgo.ProducerBatchCompression(codec),
			kgo.ManualFlushing(), // batches form at the flush
		}
		if o.Transactional {
			opts = append(opts, kgo.TransactionalID(fmt.Sprintf("txn-%d", i)))
		}
		cl, err := kgo.NewClient(opts...)
		if err != nil {
			t.Fatalf("kgo: %v", err)
		}
		clients[i] = cl
	}
	return clients
}

// fetchAll reads partition 0 of topic from offset 0 to its high watermark,
// read_uncommitted so aborted batches and control batches are included.
func fetchAll(ctx context.Context, t testing.TB, c *kfake.Cluster, topic string) []byte {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.ListenAddrs()...))
	if err != nil {
		t.Fatalf("kgo: %v", err)
	}
	defer cl.Close()
	meta := kmsg.NewPtrMetadataRequest()
	mt := kmsg.NewMetadataRequestTopic()
	mt.Topic = kmsg.StringPtr(topic)
	meta.Topics = append(meta.Topics, mt)
	mresp, err := meta.RequestWith(ctx, cl)
	if err != nil || len(mresp.Topics) != 1 {
		t.Fatalf("metadata: %v", err)
	}
	topicID := mresp.Topics[0].TopicID

	var raw []byte
	for offset := int64(0); ; {
		req := kmsg.NewPtrFetchRequest()
		req.ReplicaID = -1
		req.MaxWaitMillis = 0
		req.MaxBytes = 64 << 20
		req.IsolationLevel = 0
		ft := kmsg.NewFetchRequestTopic()
		ft.Topic = topic
		ft.TopicID = topicID
		fp := kmsg.NewFetchRequestTopicPartition()
		fp.FetchOffset = offset
		fp.PartitionMaxBytes = 64 << 20
		ft.Partitions = append(ft.Partitions, fp)
		req.Topics = append(req.Topics, ft)
		resp, err := req.RequestWith(ctx, cl)
		if err != nil {
			t.Fatalf("fetch: %v", err)
		}
		if len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 1 {
			t.Fatalf("fetch: %d topics in the response", len(resp.Topics))
		}
		p := resp.Topics[0].Partitions[0]
		if p.ErrorCode != 0 {
			t.Fatalf("fetch: error code %d", p.ErrorCode)
		}
		if len(p.RecordBatches) == 0 {
			if offset < p.HighWatermark {
				t.Fatalf("fetch at %d below high watermark %d returned nothing", offset, p.HighWatermark)
			}
			return raw
		}
		raw = append(raw, p.RecordBatches...)
		next, err := nextOffset(p.RecordBatches)
		if err != nil {
			t.Fatalf("fetch: %v", err)
		}
		offset = next
	}
}

// batchSize is the size of the v2 batch raw starts with (its 12-byte log
// overhead included), checked to lie within raw.
func batchSize(raw []byte) (int, error) {
	if len(raw) < 12 {
		return 0, fmt.Errorf("fetch: %d bytes, not a batch header", len(raw))
	}
	size := 12 + int(int32(binary.BigEndian.Uint32(raw[8:])))
	if size < 61 || size > len(raw) {
		return 0, fmt.Errorf("fetch: batch of %d bytes in %d", size, len(raw))
	}
	return size, nil
}

// nextOffset returns the offset after the last whole batch of raw.
func nextOffset(raw []byte) (int64, error) {
	next := int64(-1)
	for len(raw) >= 12 {
		size, err := batchSize(raw)
		if err != nil {
			return 0, err
		}
		var b kmsg.RecordBatch
		if err := b.ReadFrom(raw[:size]); err != nil {
			return 0, err
		}
		next = b.FirstOffset + int64(b.LastOffsetDelta) + 1
		raw = raw[size:]
	}
	if len(raw) != 0 || next < 0 {
		return 0, fmt.Errorf("fetch: %d bytes of a partial batch", len(raw))
	}
	return next, nil
}

func compression(name string) (kgo.CompressionCodec, error) {
	switch name {
	case "", "none":
		return kgo.NoCompression(), nil
	case "gzip":
		return kgo.GzipCompression(), nil
	case "snappy":
		return kgo.SnappyCompression(), nil
	case "lz4":
		return kgo.Lz4Compression(), nil
	case "zstd":
		return kgo.ZstdCompression(), nil
	}
	return kgo.CompressionCodec{}, fmt.Errorf("kfakelog: unknown codec %q", name)
}

// castagnoli is the CRC-32C table of a v2 batch's checksum.
var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// LogAppendTime rewrites every data batch of raw as a broker with
// message.timestamp.type=LogAppendTime stores it: the timestamp-type
// attribute set, maxTimestamp replaced by the append time, and the CRC
// recomputed; the records, compressed or not, stay as they are (Kafka's
// DefaultRecordBatch.setMaxTimestamp). Control batches are left alone.
// kmsg does the rewrite, not topicfs's encoder.
func LogAppendTime(t testing.TB, raw []byte, appendTime int64) []byte {
	t.Helper()
	var out []byte
	for len(raw) > 0 {
		size, err := batchSize(raw)
		if err != nil {
			t.Fatalf("LogAppendTime: %v", err)
		}
		var b kmsg.RecordBatch
		if err := b.ReadFrom(raw[:size]); err != nil {
			t.Fatalf("LogAppendTime: %v", err)
		}
		if b.Attributes&0x20 == 0 {
			b.Attributes |= 0x08
			b.MaxTimestamp = appendTime
			enc := b.AppendTo(nil)
			b.CRC = int32(crc32.Checksum(enc[21:], castagnoli))
		}
		out = b.AppendTo(out)
		raw = raw[size:]
	}
	return out
}

// LeaderChangeFirst returns raw moved up one offset behind a LEADER_CHANGE
// control batch at offset 0, the shape of a KRaft log's start (a new
// leader's first write): producer id -1, control attribute, one record
// whose key is the control type 2 and whose value is a LeaderChangeMessage
// naming leaderID. kmsg builds the batch; a base offset is outside the CRC,
// so moving the other batches leaves them valid.
func LeaderChangeFirst(t testing.TB, raw []byte, leaderEpoch, leaderID int32, ts int64) []byte {
	t.Helper()
	key := (&kmsg.ControlRecordKey{Version: 0, Type: 2}).AppendTo(nil)
	msg := kmsg.NewLeaderChangeMessage()
	msg.LeaderID = leaderID
	voter := kmsg.NewLeaderChangeMessageVoter()
	voter.VoterID = leaderID
	msg.Voters = append(msg.Voters, voter)
	msg.GrantingVoters = append(msg.GrantingVoters, voter)
	rec := kmsg.Record{Key: key, Value: msg.AppendTo(nil)}
	rec.Length = int32(len(rec.AppendTo(nil)) - 1) // Length 0 encodes as one byte
	b := kmsg.RecordBatch{
		PartitionLeaderEpoch: leaderEpoch,
		Magic:                2,
		Attributes:           0x20,
		FirstTimestamp:       ts,
		MaxTimestamp:         ts,
		ProducerID:           -1,
		ProducerEpoch:        -1,
		FirstSequence:        -1,
		NumRecords:           1,
		Records:              rec.AppendTo(nil),
	}
	b.Length = int32(49 + len(b.Records))
	enc := b.AppendTo(nil)
	binary.BigEndian.PutUint32(enc[17:], crc32.Checksum(enc[21:], castagnoli))
	out := enc
	for len(raw) > 0 {
		size, err := batchSize(raw)
		if err != nil {
			t.Fatalf("LeaderChangeFirst: %v", err)
		}
		moved := append([]byte(nil), raw[:size]...)
		binary.BigEndian.PutUint64(moved, binary.BigEndian.Uint64(moved)+1)
		out = append(out, moved...)
		raw = raw[size:]
	}
	return out
}
