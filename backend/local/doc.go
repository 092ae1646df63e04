// Package local is the backend.Backend of one data directory: it adapts
// engine.LogDir, Topic and Partition to the interfaces of package backend.
// Its Partition embeds the engine partition, so the file tree's local-only
// parts (the segments/ directory, stats' segment and policy fields, the
// append path that encodes outside the partition lock) reach the engine
// through Engine() without widening the backend interface.
//
// Owns: the adaptation and the validation of config writes (AlterConfig).
// Imports: backend, engine/... Must not import: fusefs, policies, go-fuse.
package local
