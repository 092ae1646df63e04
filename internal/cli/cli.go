package cli

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"sort"
	"strings"
)

// Exit codes.
const (
	exitOK    = 0
	exitFail  = 1
	exitUsage = 2
)

// command is one subcommand: its help text and how it runs.
type command struct {
	name     string
	synopsis string // one line for the command list
	usage    string // "topicfs NAME [flags] ARGS"
	help     string // paragraphs after the usage line
	// flags registers the command's flags on fs and returns the function that
	// runs it with the positional arguments.
	flags func(fs *flag.FlagSet, env *env) func(args []string) int
}

// env is what a command writes to.
type env struct {
	stdout, stderr io.Writer
}

var commands = map[string]*command{}

func register(c *command) { commands[c.name] = c }

// Main runs the topicfs command with args (without the program name) and
// returns the process exit code.
func Main(args []string, stdout, stderr io.Writer) int {
	e := &env{stdout: stdout, stderr: stderr}
	if len(args) == 0 {
		printOverview(stderr)
		return exitUsage
	}
	name := args[0]
	switch name {
	case "help", "-h", "-help", "--help":
		return runHelp(args[1:], e)
	case "--version", "-version":
		name = "version"
	}
	c, ok := commands[name]
	if !ok {
		fmt.Fprintf(stderr, "topicfs: unknown command %q (commands: %s; see topicfs help)\n", name, strings.Join(commandNames(), ", "))
		return exitUsage
	}
	fs := flag.NewFlagSet("topicfs "+c.name, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	run := c.flags(fs, e)
	pos, err := parseInterleaved(fs, args[1:])
	if errors.Is(err, flag.ErrHelp) {
		printCommandHelp(stdout, c)
		return exitOK
	}
	if err != nil {
		fmt.Fprintf(stderr, "topicfs %s: %v (see topicfs help %s)\n", c.name, err, c.name)
		return exitUsage
	}
	return run(pos)
}

// parseInterleaved parses flags that may come before, between or after the
// positional arguments (`topicfs mount ./topics --read-only` works), and
// returns the positional arguments. Everything after "--" is positional.
func parseInterleaved(fs *flag.FlagSet, args []string) ([]string, error) {
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			return nil, err
		}
		rest := fs.Args()
		consumed := len(args) - len(rest)
		if consumed > 0 && args[consumed-1] == "--" {
			return append(pos, rest...), nil
		}
		if len(rest) == 0 {
			return pos, nil
		}
		pos = append(pos, rest[0])
		args = rest[1:]
	}
}

func commandNames() []string {
	names := make([]string, 0, len(commands)+1)
	for n := range commands {
		names = append(names, n)
	}
	names = append(names, "help")
	sort.Strings(names)
	return names
}

func printOverview(w io.Writer) {
	fmt.Fprint(w, `topicfs stores Kafka-style topics in a segmented log on local disk and shows
them as directories: mkdir a topic, echo records into it, cat or tail -f them.

Usage:
  topicfs COMMAND [flags] ARGS

Commands:
`)
	for _, n := range commandNames() {
		if n == "help" {
			fmt.Fprintf(w, "  %-7s %s\n", "help", "explain a command and its flags: topicfs help COMMAND")
			continue
		}
		fmt.Fprintf(w, "  %-7s %s\n", n, commands[n].synopsis)
	}
	fmt.Fprint(w, "\nRun 'topicfs help COMMAND' (or 'topicfs COMMAND --help') for its flags.\n")
}

func printCommandHelp(w io.Writer, c *command) {
	fmt.Fprintf(w, "Usage: %s\n\n%s\n", c.usage, strings.TrimSpace(c.help))
	fs := flag.NewFlagSet(c.name, flag.ContinueOnError)
	c.flags(fs, &env{stdout: io.Discard, stderr: io.Discard})
	n := 0
	fs.VisitAll(func(*flag.Flag) { n++ })
	if n == 0 {
		return
	}
	fmt.Fprint(w, "\nFlags:\n")
	fs.VisitAll(func(f *flag.Flag) {
		name, usage := flag.UnquoteUsage(f)
		arg := "--" + f.Name
		if name != "" {
			arg += " " + name
		}
		fmt.Fprintf(w, "  %s\n      %s", arg, usage)
		if f.DefValue != "" && f.DefValue != "false" {
			fmt.Fprintf(w, " (default %s)", f.DefValue)
		}
		fmt.Fprintln(w)
	})
}

func runHelp(args []string, e *env) int {
	if len(args) == 0 {
		printOverview(e.stdout)
		return exitOK
	}
	c, ok := commands[args[0]]
	if !ok {
		if args[0] == "help" {
			fmt.Fprintln(e.stdout, "Usage: topicfs help [COMMAND]\n\nExplains COMMAND and each of its flags, or lists the commands.")
			return exitOK
		}
		fmt.Fprintf(e.stderr, "topicfs help: unknown command %q (commands: %s)\n", args[0], strings.Join(commandNames(), ", "))
		return exitUsage
	}
	printCommandHelp(e.stdout, c)
	return exitOK
}

// fail prints one line "topicfs CMD: err" and returns exitFail.
func (e *env) fail(cmd string, format string, args ...any) int {
	fmt.Fprintf(e.stderr, "topicfs %s: %s\n", cmd, oneLine(fmt.Sprintf(format, args...)))
	return exitFail
}

// usageErr prints one line and returns exitUsage.
func (e *env) usageErr(cmd string, format string, args ...any) int {
	fmt.Fprintf(e.stderr, "topicfs %s: %s (see topicfs help %s)\n", cmd, oneLine(fmt.Sprintf(format, args...)), cmd)
	return exitUsage
}

func oneLine(s string) string {
	return strings.ReplaceAll(strings.TrimSpace(s), "\n", "; ")
}
