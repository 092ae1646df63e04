// Package testutil holds helpers shared by the tests of several packages:
// file trees (engine, tools) and guarded buffers (engine/record, fusefs).
// Only tests import it.
//
// Owns: test helpers only. Only _test.go files may import it; a non-test
// file importing it fails internal/archtest.
package testutil
