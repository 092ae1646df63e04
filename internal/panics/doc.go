// Package panics is the mount's one way of surviving a bug: code that
// serves one request, or runs one background task, recovers a panic at its
// boundary and hands it to Recovered, which logs it with its stack, counts
// it for the metrics server (topicfs_panics_total{where,op}) and returns an
// error for the caller to fail just that request or task with.
//
// The counts are process-wide: a topicfs process serves one mount, and the
// metrics server exports whatever this process recovered.
//
// Owns: panic recovery and its counter. Imports: only the standard library,
// so engine-facing code (policies, fusefs, internal/cli) can import it
// without dependencies (internal/archtest).
package panics
