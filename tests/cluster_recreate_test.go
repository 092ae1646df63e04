package tests

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// recreateTopic deletes topic and makes it again (one partition) with an
// independent client, as another Kafka user would.
func recreateTopic(t *testing.T, kc *kfake.Cluster, topic string) {
	t.Helper()
	recreateTopicWith(t, kc, topic, 1)
}

// recreateTopicWith is recreateTopic with partitions partitions.
func recreateTopicWith(t *testing.T, kc *kfake.Cluster, topic string, partitions int32) {
	t.Helper()
	cl := kafkaClient(t, kc)
	ctx, cancel := context.WithTimeout(context.Background(), harnessDeadline)
	defer cancel()
	del := kmsg.NewPtrDeleteTopicsRequest()
	dt := kmsg.NewDeleteTopicsRequestTopic()
	dt.Topic = kmsg.StringPtr(topic)
	del.Topics, del.TopicNames = append(del.Topics, dt), []string{topic}
	_, err := del.RequestWith(ctx, cl)
	require.NoError(t, err)
	create := kmsg.NewPtrCreateTopicsRequest()
	ct := kmsg.NewCreateTopicsRequestTopic()
	ct.Topic, ct.NumPartitions, ct.ReplicationFactor = topic, partitions, 3
	create.Topics = append(create.Topics, ct)
	resp, err := create.RequestWith(ctx, cl)
	require.NoError(t, err)
	require.Zero(t, resp.Topics[0].ErrorCode)
}

// TestClusterTopicRecreatedByAnotherClient: a topic another client deletes
// and makes again under the same name is the new topic through a live
// mount and after a remount: its views show none of the old records the
// local copy held, and appends land in it (the producer forgets the old
// topic id instead of failing every record with UNKNOWN_TOPIC_ID).
func TestClusterTopicRecreatedByAnotherClient(t *testing.T) {
	kc := startKfake(t)
	m := startMount(t, clusterMountOpts(t, kc, ""))
	m.Sh(t, `mkdir $MNT/r && seq 100 > $MNT/r/0/append`)
	require.Equal(t, "100\n", m.Sh(t, `wc -l < $MNT/r/0/records`))

	recreateTopic(t, kc, "r")
	assert.Eventually(t, func() bool {
		return m.Sh(t, `cat $MNT/r/0/records | wc -l; cat $MNT/r/0/by-offset/-2 | wc -l`) == "0\n0\n"
	}, 30*time.Second, 100*time.Millisecond, "the new topic's views hold none of the old records")
	m.Sh(t, `printf 'fresh1\nfresh2\n' > $MNT/r/0/append`)
	assert.Equal(t, []string{"fresh1", "fresh2"}, consumeValues(t, kc, "r", 0, 2))
	assert.Equal(t, "fresh1\nfresh2\n", m.Sh(t, `cat $MNT/r/0/records`))

	// With the mount stopped, the topic is made again once more: the
	// copy left in the cache directory is of the old topic.
	m.Stop()
	recreateTopic(t, kc, "r")
	produceValues(t, kc, "r", 0, "fresh3")
	m.Remount()
	assert.Equal(t, "fresh3\n", m.Sh(t, `cat $MNT/r/0/records`))
	assert.Equal(t, fmt.Sprintf("%s\n", `{"offset":0`), m.Sh(t, `cut -c1-11 $MNT/r/0/records.jsonl`))
}

// TestClusterTopicRecreatedReadAtOnce: the first read after another client
// makes a topic again shows the new topic's records, even when the mount
// looked the topic up a moment before and its copy of the old topic holds
// more than the new one's end (no fetch would notice).
func TestClusterTopicRecreatedReadAtOnce(t *testing.T) {
	kc := startKfake(t)
	m := startMount(t, clusterMountOpts(t, kc, ""))
	m.Sh(t, `mkdir $MNT/q && seq 100 > $MNT/q/0/append`)
	require.Equal(t, "100\n", m.Sh(t, `wc -l < $MNT/q/0/records`))
	recreateTopic(t, kc, "q")
	produceValues(t, kc, "q", 0, "new1", "new2")
	assert.Equal(t, "new1\nnew2\n", m.Sh(t, `cat $MNT/q/0/records`))
	assert.Equal(t, "new2\n", m.Sh(t, `cat $MNT/q/0/by-offset/-1`))
	assert.Equal(t, "new1\nnew2\n", m.Sh(t, `cat $MNT/q/cursors/c`), "a topic cursor (Topic.Snapshots)")
}

// TestClusterTopicRecreatedKeysAndAppends: right after another client makes
// a topic again, an append lands in the new topic, and by-key shows the
// new topic's keys only (the index of the old one is dropped).
func TestClusterTopicRecreatedKeysAndAppends(t *testing.T) {
	kc := startKfake(t)
	m := startMount(t, clusterMountOpts(t, kc, ""))
	m.Sh(t, `mkdir $MNT/k && echo parse.key=true > $MNT/k/config && printf 'a\t1\n' > $MNT/k/append`)
	require.Equal(t, "1\n", m.Sh(t, `cat $MNT/k/by-key/a`))
	recreateTopic(t, kc, "k")
	m.Sh(t, `printf 'b\t2\n' > $MNT/k/append`)
	assert.Equal(t, []string{"2"}, consumeValues(t, kc, "k", 0, 1), "the append is in the new topic")
	assert.Equal(t, "2\n", m.Sh(t, `cat $MNT/k/by-key/b`))
	assert.Equal(t, "b\n", m.Sh(t, `ls $MNT/k/by-key`))
	_, _, err := m.ShErr(`cat $MNT/k/by-key/a`)
	assert.Error(t, err, "the old topic's key is gone")
}

// TestClusterTopicRecreatedWithFewerPartitions: a topic another client makes
// again with fewer partitions loses the partitions beyond the new count at
// once through a live mount: ls, lookups and topic-level appends see the
// new count, and no record goes to a partition that is gone.
func TestClusterTopicRecreatedWithFewerPartitions(t *testing.T) {
	kc := startKfake(t)
	m := startMount(t, clusterMountOpts(t, kc, ""))
	m.Sh(t, `mkdir $MNT/f && echo num.partitions=4 > $MNT/f/config && seq 4 > $MNT/f/3/append`)
	require.Equal(t, "0 1 2 3\n", m.Sh(t, `cd $MNT/f && echo [0-9]*`))

	recreateTopicWith(t, kc, "f", 2)
	assert.Eventually(t, func() bool {
		return m.Sh(t, `cd $MNT/f && echo [0-9]*`) == "0 1\n"
	}, 30*time.Second, 100*time.Millisecond, "the partitions beyond the new count are gone")
	_, stderr, err := m.ShErr(`cat $MNT/f/3/records`)
	assert.Error(t, err)
	assert.Contains(t, stderr, "No such file or directory")
	assert.Equal(t, "num.partitions=2\n", m.Sh(t, `grep num.partitions $MNT/f/config`))
	m.Sh(t, `seq 10 > $MNT/f/append`)
	n0, err := strconv.Atoi(strings.TrimSpace(m.Sh(t, `wc -l < $MNT/f/0/records`)))
	require.NoError(t, err)
	got := append(consumeValues(t, kc, "f", 0, n0), consumeValues(t, kc, "f", 1, 10-n0)...)
	assert.ElementsMatch(t, strings.Fields(m.Sh(t, `seq 10`)), got, "every line of the topic append is in one of the two partitions")
}

// TestClusterRmdirMkdirAppends: a topic removed and made again through the
// mount takes appends at once, at partition and topic level (the producer
// forgets the old topic's id when the mount deletes it).
func TestClusterRmdirMkdirAppends(t *testing.T) {
	kc := startKfake(t)
	m := startMount(t, clusterMountOpts(t, kc, ""))
	m.Sh(t, `mkdir $MNT/v && seq 1 3 > $MNT/v/0/append`)
	m.Sh(t, `rmdir $MNT/v && mkdir $MNT/v && seq 4 6 > $MNT/v/0/append && echo 7 > $MNT/v/append`)
	assert.Equal(t, []string{"4", "5", "6", "7"}, consumeValues(t, kc, "v", 0, 4))
}
