//go:build !linux

package vfs

// Allocate is a no-op where fallocate does not exist.
func Allocate(f File, off, n int64) error { return nil }

// ReleaseBeyond is a no-op where fallocate does not exist.
func ReleaseBeyond(f File, size int64) error { return nil }
