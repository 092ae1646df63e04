// Package backend is the seam between the file tree (fusefs) and where
// topics live. fusefs talks to a Backend, its Topics and Partitions: list,
// create and delete topics; append records; read a partition's offsets, find
// an offset by time and take a Snapshot of the segments holding the records
// from an offset on; read and alter the configuration. Two stores implement
// it: the local engine (backend/local, one data directory) and a Kafka
// cluster (cluster mode).
//
// Views read record batches in Kafka's on-disk format from a Snapshot's
// Segments, whatever the backend: the local engine hands out its segment
// files; a cluster backend hands out the segments of a local read-through
// copy of what it fetched.
//
// What only one disk has (segment files to list, recovery points, policy
// state) is not part of the interface: fusefs asks for it through
// backend/local's optional interfaces and leaves it out in cluster mode.
//
// Owns: the interfaces and the sentinel errors every backend wraps.
// Imports: engine/record and engine/index (types only). Must not import:
// engine, fusefs, policies, go-fuse, franz-go (internal/archtest).
package backend
