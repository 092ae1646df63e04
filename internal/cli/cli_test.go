package cli

import (
	"bytes"
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
