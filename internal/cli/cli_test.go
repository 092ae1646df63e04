package cli

import (
	"bytes"
	"runtime/debug"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
)

func runMain(args ...string) (stdout, stderr string, code int) {
	var o, e bytes.Buffer
	code = Main(args, &o, &e)
	return o.String(), e.String(), code
}

func TestMainUsage(t *testing.T) {
	tests := []struct {
		name       string
		args       []string
		code       int
		out, err   string
		errIsEmpty bool
	}{
		{name: "no args", args: nil, code: exitUsage, err: "Usage:\n  topicfs COMMAND"},
		{name: "help", args: []string{"help"}, code: exitOK, out: "Commands:\n", errIsEmpty: true},
		{name: "--help", args: []string{"--help"}, code: exitOK, out: "Commands:\n", errIsEmpty: true},
		{name: "help help", args: []string{"help", "help"}, code: exitOK, out: "Usage: topicfs help [COMMAND]", errIsEmpty: true},
		{name: "unknown", args: []string{"nope"}, code: exitUsage, err: "topicfs: unknown command \"nope\""},
		{name: "help unknown", args: []string{"help", "nope"}, code: exitUsage, err: "topicfs help: unknown command \"nope\""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out, errOut, code := runMain(tt.args...)
			assert.Equal(t, tt.code, code)
			assert.Contains(t, out, tt.out)
			assert.Contains(t, errOut, tt.err)
			if tt.errIsEmpty {
				assert.Empty(t, errOut)
			}
		})
	}
}

func TestEveryCommandHasHelp(t *testing.T) {
	for name, c := range commands {
		t.Run(name, func(t *testing.T) {
			out, errOut, code := runMain(name, "--help")
			assert.Equal(t, exitOK, code, errOut)
			assert.Contains(t, out, "Usage: "+c.usage)
			assert.NotEmpty(t, c.synopsis)
			help, _, _ := runMain("help", name)
			assert.Equal(t, out, help, "topicfs help CMD and CMD --help agree")
		})
	}
}

func TestOneLine(t *testing.T) {
	assert.Equal(t, "a; b", oneLine("\n a\nb \n"))
}

func TestVersion(t *testing.T) {
	for _, args := range [][]string{{"version"}, {"--version"}, {"-version"}} {
		out, errOut, code := runMain(args...)
		assert.Equal(t, exitOK, code, errOut)
		assert.Regexp(t, `^topicfs \S+ .*go1\.\d+`, out, "%v", args)
		assert.Equal(t, 1, strings.Count(out, "\n"), "one line")
	}
	_, errOut, code := runMain("version", "extra")
	assert.Equal(t, exitUsage, code)
	assert.Contains(t, errOut, "takes no arguments")
}

func TestFormatVersion(t *testing.T) {
	bi := &debug.BuildInfo{GoVersion: "go1.26.0", Main: debug.Module{Version: "v1.2.0"}, Settings: []debug.BuildSetting{
		{Key: "vcs.revision", Value: "0123456789abcdef0123"}, {Key: "vcs.time", Value: "2026-01-02T03:04:05Z"}, {Key: "vcs.modified", Value: "true"},
	}}
	assert.Equal(t, "topicfs v1.2.0 (rev 0123456789ab+dirty, 2026-01-02T03:04:05Z) go1.26.0", formatVersion(bi))
	assert.Equal(t, "topicfs (devel) go1.26.0", formatVersion(&debug.BuildInfo{GoVersion: "go1.26.0"}))
}

func TestMetricsListenAddr(t *testing.T) {
	for in, want := range map[string]string{
		":0": "127.0.0.1:0", ":9464": "127.0.0.1:9464", "0.0.0.0:9464": "0.0.0.0:9464",
		"[::]:1": "[::]:1", "localhost:9": "localhost:9", "[::1]:9": "[::1]:9",
	} {
		got, err := metricsListenAddr(in)
		assert.NoError(t, err, in)
		assert.Equal(t, want, got, in)
	}
	_, err := metricsListenAddr("9464")
	assert.Error(t, err, "a port alone is not an address")
}

func TestParseUmask(t *testing.T) {
	for in, want := range map[string]int{"077": 0o077, "0022": 0o022, "0": 0, "777": 0o777} {
		got, err := parseUmask(in)
		assert.NoError(t, err, in)
		assert.Equal(t, want, got, in)
	}
	for _, bad := range []string{"", "8", "1000", "-1", "rw"} {
		_, err := parseUmask(bad)
		assert.Error(t, err, bad)
	}
}
