package fusefs

import (
	"context"
	"encoding/json"
	"syscall"
	"time"

	"github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"

	"github.com/topicfs/topicfs/engine"
	"github.com/topicfs/topicfs/policies"
)

// statsNode is a partition's stats file, or with loc.id -1 a topic's: one
// JSON object, rendered when the file is opened.
type statsNode struct {
	fs.Inode
	fsys *fsys
	loc  partLoc
}

var (
	_ fs.NodeGetattrer = (*statsNode)(nil)
	_ fs.NodeSetattrer = (*statsNode)(nil)
	_ fs.NodeOpener    = (*statsNode)(nil)
	_ fs.NodeReader    = (*statsNode)(nil)
)

// partitionStats is the stats file's JSON. Field names are part of the
// user contract (scripts parse them): snake_case, and every top-level key is
// always present (active_segment is null only for a partition without
// segments; policies is always an object, explanations always an array).
type partitionStats struct {
	Topic          string `json:"topic"`
	Partition      int    `json:"partition"`
	LogStartOffset int64  `json:"log_start_offset"`
	LogEndOffset   int64  `json:"log_end_offset"`
	// LastStableOffset is where read_committed readers (and the views)
	// stop: the first offset of the oldest open transaction, else the
	// log end.
	LastStableOffset int64         `json:"last_stable_offset"`
	SizeBytes        int64         `json:"size_bytes"`
	SegmentCount     int           `json:"segment_count"`
	FirstTimestamp   int64         `json:"first_timestamp"` // -1: empty
	LastTimestamp    int64         `json:"last_timestamp"`  // -1: empty
	RecoveryPoint    int64         `json:"recovery_point"`
	ActiveSegment    *segmentStats `json:"active_segment"`
	Counters         counterStats  `json:"counters"`
	// LastRollReason is why the active segment last rolled on this mount
	// (engine.RollReason: size, time, index full, offset overflow,
	// retention), "" before the first roll; LastRollTime is when (null
	// before).
	LastRollReason string                   `json:"last_roll_reason"`
	LastRollTime   *time.Time               `json:"last_roll_time"`
	Policies       *policies.PartitionState `json:"policies"`
	Explanations   []string                 `json:"explanations"`
}

// segmentStats describes the active segment in stats (snake_case like the
// rest of the file).
type segmentStats struct {
	BaseOffset   int64     `json:"base_offset"`
	NextOffset   int64     `json:"next_offset"`
	SizeBytes    int64     `json:"size_bytes"`
	MaxTimestamp int64     `json:"max_timestamp"`
	Created      time.Time `json:"created"`
}

// counterStats are the partition's engine counters since it was opened.
type counterStats struct {
	BytesAppended   int64 `json:"bytes_appended"`
	RecordsAppended int64 `json:"records_appended"`
	BatchesAppended int64 `json:"batches_appended"`
	BytesRead       int64 `json:"bytes_read"`
	Reads           int64 `json:"reads"`
	Flushes         int64 `json:"flushes"`
	Rolls           int64 `json:"rolls"`
	SegmentsDeleted int64 `json:"segments_deleted"`
	Corruptions     int64 `json:"corruptions"`
}

func countersOf(p *engine.Partition) counterStats {
	c := p.Stats()
	return counterStats{
		BytesAppended: c.BytesAppended, RecordsAppended: c.RecordsAppended, BatchesAppended: c.BatchesAppended,
		BytesRead: c.BytesRead, Reads: c.Reads, Flushes: c.Flushes, Rolls: c.Rolls,
		SegmentsDeleted: c.SegmentsDeleted, Corruptions: c.Corruptions,
	}
}

// statsRenderer is a partition (of a cluster) that renders its own stats
// file.
type statsRenderer interface {
	StatsJSON(ctx context.Context) ([]byte, error)
}

func (s *statsNode) renderBase(ctx context.Context) ([]byte, error) {
	if s.loc.id < 0 {
		return s.renderTopic(ctx)
	}
	bp, _, err := s.fsys.partition(ctx, s.loc)
	if err != nil {
		return nil, err
	}
	p := localOf(bp)
	if p == nil {
		if r, ok := bp.(statsRenderer); ok {
			return r.StatsJSON(ctx)
		}
		return []byte("{}\n"), nil
	}
	st := partitionStats{
		Topic:            s.loc.topic,
		Partition:        s.loc.id,
		LogStartOffset:   p.LogStartOffset(),
		LogEndOffset:     p.LogEndOffset(),
		LastStableOffset: p.LastStableOffset(),
		FirstTimestamp:   -1,
		LastTimestamp:    -1,
		RecoveryPoint:    p.RecoveryPoint(),
		Counters:         countersOf(p),
	}
	if es := p.Stats(); es.LastRollReason != "" {
		st.LastRollReason = string(es.LastRollReason)
		at := es.LastRollTime.UTC()
		st.LastRollTime = &at
	}
	infos := p.Segments()
	st.SegmentCount = len(infos)
	for i := range infos {
		st.SizeBytes += infos[i].Size
		if infos[i].NextOffset > infos[i].BaseOffset && infos[i].MaxTimestamp > st.LastTimestamp {
			st.LastTimestamp = infos[i].MaxTimestamp
		}
		if a := infos[i]; a.Active {
			st.ActiveSegment = &segmentStats{BaseOffset: a.BaseOffset, NextOffset: a.NextOffset, SizeBytes: a.Size, MaxTimestamp: a.MaxTimestamp, Created: a.Created}
		}
	}
	st.FirstTimestamp = firstTimestamp(p)
	if s.fsys.opts.State != nil {
		if ps, ok := s.fsys.opts.State(s.loc.topic, s.loc.id); ok {
			st.Policies = &ps
		}
	}
	if st.Policies == nil {
		st.Policies = idlePolicyState(s.loc, p, s.fsys.opts.ReadOnly)
	}
	st.Explanations = st.Policies.Explanations
	if st.Explanations == nil {
		st.Explanations = []string{}
	}
	b, err := json.MarshalIndent(st, "", "  ")
	if err != nil {
		return nil, err
	}
	return append(b, '\n'), nil
}

// idlePolicyState is the cleaner and retention state of a partition when no
// scheduler reports one (a read-only mount runs neither): the configured
// policy, the cleaner checkpoint, and a sentence saying nothing runs.
func idlePolicyState(loc partLoc, p *engine.Partition, readOnly bool) *policies.PartitionState {
	cfg := p.Config()
	why := "retention and log cleaning are not running on this mount, so no segment is deleted or compacted"
	if readOnly {
		why = "read-only mount: retention and log cleaning do not run, so no segment is deleted or compacted"
	}
	return &policies.PartitionState{
		Topic: loc.topic, Partition: loc.id, CleanupPolicy: cfg.CleanupPolicy,
		MinCleanableDirtyRatio: cfg.MinCleanableDirtyRatio,
		FirstDirtyOffset:       p.FirstDirtyOffset(),
		FirstUncleanableOffset: -1,
		RetentionExplanation:   why,
		CleanerExplanation:     why,
		Explanations:           []string{why},
	}
}

// firstTimestamp is the timestamp of the first retained record, -1 if none.
func firstTimestamp(p *engine.Partition) int64 {
	snap := p.Snapshot()
	defer snap.Release()
	start := snap.LogStartOffset
	for _, seg := range snap.Segments {
		if seg.NextOffset() <= start {
			continue
		}
		pos, err := seg.FindOffset(start)
		if err != nil {
			return -1
		}
		for pos < seg.Size() {
			b, err := seg.ReadBatch(pos, nil)
			if err != nil {
				return -1
			}
			pos += int64(b.Size())
			if b.IsControl() {
				continue
			}
			recs, err := b.Records(nil)
			if err != nil {
				return -1
			}
			for _, r := range recs {
				if r.Offset >= start {
					return r.Timestamp
				}
			}
		}
	}
	return -1
}

func (s *statsNode) Getattr(ctx context.Context, f fs.FileHandle, out *fuse.AttrOut) syscall.Errno {
	if h, ok := f.(*statsHandle); ok {
		out.Size = uint64(len(h.content))
	} else {
		b, err := s.render(ctx)
		if err != nil {
			return s.fsys.errno("getattr", err)
		}
		out.Size = uint64(len(b))
	}
	out.Mode = syscall.S_IFREG | 0444
	out.Nlink = 1
	s.fsys.setTimes(&out.Attr, s.fsys.mounted)
	return 0
}

func (s *statsNode) Setattr(ctx context.Context, f fs.FileHandle, in *fuse.SetAttrIn, out *fuse.AttrOut) syscall.Errno {
	if s.fsys.opts.ReadOnly {
		return syscall.EROFS
	}
	return syscall.EACCES
}

type statsHandle struct{ content []byte }

// Open renders the stats once for the handle; reads bypass the page cache
// (FOPEN_DIRECT_IO) as the size changes with every append.
func (s *statsNode) Open(ctx context.Context, flags uint32) (fs.FileHandle, uint32, syscall.Errno) {
	if flags&syscall.O_ACCMODE != syscall.O_RDONLY {
		if s.fsys.opts.ReadOnly {
			return nil, 0, syscall.EROFS
		}
		return nil, 0, syscall.EACCES
	}
	b, err := s.render(ctx)
	if err != nil {
		return nil, 0, s.fsys.errno("open stats", err)
	}
	return &statsHandle{content: b}, fuse.FOPEN_DIRECT_IO, 0
}

func (s *statsNode) Read(ctx context.Context, f fs.FileHandle, dest []byte, off int64) (fuse.ReadResult, syscall.Errno) {
	h, ok := f.(*statsHandle)
	if !ok {
		return nil, syscall.EBADF
	}
	if off >= int64(len(h.content)) {
		return fuse.ReadResultData(nil), 0
	}
	return fuse.ReadResultData(h.content[off:min(int64(len(h.content)), off+int64(len(dest)))]), 0
}
