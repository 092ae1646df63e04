package cli

import (
	"flag"
	"fmt"
	"runtime/debug"
	"strings"
)

func init() {
	register(&command{
		name:     "version",
		synopsis: "print topicfs's version, source revision and Go version",
		usage:    "topicfs version",
		help: `
Prints one line: the module version (a release tag, or "(devel)" for a build
from a checkout), the source revision it was built from (with "+dirty" when
the checkout had uncommitted changes) and its time, and the Go version.
topicfs --version prints the same.`,
		flags: func(fs *flag.FlagSet, e *env) func([]string) int {
			return func(args []string) int {
				if len(args) > 0 {
					return e.usageErr("version", "takes no arguments, got %q", args)
				}
				fmt.Fprintln(e.stdout, versionLine())
				return exitOK
			}
		},
	})
}

// versionLine describes the running binary from its embedded build
// information: "topicfs v1.2.0 (rev 0123abcd4567, 2026-01-02T03:04:05Z) go1.26.0".
func versionLine() string {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return "topicfs (unknown version: built without module information)"
	}
	return formatVersion(bi)
}

func formatVersion(bi *debug.BuildInfo) string {
	version := bi.Main.Version
	if version == "" {
		version = "(devel)"
	}
	var rev, at string
	dirty := false
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value
		case "vcs.time":
			at = s.Value
		case "vcs.modified":
			dirty = s.Value == "true"
		}
	}
	var parts []string
	if rev != "" {
		if len(rev) > 12 {
			rev = rev[:12]
		}
		if dirty {
			rev += "+dirty"
		}
		parts = append(parts, "rev "+rev)
	}
	if at != "" {
		parts = append(parts, at)
	}
	line := "topicfs " + version
	if len(parts) > 0 {
		line += " (" + strings.Join(parts, ", ") + ")"
	}
	return line + " " + bi.GoVersion
}
