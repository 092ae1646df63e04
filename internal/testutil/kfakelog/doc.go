// Package kfakelog makes Kafka record batches for tests with an independent
// implementation: franz-go's producer (kgo) sends records to franz-go's
// in-process broker (kfake), and a Fetch request reads the partition back
// as the broker stores it. The bytes are a partition's log from offset 0,
// written by neither topicfs's encoder nor its decoder, in any codec, from
// idempotent or transactional producers (with the broker's COMMIT and ABORT
// control batches). Only tests import it; everything runs in the process,
// so the logs are made at test time and nothing is stored in the repo.
//
// Owns: making reference logs for tests. It imports franz-go (kgo, kfake,
// kmsg), a test-only dependency; only _test.go files may import it
// (internal/archtest).
package kfakelog
