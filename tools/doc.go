// Package tools holds topicfs's offline operator tools: Dump, which prints
// segment, index and snapshot files the way Kafka's kafka-dump-log.sh
// (kafka.tools.DumpLogSegments) does, and Check, which verifies a whole data
// directory (topicfs's or a Kafka broker's log.dirs) and can repair it.
//
// Both read files directly through engine/record and engine/index; neither
// needs a mount. Dump never writes. Check writes only with Repair.
//
//	err := tools.Dump(os.Stdout, os.Stderr, []string{"orders-0/00000000000000000000.log"},
//		tools.DumpOptions{PrintData: true})
//
//	rep, err := tools.Check(os.Stdout, "/var/lib/topicfs", tools.CheckOptions{})
//	if err != nil || len(rep.Problems()) > 0 {
//		os.Exit(1)
//	}
//
// Owns: the offline dump and check tools. Imports: engine/... (and the
// codecs engine/record uses). Must not import fusefs, go-fuse or policies:
// the tools work on a data directory that no mount holds
// (internal/archtest).
package tools
