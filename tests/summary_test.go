package tests

import (
	"fmt"
	"os"
	"testing"
)

// reportSummary makes a suite's numbers (cycles, inputs tried, records
// verified) readable in CI output: go test shows nothing of a passing test
// without -v, so the line also goes to $TOPICFS_SUMMARY_FILE, which .ci/run
// prints after the test step.
func reportSummary(msg string) {
	if testing.Verbose() {
		fmt.Println(msg)
	}
	path := os.Getenv("TOPICFS_SUMMARY_FILE")
	if path == "" {
		return
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
	if err != nil {
		return
	}
	defer f.Close()
	fmt.Fprintln(f, msg)
}
