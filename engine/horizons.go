package engine

import "time"

// DeleteHorizonsFile is topicfs's own root file (docs/FORMATS.md §8.6), in
// the offset checkpoint format (§6.1): for each compacted partition whose
// last cleaning kept tombstones or transaction markers with a delete
// horizon, the earliest such horizon in Unix milliseconds.
//
// Kafka writes each horizon into its batch (deleteHorizonMs, KIP-534) and
// topicfs does the same, so the horizons themselves survive a remount.
// What this file keeps is the trigger: the scheduler cleans a quiet
// compacted log (dirty ratio below min.cleanable.dirty.ratio) once that
// horizon has passed, so its tombstones do go. Without the file a remount
// would forget when that is, and the tombstones would stay until enough new
// data made the log dirty again. Finding it at open instead would mean
// reading every batch header of the clean part of every compacted log.
//
// It is written with the other checkpoints (every 60 s and at shutdown); a
// stale entry costs at most one cleaning that finds nothing to drop.
const DeleteHorizonsFile = "topicfs-delete-horizons"

// PendingDeleteHorizon returns the earliest delete horizon (Unix ms) of
// the tombstones and markers the last cleaning kept, 0 when none is known.
func (p *Partition) PendingDeleteHorizon() int64 { return p.horizon.Load() }

// SetPendingDeleteHorizon records the earliest delete horizon the last
// cleaning left (0 or negative: none); the LogDir checkpoints it in
// topicfs-delete-horizons.
func (p *Partition) SetPendingDeleteHorizon(ms int64) { p.horizon.Store(max(ms, 0)) }

// LastModified returns the modification time of the segment's .log file
// (Kafka's LogSegment.lastModified), or when this process created or
// opened the segment if the file cannot be stat'ed. The cleaner's rule for
// legacy tombstones, which carry no delete horizon, compares these times.
func (s *Segment) LastModified() time.Time {
	if fi, err := s.fs.Stat(s.LogPath()); err == nil {
		return fi.ModTime()
	}
	return s.created
}
