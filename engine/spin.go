package engine

import (
	"syscall"
	"time"
)

// spinWait bounds how long one stage of a two-goroutine pipeline (the
// Reader's caller and prefetcher) polls for the other before it blocks on
// the channel. A goroutine blocked on a channel is woken through the
// scheduler on an idle thread (a futex wake, an inter-processor interrupt
// in a VM), and during the hand-off neither stage runs; polling first keeps
// both stages busy (docs/PERFORMANCE.md, engine read). Polling yields the
// CPU (sched_yield) so that on a
// loaded machine it gives way to the other stage or other processes instead
// of burning a slice.
const spinWait = 100 * time.Microsecond

// spinner polls a channel for one side of a pipeline, and stops polling
// after repeated timeouts (the other side is much slower: polling would
// only burn CPU), probing again every spinProbe waits.
type spinner struct {
	off    bool // never poll: one P (GOMAXPROCS=1), the other side cannot run meanwhile
	misses int  // consecutive polls that timed out
	waits  int
}

const (
	spinMaxMisses = 4
	spinProbe     = 16
)

// spinPoll polls ch until it holds a value or spinWait has passed.
func spinPoll[T any](s *spinner, ch chan T) {
	s.waits++
	if s.off || s.misses >= spinMaxMisses && s.waits%spinProbe != 0 {
		return
	}
	if pollFor(ch, spinWait) {
		s.misses = 0
	} else {
		s.misses++
	}
}

// spinReceive takes the next value from ch, polling briefly before
// blocking. It returns the zero value once ch is closed and drained.
func spinReceive[T any](s *spinner, ch chan T) T {
	select {
	case v := <-ch:
		return v
	default:
	}
	spinPoll(s, ch)
	return <-ch
}

// pollFor polls ch, yielding the CPU in between, until it holds a value
// (true) or d has passed (false). It does not receive.
func pollFor[T any](ch chan T, d time.Duration) bool {
	start := time.Now()
	for len(ch) == 0 {
		if time.Since(start) >= d {
			return false
		}
		syscall.RawSyscall(syscall.SYS_SCHED_YIELD, 0, 0, 0)
	}
	return true
}
