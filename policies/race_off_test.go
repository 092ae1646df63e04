//go:build !race

package policies

// defaultCleanerKeys is the memory test's distinct key count (set
// TOPICFS_CLEANER_KEYS=10000000 locally for the 10M run).
const defaultCleanerKeys = 1_000_000

// raceEnabled reports a -race build (whose shadow memory inflates RSS).
const raceEnabled = false
