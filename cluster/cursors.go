package cluster

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/topicfs/topicfs/backend"
)

// A cursor of a cluster is the consumer group of the same name: its
// positions are the group's committed offsets (OffsetCommit, OffsetFetch),
// so kafka-consumer-groups.sh --describe --group NAME shows them and their
// lag. topicfs commits as a "simple" consumer (generation -1, no member
// id), as kafka-consumer-groups.sh --reset-offsets does: a group with
// active members refuses that (ErrCursorBusy, EBUSY), and a group that is
// a cursor has no members.

var _ backend.Cursors = (*Cluster)(nil)

// cursorMetadata marks the offsets topicfs commits (the group's committed
// metadata, shown by no tool but kept by the broker).
const cursorMetadata = "topicfs"

// fetchGroups returns the committed offsets of groups on topic: group →
// partition → offset (groups with none are absent).
func (c *Cluster) fetchGroups(ctx context.Context, topic string, groups []string) (map[string]map[int]int64, error) {
	all, err := c.fetchOffsets(ctx, groups)
	if err != nil {
		return nil, err
	}
	out := map[string]map[int]int64{}
	for g, topics := range all {
		if offs := topics[topic]; len(offs) > 0 {
			out[g] = offs
		}
	}
	return out, nil
}

// fetchOffsets returns every offset groups have committed, with one
// OffsetFetch: group → topic → partition → offset (groups that do not
// exist, or have no offsets, are absent).
func (c *Cluster) fetchOffsets(ctx context.Context, groups []string) (map[string]map[string]map[int]int64, error) {
	if err := c.usable(); err != nil {
		return nil, err
	}
	out := map[string]map[string]map[int]int64{}
	if len(groups) == 0 {
		return out, nil
	}
	rctx, cancel := c.reqCtx(ctx)
	defer cancel()
	req := kmsg.NewPtrOffsetFetchRequest()
	for _, g := range groups {
		rg := kmsg.NewOffsetFetchRequestGroup()
		rg.Group = g // Topics nil: every topic of the group
		req.Groups = append(req.Groups, rg)
	}
	resp, err := req.RequestWith(rctx, c.client)
	if err != nil {
		return nil, mapErr("fetch cursor offsets", err)
	}
	for _, g := range resp.Groups {
		if err := codeErr(g.ErrorCode, nil); err != nil {
			if errors.Is(err, kerr.GroupIDNotFound) {
				continue
			}
			return nil, mapErr("fetch the offsets of group "+g.Group, err)
		}
		for _, t := range g.Topics {
			for _, p := range t.Partitions {
				if err := codeErr(p.ErrorCode, nil); err != nil {
					return nil, mapErr(fmt.Sprintf("fetch the offset of group %s on %s/%d", g.Group, t.Topic, p.Partition), err)
				}
				if p.Offset < 0 {
					continue // no commit
				}
				if out[g.Group] == nil {
					out[g.Group] = map[string]map[int]int64{}
				}
				if out[g.Group][t.Topic] == nil {
					out[g.Group][t.Topic] = map[int]int64{}
				}
				out[g.Group][t.Topic][int(p.Partition)] = p.Offset
			}
		}
	}
	return out, nil
}

// Cursor returns the committed offsets of group name on topic.
func (c *Cluster) Cursor(ctx context.Context, topic, name string) (map[int]int64, bool, error) {
	m, err := c.fetchGroups(ctx, topic, []string{name})
	if err != nil {
		return nil, false, err
	}
	return m[name], len(m[name]) > 0, nil
}

// CommitCursor commits offs for group name as a simple consumer.
func (c *Cluster) CommitCursor(ctx context.Context, topic, name string, offs map[int]int64) error {
	id, err := c.topicID(ctx, topic)
	if err != nil {
		return err
	}
	rctx, cancel := c.reqCtx(ctx)
	defer cancel()
	req := kmsg.NewPtrOffsetCommitRequest()
	req.Group = name
	req.Generation = -1
	req.MemberID = ""
	rt := kmsg.NewOffsetCommitRequestTopic()
	rt.Topic, rt.TopicID = topic, id // OffsetCommit v10 names topics by id
	for _, id := range slices.Sorted(maps.Keys(offs)) {
		rp := kmsg.NewOffsetCommitRequestTopicPartition()
		rp.Partition = int32(id)
		rp.Offset = offs[id]
		rp.LeaderEpoch = -1
		rp.Metadata = kmsg.StringPtr(cursorMetadata)
		rt.Partitions = append(rt.Partitions, rp)
	}
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(rctx, c.client)
	if err == nil {
		err = commitErr(resp)
	}
	if err != nil {
		return mapErr(fmt.Sprintf("commit cursor %s of %s", name, topic), err)
	}
	return nil
}

// topicID returns the id of topic (zero from a broker before Kafka 2.8),
// from the topic's metadata as lookups cache it (topicFresh).
func (c *Cluster) topicID(ctx context.Context, topic string) ([16]byte, error) {
	t, err := c.topic(ctx, topic)
	if err != nil {
		return [16]byte{}, err
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.id, nil
}

// commitErr returns the first error of an OffsetCommit response.
func commitErr(resp *kmsg.OffsetCommitResponse) error {
	for _, t := range resp.Topics {
		for _, p := range t.Partitions {
			if err := codeErr(p.ErrorCode, nil); err != nil {
				return fmt.Errorf("partition %d: %w", p.Partition, err)
			}
		}
	}
	return nil
}

// DeleteCursor deletes the group's offsets of partitions (nil: all) on
// topic (OffsetDelete), and the group itself once it has no offsets left.
func (c *Cluster) DeleteCursor(ctx context.Context, topic, name string, partitions []int) error {
	have, _, err := c.Cursor(ctx, topic, name)
	if err != nil {
		return err
	}
	var del []int
	for id := range have {
		if partitions == nil || slices.Contains(partitions, id) {
			del = append(del, id)
		}
	}
	if len(del) == 0 {
		return fmt.Errorf("cluster: cursor %s of %s: %w", name, topic, backend.ErrUnknownCursor)
	}
	slices.Sort(del)
	rctx, cancel := c.reqCtx(ctx)
	defer cancel()
	req := kmsg.NewPtrOffsetDeleteRequest()
	req.Group = name
	rt := kmsg.NewOffsetDeleteRequestTopic()
	rt.Topic = topic
	for _, id := range del {
		rp := kmsg.NewOffsetDeleteRequestTopicPartition()
		rp.Partition = int32(id)
		rt.Partitions = append(rt.Partitions, rp)
	}
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(rctx, c.client)
	if err == nil {
		err = offsetDeleteErr(resp)
	}
	if err != nil {
		return mapErr(fmt.Sprintf("delete cursor %s of %s", name, topic), err)
	}
	return c.dropEmptyGroup(ctx, name)
}

func offsetDeleteErr(resp *kmsg.OffsetDeleteResponse) error {
	if err := codeErr(resp.ErrorCode, nil); err != nil {
		return err
	}
	for _, t := range resp.Topics {
		for _, p := range t.Partitions {
			if err := codeErr(p.ErrorCode, nil); err != nil {
				return fmt.Errorf("partition %d: %w", p.Partition, err)
			}
		}
	}
	return nil
}

// dropEmptyGroup deletes group name if it has no committed offsets left on
// any topic, so that a removed cursor leaves no empty group behind. It is
// tidying only: a failure is logged.
func (c *Cluster) dropEmptyGroup(ctx context.Context, name string) error {
	// Fetched again after the delete, not derived from the offsets fetched
	// before it: a commit in between must keep the group (deleting a group
	// deletes its offsets).
	left, err := c.fetchOffsets(ctx, []string{name})
	if err != nil {
		c.log.Debug("cluster: could not check a cursor's group for offsets left", "group", name, "err", err)
		return nil
	}
	if len(left[name]) > 0 {
		return nil // offsets on other partitions or topics
	}
	rctx, cancel := c.reqCtx(ctx)
	defer cancel()
	dreq := kmsg.NewPtrDeleteGroupsRequest()
	dreq.Groups = []string{name}
	dresp, err := dreq.RequestWith(rctx, c.client)
	if err == nil {
		err = single(dresp.Groups, func(g *kmsg.DeleteGroupsResponseGroup) (int16, *string) { return g.ErrorCode, g.ErrorMessage })
	}
	if err != nil && !errors.Is(err, kerr.GroupIDNotFound) {
		c.log.Debug("cluster: could not delete an empty cursor group", "group", name, "err", err)
	}
	return nil
}

// ListCursors returns every group with committed offsets on topic.
func (c *Cluster) ListCursors(ctx context.Context, topic string) (map[string]map[int]int64, error) {
	if err := c.usable(); err != nil {
		return nil, err
	}
	rctx, cancel := c.reqCtx(ctx)
	defer cancel()
	req := kmsg.NewPtrListGroupsRequest()
	resp, err := req.RequestWith(rctx, c.client)
	if err == nil {
		err = codeErr(resp.ErrorCode, nil)
	}
	if err != nil {
		return nil, mapErr("list cursor groups", err)
	}
	groups := make([]string, 0, len(resp.Groups))
	for _, g := range resp.Groups {
		if g.GroupType == "" || g.GroupType == "classic" || g.GroupType == "consumer" {
			groups = append(groups, g.Group)
		}
	}
	slices.Sort(groups)
	return c.fetchGroups(ctx, topic, groups)
}
