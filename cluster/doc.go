// Package cluster is the backend of a mount of a Kafka cluster (cluster
// mode): backend.Backend, Topic and Partition on franz-go's client (kgo,
// kmsg). The file tree is the same as on one disk; what differs lives here.
//
//   - Open connects with Options (bootstrap servers, Security from a
//     --command-config file read by ParseCommandConfig, request.timeout.ms
//     and delivery.timeout.ms) and checks the cluster within the request
//     timeout; a failure is an *OpenError whose Cause says authentication,
//     TLS or no broker reachable.
//   - Topics are Metadata, CreateTopics and DeleteTopics (internal "__"
//     topics hidden unless Options.ShowInternal); partitions grow with
//     CreatePartitions and never shrink.
//   - Appends are produces with acks=all from one idempotent producer, to
//     the partition named (ManualPartitioner); a call returns once every
//     record is acknowledged, or fails with the backend error the broker's
//     code means (errors.go), within delivery.timeout.ms.
//   - Offsets are ListOffsets answers (log start, high watermark, last
//     stable offset, by time); Subscribe polls the high watermark of a
//     watched partition every 250 ms.
//   - Configuration: broker configs are read with DescribeConfigs and
//     written with IncrementalAlterConfigs, validated first (validate_only),
//     so a bad line changes nothing; topicfs's own settings (parse.key,
//     print.key, key.separator, null.marker, batch.size, linger.ms) persist
//     in StateDir/clusters/<cluster id>/topics/<topic>.json; mount-wide
//     defaults for them are Options.Defaults.
//   - Stats (StatsJSON) show offsets, leader, epoch, replicas, ISR, size
//     (DescribeLogDirs where allowed) and replication health in words.
//   - Reads (Partition.Snapshot) come from a local read-through copy of
//     what was fetched (the Mirror, under Options.CacheDir: mirror.go,
//     fetch.go; mirror_doc.go says what a view's size is and costs).
//   - An append that times out (delivery.timeout.ms) has an unknown
//     outcome, as with any Kafka producer: records already sent may still
//     be appended, once, when the cluster answers.
//
// Secrets (sasl.password) never appear in errors, logs, stats or config
// text: Security and Secret print [redacted].
//
// Owns: the Kafka-cluster backend, its security configuration, its local
// state directory and its cache of fetched batches. Imports: backend,
// engine/... (the public API only: the Mirror keeps its copy in engine
// partitions), franz-go (kgo, kmsg, kerr, sasl). Must not import: fusefs,
// go-fuse, policies, internal/... (internal/archtest).
package cluster
