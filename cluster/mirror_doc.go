package cluster

// The mirror: what a view reads in cluster mode, and what it costs.
//
// Views read record batches in Kafka's on-disk format from the Segments of
// a backend.Snapshot, in both modes. In cluster mode those segments belong
// to a Mirror: a local read-through copy of the cluster partitions that
// were read, under a cache directory, DIR/<cluster id>/<topic>-<partition>/,
// each an engine partition holding the batches exactly as the leader
// returned them (AppendAsFollower: offsets, leader epochs, timestamps,
// producer fields and CRCs unchanged, control batches and aborted records
// included; the engine builds the .txnindex from the ABORT markers, so the
// segments' AbortedTxns hide aborted records as they do locally). Fetches
// are read_uncommitted: the copy is a prefix of the log whatever the
// reader's isolation level.
//
// A copy is one contiguous offset range. MirrorPartition.Snapshot(ctx, src,
// from, end) makes it hold [from, end), end being the high watermark (or,
// read_committed, the last stable offset) the caller got when the file was
// opened, and fetches only what is missing: from the copy's end up to end.
// A from below the copy's start restarts the copy at from (readers that
// hold older segments keep reading them); a from past the copy's end is
// filled up to when the gap is small (FillGapBytes, estimated from the
// copy's bytes per offset), else restarts the copy at from. A
// read_committed reader's end is a last stable offset: the copy goes on
// past it, up to the high watermark, until every transaction open below
// end has its marker (Kafka writes the markers of decided transactions
// below the high watermark), so the aborted ones are hidden. The Snapshot
// starts at the segment holding from and is cut after end (the last
// segment's Size stops at the first batch at or past end), so a view's
// bytes never change; the aborted transactions whose markers lie past end
// still apply.
//
// A view's size in cluster mode is therefore the rendered length of the
// records from its start to the end at open (the high watermark, or the
// last stable offset read_committed): measured, as locally, over the
// copy's segments, and fixed for that snapshot. A growing view (tail -f)
// takes a new Snapshot when it reaches its end, which fetches the growth.
//
// Opening a view does not wait for the whole range (Stream, mirrorstream.go):
// the fill runs in the background up to the end at open, and each read
// that reaches what arrived so far waits for the next records, handed out
// as a Snapshot up to them (never into a transaction whose marker has not
// arrived). cat, grep and head start at once and read as fast as the fill
// goes; stat(2) of the open view waits for the whole range, so the size it
// reports is still exact; the view's last close stops the fill (what was
// copied stays). A fill that has handed records out never starts the copy
// over (a topic recreated meanwhile fails the read instead of splicing two
// logs).
//
// The cost of the first `tail records` of a 100 GB partition: tail needs
// the file's size, the size needs the snapshot of [log start, high
// watermark), so the copy fetches the whole 100 GB once (MaxBytes per
// request: about 100,000 fetches of 1 MiB), writes it under the cache
// directory (which needs that much free space while the view is open) and
// the view measures it. `head` and `cat | head` stop the fill at their
// close instead. Later opens of the same partition fetch only the growth
// since the copy's end (one fetch when little was produced). The cheap
// tail is `by-offset/-N`: its snapshot starts at HW-N, so the copy
// restarts there (or, already ending close to it, fills the gap) and
// fetches about N records: one fetch for a small N.
//
// The copy is bounded as retention.bytes bounds a log (RetentionBytes, 1
// GiB per partition by default): after a Snapshot and whenever a reader
// lets go of a segment, the oldest segments no reader holds are deleted,
// whole segments of SegmentBytes (64 MiB), the active one never. A reader
// of more than the cap keeps what it reads until it closes the file.
//
// Open copies are bounded too (MaxOpen, 256 by default): each holds a
// few files per segment, and a mount that reads thousands of partitions
// would run out of descriptors. The least recently used copy no reader
// holds is closed cleanly and reopened, without a scan or a fetch, when
// it is read again.
//
// Crashes. A copy is a cache: Close marks each partition closed cleanly
// (after flushing it) with the transactions still open, and the next open
// trusts it without a scan and gives those transactions back to the
// producer state. A copy without the mark (a crash, a kill) is discarded
// and fetched again rather than recovered: nothing is fsynced before
// Close, so after a power loss its pages may reach the disk in any order,
// and a recovery scan that keeps the intact batches around a damaged one
// would leave a hole that reads like compaction. One process uses a
// cluster's cache directory at a time (engine.LockDir).
//
// What the copy does not notice: a topic deleted and created again under
// the same name is noticed at the next fetch (its topic id changes, the
// copy starts over); until then a copy that already covers a reader's
// range is served (callers that delete a topic call RemoveTopic). Records
// the cluster compacted away after they were copied stay in the copy, as
// they stay with a consumer that read them before. A leader that lost
// committed records in an unclean election is not detected (fetches send
// no LastFetchedEpoch; kfake does not implement divergence either).
