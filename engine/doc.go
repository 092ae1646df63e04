// Package engine stores Kafka-style topics in a segmented log on local disk,
// in Kafka's own format, so that Kafka's tools can read what it writes and it
// can read a broker's log.dirs.
//
// A data directory holds one directory per partition, named <topic>-<p>:
//
//	DATA/
//	  orders-0/
//	    00000000000000000000.log        record batches, Kafka v2 format, CRC32C
//	    00000000000000000000.index      8-byte entries: relative offset, position
//	    00000000000000000000.timeindex  12-byte entries: timestamp, relative offset
//	    00000000000000052539.log        next segment: its base offset is its name
//	  recovery-point-offset-checkpoint
//	  log-start-offset-checkpoint
//	  cleaner-offset-checkpoint
//
// Segment names are the base offset padded to 20 digits. Deleted segments are
// renamed *.deleted and unlinked after file.delete.delay.ms; compaction writes
// *.cleaned, renames to *.swap, then swaps in, and opening a partition finishes
// or rolls back whatever a crash left halfway, as Kafka's LogLoader does.
//
// The engine knows nothing of FUSE or of the background policies. All file
// access goes through engine/vfs so tests can inject faults and crashes.
//
// Owns: the on-disk log (segments, indexes, checkpoints, recovery, the
// .cleaned/.swap protocol) and its Go API (LogDir, Partition, Reader).
// SegmentReader (segreader.go) is the one bulk reader of .log batches:
// Reader (partition order), the mount's views and the offline check read
// through it.
// Imports: only the standard library, golang.org/x/sys/unix and its own
// subpackages (engine/record brings klauspost/compress and pierrec/lz4).
// Must not import fusefs, go-fuse, policies or any internal/ package;
// internal/archtest enforces this.
package engine
