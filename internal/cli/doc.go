// Package cli implements the topicfs command: its subcommands, flag parsing,
// mount.toml loading, signal handling and the Prometheus metrics server.
// main.go only calls Main:
//
//	func main() { os.Exit(cli.Main(os.Args[1:], os.Stdout, os.Stderr)) }
//
// Every failure a user can cause (a missing mountpoint, a bad config key, a
// data directory locked by another mount) ends in one line on stderr of the
// form "topicfs CMD: what went wrong", never in a stack trace.
//
// Exit codes: 0 success, 1 failure (or problems found by check), 2 usage error.
//
// Owns: the command line, config loading, signals and the metrics server;
// it wires engine, policies, fusefs, tools and bench together and is the
// one place besides fusefs that may import go-fuse. Nothing imports it but
// main.go (internal/archtest).
package cli
