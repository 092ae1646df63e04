//go:build race

package policies

// defaultCleanerKeys is smaller under the race detector, which slows the
// appends and the cleaning several times over.
const defaultCleanerKeys = 150_000
