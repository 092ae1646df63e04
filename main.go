// Command topicfs mounts Kafka-style topics, stored in Kafka's on-disk format,
// as a FUSE file system; see README.md and `topicfs help`.
package main

import (
	"os"

	"github.com/topicfs/topicfs/internal/cli"
)

func main() {
	os.Exit(cli.Main(os.Args[1:], os.Stdout, os.Stderr))
}
