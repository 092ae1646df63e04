//go:build race

package record

// raceEnabled reports a -race build: its sync.Pool drops a share of what
// is put back, so code that reuses pooled buffers allocates now and then.
const raceEnabled = true
