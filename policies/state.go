package policies

import "time"

// PartitionState is what the scheduler knows of one partition's retention
// and cleaning, for the mount's stats file. Marshal it with encoding/json.
type PartitionState struct {
	Topic         string `json:"topic"`
	Partition     int    `json:"partition"`
	CleanupPolicy string `json:"cleanup_policy"`

	// Compaction.
	DirtyRatio             float64      `json:"dirty_ratio"`
	MinCleanableDirtyRatio float64      `json:"min_cleanable_dirty_ratio"`
	FirstDirtyOffset       int64        `json:"first_dirty_offset"`
	FirstUncleanableOffset int64        `json:"first_uncleanable_offset"`
	CleanableBytes         int64        `json:"cleanable_bytes"`
	Cleaning               bool         `json:"cleaning_in_progress"`
	Cleanings              int64        `json:"cleanings"`
	LastCleaning           *CleaningRun `json:"last_cleaning,omitempty"`

	// PoliciesStopped is set when a task of the partition panicked: its
	// background policies (retention, flush, cleaning) stopped.
	PoliciesStopped *PoliciesStopped `json:"policies_stopped,omitempty"`

	// Retention.
	LastRetentionCheck   time.Time `json:"last_retention_check,omitzero"`
	NextRetentionCheck   time.Time `json:"next_retention_check,omitzero"`
	BytesDeleted         int64     `json:"bytes_deleted"`
	SegmentsDeleted      int64     `json:"segments_deleted"`
	LastDeletionReason   string    `json:"last_deletion_reason,omitempty"`
	LastFlush            time.Time `json:"last_flush,omitzero"`
	LastError            string    `json:"last_error,omitempty"`
	LastErrorTime        time.Time `json:"last_error_time,omitzero"`
	RetentionExplanation string    `json:"why_oldest_segment_kept,omitempty"`
	CleanerExplanation   string    `json:"why_cleaned_or_not,omitempty"`

	// Explanations are the plain-words answers above plus any further notes
	// (tombstones waiting for their delete horizon, a cleaning cut short by
	// a full offset map), one sentence each.
	Explanations []string `json:"explanations"`
}

// CleaningRun describes one cleaning of a partition.
type CleaningRun struct {
	Start            time.Time `json:"start"`
	DurationMs       int64     `json:"duration_ms"`
	FirstDirtyOffset int64     `json:"first_dirty_offset"`
	// EndOffset is the first offset not covered by the offset map: the new
	// cleaner checkpoint when the run completed.
	EndOffset   int64 `json:"end_offset"`
	BytesIn     int64 `json:"bytes_in"`
	BytesOut    int64 `json:"bytes_out"`
	SegmentsIn  int   `json:"segments_in"`
	SegmentsOut int   `json:"segments_out"`
	// SegmentsUnchanged counts segments the run left as they were (every
	// batch kept byte for byte, nothing to merge), among SegmentsOut.
	SegmentsUnchanged int `json:"segments_unchanged"`
	// MappedKeys is the number of distinct keys in the offset map.
	MappedKeys int64 `json:"mapped_keys"`
	// MapCapacityKeys is the most keys one cleaning maps: the offset map's
	// slots (the thread's share of log.cleaner.dedupe.buffer.size / 24) ×
	// log.cleaner.io.buffer.load.factor, as on a broker.
	MapCapacityKeys int64 `json:"offset_map_capacity_keys"`
	RecordsKept     int64 `json:"records_kept"`
	RecordsDropped  int64 `json:"records_dropped"`
	BatchesCopied   int64 `json:"batches_copied"`
	BatchesRebuilt  int64 `json:"batches_rebuilt"`
	BatchesDropped  int64 `json:"batches_dropped"`
	// TombstonesKept counts tombstones and transaction markers kept until
	// their delete horizon; EarliestHorizonMs is the soonest such horizon
	// (-1 none).
	TombstonesKept    int64 `json:"tombstones_kept"`
	EarliestHorizonMs int64 `json:"earliest_delete_horizon_ms"`
	// MapFull reports that the offset map filled before the dirty range
	// ended; the rest is cleaned by a later run.
	MapFull bool `json:"offset_map_full"`
	// OpenTxnOffset is the first offset of a transaction still open (no
	// COMMIT or ABORT marker yet) that cut the run short, -1 none.
	OpenTxnOffset int64 `json:"open_transaction_offset"`
	// Outcome is "done", or "abandoned: <why>" (a conflicting retention, a
	// stop) — an abandoned run changes nothing on disk.
	Outcome string `json:"outcome"`
}

// MBPerSec returns the run's input throughput.
func (r *CleaningRun) MBPerSec() float64 {
	if r.DurationMs <= 0 {
		return 0
	}
	return float64(r.BytesIn) / (1 << 20) / (float64(r.DurationMs) / 1000)
}
