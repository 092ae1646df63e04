// Package policies decides what the engine deletes and compacts (the engine
// rolls segments itself, at append time), and runs those decisions in the
// background like a Kafka broker's log manager and log cleaner.
//
// The decisions are pure functions over an engine snapshot
// ([]engine.SegmentInfo, engine.Config, a clock), so they are table-tested
// without a disk:
//
//	segs := p.Segments()
//	n, reason := policies.RetentionPlan(segs, p.Config(), p.LogStartOffset(), time.Now())
//	if n > 0 {
//		// by end offset, re-checked under the writer lock: the active
//		// segment may have rolled meanwhile (the engine does the file work)
//		p.DeleteSegmentsBelow(policies.DeleteEnd(segs, n), reason)
//	}
//
// The log cleaner (compaction) follows Kafka's LogCleaner: it picks the log
// with the highest dirty ratio, builds an OffsetMap (127-bit key hash → latest
// offset) over the dirty range, then rewrites every segment from the log start
// up to where the map reached, keeping each key's latest record, and swaps the
// result in through the engine's .cleaned/.swap protocol.
//
// A Scheduler ties both to a LogDir:
//
//	s := policies.NewScheduler(logDir, policies.Options{})
//	s.Start()
//	defer s.Stop()
//	st := s.State("orders", 0) // dirty ratio, last cleaning, plain-words explanations
//
// Tests drive passes synchronously with RunRetention and RunCleaner and inject
// a clock through Options.Now.
//
// Owns: when to roll, delete and compact, the cleaner's rewrite, and the
// per-partition policy state fusefs shows in stats. Imports: engine/...
// and internal/panics. Must not import fusefs or go-fuse: the engine does
// the file work, the mount only reads State (internal/archtest).
package policies
