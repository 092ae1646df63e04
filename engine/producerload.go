// The producer state of a partition being opened, as Kafka's LogLoader
// rebuilds it (rebuildProducerState, ProducerStateManager.truncateAndReload):
// from the latest snapshot at or below where it is needed plus the batches
// after it, never by scanning the whole log when a snapshot is there.

package engine

import (
	"errors"
	"fmt"
	"path/filepath"

	"github.com/topicfs/topicfs/engine/vfs"
)

// producerStateBelow returns the producer state of the batches of segs
// below upto: the latest snapshot in (logStart, upto] that parses, plus
// the batches from its offset up to upto. Snapshots above upto or at or
// below the log start are deleted first, and one that fails to parse when
// tried (a write torn by a crash), as Kafka does (read-write only). With no
// snapshot the batches are scanned from the log start, unless clean: then,
// as in Kafka, a clean shutdown that left no snapshot means no producer
// worth a scan, and the state starts empty. found reports a snapshot.
func (p *Partition) producerStateBelow(segs []*Segment, logStart, upto int64, clean bool) (ps *producerState, found bool, err error) {
	p.removeSnapshotsLocked(func(off int64) bool { return off > upto || off <= logStart })
	ps = newProducerState()
	from := logStart
	offs := p.w.snaps.offsets
	for i := len(offs) - 1; i >= 0; i-- {
		off := offs[i]
		if off > upto || off <= logStart {
			continue
		}
		path := p.snapshotPath(off)
		data, err := vfs.ReadFile(p.fs, path)
		var entries []ProducerEntry
		if err == nil {
			entries, err = ParseProducerSnapshot(data)
		}
		if err != nil {
			p.logger.Warn("engine: cannot load producer snapshot; trying an older one", "file", path, "err", err)
			if errors.Is(err, ErrCorruptSnapshot) {
				off := off
				p.removeSnapshotsLocked(func(o int64) bool { return o == off })
			}
			continue
		}
		ps.load(entries, p.now().UnixMilli())
		from, found = off, true
		break
	}
	if !found && clean {
		return ps, false, nil
	}
	if from < upto {
		if err := scanProducers(ps, segs, from, upto); err != nil {
			return nil, found, fmt.Errorf("engine: rebuild producer state from offset %d: %w", from, err)
		}
	}
	return ps, found, nil
}

// scanProducers adds to ps the batches of segs with offsets in [from, to).
func scanProducers(ps *producerState, segs []*Segment, from, to int64) error {
	rd := NewSegmentReader(SegmentReaderOptions{})
	defer rd.Free()
	for i, s := range segs {
		if s.base >= to {
			break
		}
		if i+1 < len(segs) && segs[i+1].base <= from {
			continue // every offset of s is below from
		}
		pos := int64(0)
		if s.base < from {
			var err error
			if pos, err = s.FindOffset(from); err != nil {
				return err
			}
		}
		for end := s.Size(); pos < end; {
			b, err := rd.Batch(s, pos, end)
			if err != nil {
				return err
			}
			if b.BaseOffset >= to {
				break
			}
			if b.LastOffset() >= from {
				ps.observe(&b)
			}
			pos += int64(b.Size())
		}
	}
	return nil
}

// loadProducers sets the producer state of a partition opened after a
// clean shutdown (no recovery scan) with segments segs from logStart to
// leo.
func (p *Partition) loadProducers(segs []*Segment, logStart, leo int64) error {
	ps, found, err := p.producerStateBelow(segs, logStart, leo, true)
	if err != nil {
		return err
	}
	p.w.producers = ps
	if !found && !p.opts.ReadOnly {
		// Kafka's empty snapshots at the last two segments' bases: a later
		// recovery from there finds one instead of scanning the log.
		for _, s := range segs[max(len(segs)-2, 0):] {
			if s.base > logStart && s.base < leo {
				if err := p.takeSnapshotLocked(s.base); err != nil {
					return err
				}
			}
		}
	}
	return nil
}

// settleProducers finishes the producer state of a partition being
// opened, segs from logStart to leo: after a clean shutdown it is loaded
// here (recovery built it otherwise); then the snapshot at the log end is
// taken and the last stable offset published.
func (p *Partition) settleProducers(segs []*Segment, logStart, leo int64) error {
	if p.opts.CleanShutdown {
		if err := p.loadProducers(segs, logStart, leo); err != nil {
			return err
		}
	}
	if err := p.snapshotAtEnd(logStart, leo); err != nil {
		return err
	}
	p.publishLSOLocked()
	return nil
}

// snapshotAtEnd takes the snapshot at the log end of a partition just
// opened (Kafka's, after rebuilding the state), so that the next open
// starts there.
func (p *Partition) snapshotAtEnd(logStart, leo int64) error {
	p.removeSnapshotsLocked(func(off int64) bool { return off > leo })
	if leo <= logStart {
		return nil
	}
	return p.takeSnapshotLocked(leo)
}

// closeSnapshotLocked writes the snapshot at the log end on Close and
// makes it durable before the clean-shutdown marker says no scan is
// needed. Callers hold mu.
func (p *Partition) closeSnapshotLocked() error {
	if p.opts.ReadOnly {
		return nil
	}
	leo := p.logEnd.Load()
	if leo <= p.logStart.Load() {
		return nil
	}
	written, err := p.writeSnapshotLocked(leo, true)
	if err != nil {
		return err
	}
	if !written && !p.w.snaps.unsynced[leo] {
		return nil
	}
	if !written {
		// Taken earlier (at a roll, say) and not synced since.
		err = syncFile(p.fs, p.snapshotPath(leo))
		if err == nil {
			delete(p.w.snaps.unsynced, leo)
		}
	}
	if err == nil {
		err = p.fs.SyncDir(p.dir)
	}
	if err != nil {
		return fmt.Errorf("engine: sync producer snapshot %s: %w", filepath.Base(p.snapshotPath(leo)), err)
	}
	return nil
}
