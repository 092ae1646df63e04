// Package archtest holds no code, only a test: imports_test.go checks the
// import rules of docs/ARCHITECTURE.md ("Import rules") against what each
// package really imports (go list -deps), so a forbidden import fails the
// build of the test suite instead of a code review.
//
// Owns: the rule table in imports_test.go. Must not import: anything (it is
// imported by nothing and imports only the standard library in its test).
package archtest
