//go:build !race

package record

// raceEnabled reports a -race build (race_on_test.go).
const raceEnabled = false
