package policies

import (
	"errors"
	"fmt"
	"runtime/debug"
	"sync/atomic"
	"time"

	"github.com/topicfs/topicfs/engine"
	"github.com/topicfs/topicfs/internal/panics"
)

// PoliciesStopped says that a partition's background policies stopped
// after a panic in one of its tasks: the scheduler no longer
// retains, flushes (flush.ms), purges or cleans it until the next mount;
// every other partition goes on. In stats as "policies_stopped".
type PoliciesStopped struct {
	Reason string    `json:"reason"` // "panic: <value>"
	Task   string    `json:"task"`   // "housekeeping" (retention, flush, purge) or "cleaner"
	At     time.Time `json:"at"`
}

// errStopped refuses CleanPartition on a partition whose policies stopped.
var errStopped = errors.New("policies: background policies of this partition stopped after a panic (see stats); remount to restart them")

// panicHook, set by tests only, is called at the start of every guarded
// task with the task and the partition; it injects a panic by panicking.
var panicHook atomic.Pointer[func(task, topic string, partition int)]

// guard runs fn, one task of p's policies. A panic in it is recovered
// here: logged with its stack, counted (topicfs_panics_total{where=
// "policies",op=task}), p's policies stop (PoliciesStopped) and the panic
// is returned as an error; the scheduler goes on with the other
// partitions.
func (s *Scheduler) guard(p *engine.Partition, task string, fn func() error) (err error) {
	defer func() {
		if v := recover(); v != nil {
			e := panics.Recovered(s.log, "policies", task, v, debug.Stack(), "topic", p.Topic(), "partition", p.ID())
			s.stopPolicies(p, task, e)
			err = e
		}
	}()
	if h := panicHook.Load(); h != nil {
		(*h)(task, p.Topic(), p.ID())
	}
	return fn()
}

// stopPolicies records that p's policies stopped after the panic e.
func (s *Scheduler) stopPolicies(p *engine.Partition, task string, e *panics.Error) {
	now := s.now()
	s.mu.Lock()
	defer s.mu.Unlock()
	st := s.stateLocked(p)
	if st.stopped == nil {
		st.stopped = &PoliciesStopped{Reason: fmt.Sprintf("panic: %v", e.Value), Task: task, At: now}
	}
	st.lastErr, st.lastErrTime = task+": "+e.Error(), now
}

// policiesStopped reports whether p's policies stopped after a panic.
func (s *Scheduler) policiesStopped(p *engine.Partition) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.stateLocked(p).stopped != nil
}

// housekeepGuarded is housekeepPartition for a partition whose policies
// still run, guarded.
func (s *Scheduler) housekeepGuarded(p *engine.Partition, force bool) error {
	if s.policiesStopped(p) {
		return nil
	}
	return s.guard(p, "housekeeping", func() error { return s.housekeepPartition(p, force) })
}

// cleanGuarded is c.clean of p, guarded.
func (s *Scheduler) cleanGuarded(c *cleaner, p *engine.Partition, force bool) (run *CleaningRun, err error) {
	err = s.guard(p, "cleaner", func() error {
		run, err = c.clean(s.ctx, p, s.now(), force)
		return err
	})
	return run, err
}

// stoppedExplanation is the plain-words note stats leads with for a
// partition whose policies stopped.
func stoppedExplanation(st *PoliciesStopped) string {
	return fmt.Sprintf("background policies (retention, flush.ms, cleaning) of this partition stopped at %s after a %s in the %s task; they run again after a remount",
		st.At.UTC().Format(time.RFC3339), st.Reason, st.Task)
}
