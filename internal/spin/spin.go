// Package spin is bounded polling for the hand-offs of two-goroutine
// pipelines (the engine's reader and write goroutine, the mount's read
// ahead).
//
// On these VMs a goroutine blocked on a channel is woken through an idle
// CPU that first has to come out of its halt (an inter-processor interrupt
// through the hypervisor): measured 70-240 µs per hand-off, longer than the
// work handed off (rendering a 1 MiB chunk takes ~0.4 ms). A stage that
// polls the channel for a while before it blocks keeps its CPU awake and
// takes the next piece at once. Polling yields the CPU (sched_yield), so on
// a loaded machine it gives way instead of burning a time slice.
package spin

import (
	"syscall"
	"time"
)

// PollFor polls ch, yielding the CPU in between, until it holds a value
// (true) or d has passed (false). It does not receive.
func PollFor[T any](ch chan T, d time.Duration) bool {
	start := time.Now()
	for len(ch) == 0 {
		if time.Since(start) >= d {
			return false
		}
		syscall.RawSyscall(syscall.SYS_SCHED_YIELD, 0, 0, 0)
	}
	return true
}
