// Package fusefs is topicfs's go-fuse node tree: it maps paths of the mount
// to engine calls and engine errors to errnos (in one place, errno.go).
//
//	MOUNT/<topic>/               mkdir creates a topic (num.partitions partitions); rmdir deletes it
//	    append, append.jsonl     write-only; partition by murmur2(key) like Kafka's producer
//	    config                   name=value lines; write lines to alter (all or nothing per write)
//	    <p>/append[.jsonl]       write-only, into partition p
//	    <p>/records[.jsonl]      growing read-only views of every retained record
//	    <p>/by-offset/<N>[.jsonl] view from offset N (resolved on lookup)
//	    <p>/by-time/<T>[.jsonl]  view from time T: epoch ms, RFC 3339, or -15m/-2h/-7d/-30s
//	    <p>/segments/            the partition directory's files, read-only raw bytes
//	    <p>/stats                JSON: offsets, sizes, timestamps, policy state
//
// Usage:
//
//	srv, err := fusefs.Mount("/mnt/topics", logDir, fusefs.Options{Logger: log})
//	// or fusefs.MountBackend(mountpoint, anyBackend, opts)
//	if err != nil { ... }
//	defer srv.Unmount()
//	srv.Wait()
//
// Choices made where the user contract was silent (docs/NOTES.md, Choices):
//
//   - rmdir TOPIC deletes the topic unless an append or config file of it is
//     open for writing: then it fails with EBUSY (buffered records would be
//     lost), after waiting up to a second for handles closed but not yet
//     released (RELEASE follows close(2) asynchronously). Open views keep
//     reading the segments they hold.
//   - Partitions are added from the shell with `mkdir TOPIC/N` where N is the
//     current partition count, or by writing num.partitions=N to config.
//     Partitions never shrink (EINVAL).
//   - Everything else that would change the namespace (rm, rmdir, mv, ln,
//     mknod, creating files) is refused with EPERM (EROFS on a read-only
//     mount) and changes nothing; so are chmod and chown of append and config
//     (their modes and owners are fixed). Writes to views, stats and segments/ are
//     EACCES (EROFS on a read-only mount).
//   - Inode numbers are a 64-bit hash of the topic generation and the path,
//     so they are stable across kernel forgets (tail -F never sees a
//     "replaced" file) and change when a deleted topic is recreated.
//   - by-offset/N is ENOENT below the log start and above the log end;
//     by-offset/<log end> is an empty view that grows. by-time/T past the
//     last record is an empty view that grows.
//   - Plain append lines: without parse.key the line is the value; with it,
//     key key.separator value, where a key or value equal to null.marker is
//     null (a null value is a tombstone) and a line without the separator is
//     EINVAL. Plain views print null keys and values as null.marker.
//   - Compacted topics need keys, as in Kafka ("Compacted topic cannot
//     accept message without key"): while the topic's cleanup.policy
//     contains compact (compact or compact,delete, as the config is now), a
//     record with a null key written to append or append.jsonl, topic or
//     partition level, is refused with EINVAL and a warning in the log, and
//     nothing of that write(2) is applied (a keyed line in the same write
//     included). Without parse.key every plain line is keyless, so such a
//     topic needs parse.key=true (key key.separator value; a key equal to
//     null.marker is null) or append.jsonl lines with a "key". An empty key
//     (JSON "", or an empty plain key when null.marker is not empty) is a key. A final
//     unterminated keyless line is refused at close(2), which shells do not
//     report. Keyed tombstones are fine. The engine stays permissive
//     (Partition.Append takes keyless records, as Kafka's log layer does for
//     data a broker already accepted); the rule is enforced where the mount
//     builds records (append.go).
//   - JSON lines: see appendJSONRecord and parseJSONLine. Non-UTF-8 keys and
//     values are base64 with "key_encoding"/"value_encoding":"base64";
//     headers are an object, or an array of {"key","value"} when keys repeat
//     or bytes are not UTF-8. Unknown fields are EINVAL, so a typo cannot turn
//     a record into a tombstone.
//
// Views. A view is a growing regular file. While it is open its content is
// pinned (viewState): the segments it started with are retained, so
// retention and compaction never change bytes already readable; newer
// segments are added as the log grows. Size and mtime are per inode (fstat
// of tail -f carries no file handle), so all handles of one view share one
// pinned state: a view opened while another handle of it is open sees the
// same bytes (from the same start), and a view opened after every handle
// was closed starts afresh (at the new log start, say). A view that stays
// open keeps the deleted segments it holds on disk (unlinked but open)
// until it is closed.
//
// Reads are served through a sparse rendered-position index per segment
// and format (segindex.go), built lazily and incrementally and kept in a
// bounded LRU: after the index exists, Getattr is O(segments) and a seek
// (tail -n, less +G, dd skip=) costs a binary search plus at most one
// 64 KiB index interval of rendering. The first stat of a view after
// mounting scans the partition once to build it. The .log bytes come
// through the engine's batch reader (engine.SegmentReader, wrapped by
// logChunk): chunked preads, every batch CRC-checked before it is
// rendered, the next chunks loaded ahead of a sequential reader, buffers
// from the mount's bounded free lists; fusefs keeps the index, the
// rendering and the rendering ahead of READs (ahead.go).
//
// Views are served with direct I/O (see viewNode.Open for why not the page
// cache: short reads at a growing end race with GETATTR and leave NUL-filled
// pages), a 1 s attribute timeout and an exact size and mtime in Getattr. A
// notifier goroutine per partition whose views the kernel knows, woken by
// the engine after each append and rate-limited to every 20 ms, refreshes
// open views and calls NotifyContent(-1, 0) (attributes only: page-range
// invalidation can leave the process unkillable), so tail -f sees a new
// record within its one-second poll; close(2) of an append file waits
// (bounded) for that round, so "echo x >> append; cat records" is exact.
// An open view whose backend cannot be asked (a cluster with no broker
// reachable, a request timed out) keeps what it holds: fstat(2) shows its
// size and reads end there, so tail -f survives an outage of the cluster
// and follows again once it is back (keepsHeld).
// Corruption found while indexing or reading stops that segment: readers
// get every good byte before it and then EIO, views starting after it read
// normally, and the log names the segment and position. Aborted
// transactions are hidden using the .txnindex entries known when a segment
// is indexed; control batches are never shown.
//
// Appends. Each open append file frames its own lines (writes may split
// lines anywhere; offsets are ignored; O_TRUNC is a no-op), parses and
// validates complete lines inside write(2) (EINVAL, EMSGSIZE — nothing of
// a refused write is applied; nothing of a line too long for
// max.message.bytes is ever stored, however it is cut: appendline.go),
// and batches records per partition up to batch.size; a timer appends a
// batch after linger.ms, close(2) appends every complete line before it
// returns and waits (bounded) until the views of the partition have been
// told of the growth, and fsync(2) also makes it durable. A final
// unterminated line becomes a record at RELEASE, not at each close(2) of a
// shared descriptor; views of the topic wait (bounded) for that RELEASE. A line begun before a failed write (ENOSPC) is never
// committed at close as a torn record. Keyless records of a topic-level
// append go round robin by batch, starting at a different partition for
// each open.
//
// Owns: the FUSE node tree, the rendering of views, the framing and
// batching of appends, and the errno mapping. It reaches topics through
// the backend interfaces (package backend; docs/ARCHITECTURE.md, The
// backend seam), the engine only for what a data directory alone has.
// Imports: backend/..., engine/...,
// policies (for Scheduler and State only), internal/panics and go-fuse; it
// is the only package besides internal/cli (which mounts) that imports
// go-fuse (internal/archtest).
package fusefs
