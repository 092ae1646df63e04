// Package bench measures topicfs beside the physical limit of the machine it
// runs on: every workload is timed next to a baseline measured in the same
// run on the same disk (a raw sequential write, `cat` of the .log files,
// `ls -l` of the directory, ...), and the table shows both figures and their
// ratio, so a number means the same thing on a laptop and on a CI runner.
//
// `topicfs bench` (internal/cli/bench.go) is a thin wrapper:
//
//	t, err := bench.Run(ctx, bench.Options{Quick: true, Binary: exe, Progress: os.Stderr})
//	t.Print(os.Stdout)
//	if err != nil || t.Failed() { os.Exit(1) }
//
// Workloads (names for Options.Only):
//
//	engine-append   Partition.Append of 100 B and 1 KiB values, codecs none/lz4/zstd,
//	                1,000 records per call; baseline: write(2) of the same value
//	                bytes in the same chunk sizes, same fsync policy
//	engine-read     a whole partition of 99-byte values and one of 1 KiB values
//	                through engine.Reader, every record decoded with
//	                Batch.EachRecord (and the first again as verified batches
//	                only); baseline: the same .log files read with 1 MiB preads
//	                by the bench process
//	engine-point    engine.PointReader.ReadRecord at random offsets, warm, with
//	                batches of about 16 KiB and 1 MiB: median and p99; baseline:
//	                a pread of exactly the same records' bytes
//	cleaner         policies' log cleaner, MB/s of input; baseline: sequential
//	                read of the same segments
//	mount-append    cat FILE > TOPIC/0/append; baseline: cat FILE > file on the same disk
//	mount-read      cat TOPIC/0/records > /dev/null; baseline: cat of the .log files
//	mount-segments  cat TOPIC/0/segments/X.log of a sealed segment through two
//	                read-only mounts of the same data, one with FUSE passthrough,
//	                one with --no-passthrough, in the same rounds; baseline: cat
//	                of the file itself
//	mount-offset    open by-offset/N, read one line, close, on a small and a large
//	                partition: median and p99; baseline: open, pread at a line
//	                and close of a plain file of the same lines; and the p99
//	                ratio large/small
//	mount-rss       VmHWM of the mount process after reading a large partition
//	                end to end (next to the small one), and after cleaning many keys
//	                (next to the configured dedupe buffer)
//	mount-time      mount over many segments after a clean shutdown and after
//	                kill -9; baseline: ls -l of the partition directory
//	cluster-append  cat FILE > TOPIC/0/append on a mounted cluster; baseline: a
//	                franz-go producer sending the same lines (acks=all, idempotent)
//	cluster-read    cat TOPIC/0/records on a fresh mount (the local copy empty),
//	                then again (the copy local); baseline: a franz-go consumer
//	                rendering the same lines from the first offset
//	cluster-offset  read by-offset/-10 end to end: median and p99; baseline:
//	                ListOffsets and one Fetch by a connected franz-go client
//
// The mount workloads run the real topicfs binary (Options.Binary) on
// temporary mountpoints and always unmount, lazily if need be. The cluster
// workloads mount (`--bootstrap-server`) franz-go's in-process cluster,
// kfake, started in this process: three brokers, topics of one partition
// replicated three times (kfake keeps one copy in memory whatever the
// factor), the baselines' clients talking to the same brokers.
//
// Owns: the workloads, their baselines and the result table. Imports:
// engine/..., policies, golang.org/x/sys/unix and franz-go (kfake, kgo,
// kmsg: the cluster rows' cluster and baselines); the mount workloads run
// the topicfs binary instead of importing fusefs or cluster, so bench must
// not import fusefs, go-fuse, cluster or internal/cli (internal/archtest).
package bench
