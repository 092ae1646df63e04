//go:build race

package policies

// defaultCleanerKeys is smaller under the race detector, which slows the
// appends and the cleaning several times over.
const defaultCleanerKeys = 150_000

// raceEnabled reports a -race build (whose shadow memory inflates RSS).
const raceEnabled = true
