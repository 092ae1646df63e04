//go:build race

package tests

// raceEnabled is true when the tests run with -race; the harness then builds
// topicfs with -race too.
const raceEnabled = true
