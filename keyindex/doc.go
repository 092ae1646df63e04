// Package keyindex is the key index behind a topic's by-key/ directory: per
// partition, a hash table from each key to the offset of its latest record,
// so that reading one key costs a probe and one record read instead of a
// scan of the log.
//
// An Index works on any backend.Partition: it reads the partition once
// through Snapshot (as a read_committed consumer: control batches and
// aborted transactions skipped) and then follows it (Subscribe), so the
// local engine and a Kafka cluster get the same table. Offsets never change
// under compaction, and cleaning keeps every key's latest record, so
// cleaning leaves the table valid; retention and the cleaner's removal of
// old tombstones are found when a lookup reads the record and drops its
// entry.
//
// Memory: tables draw on one Budget per mount (key.index.memory.bytes); a
// table that does not fit lives in a spill file (anonymous: O_TMPFILE) in
// the data directory, mapped, its blocks allocated up front.
//
// File names: Name and ParseName map keys to by-key/ names and back.
//
// Imports (docs/ARCHITECTURE.md): backend, engine/record, engine/index,
// internal/panics and x/sys/unix only; never the engine itself, so a
// cluster's partitions are indexed by the same code.
package keyindex
