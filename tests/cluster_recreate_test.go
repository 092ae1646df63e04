package tests

import (
	"context"
	"fmt"
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
	ct.Topic, ct.NumPartitions, ct.ReplicationFactor = topic, 1, 3
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
