package archtest

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"os/exec"
	"slices"
	"strings"
	"testing"
)

const mod = "github.com/topicfs/topicfs"

// Third-party modules the storage engine may depend on.
var engineThirdParty = []string{
	"golang.org/x/sys/unix",
	"github.com/klauspost/compress",
	"github.com/pierrec/lz4/v4",
}

// rule says which non-standard packages a package may depend on, directly
// or through other packages (its non-test dependency closure). A path is
// allowed when it equals an entry or lies below it ("a" allows "a/b").
type rule struct {
	pkg     string   // import path relative to the module ("" is the module root)
	allowed []string // allowed non-standard dependencies, full import paths
}

func join(lists ...[]string) []string { return slices.Concat(lists...) }

// engineAll is the engine and engine/record, index, vfs, with the
// backend interfaces whose sentinel errors the engine's wrap.
var engineAll = []string{mod + "/engine", mod + "/backend"}

// engineLeaves are the engine's format packages, all that the backend
// interfaces may depend on.
var engineLeaves = []string{mod + "/engine/record", mod + "/engine/index", mod + "/engine/vfs"}

// rules is the table of docs/ARCHITECTURE.md, "Import rules". Every
// package of the module must have a row (tests is test-only and has none).
var rules = []rule{
	{"backend", join(engineLeaves, engineThirdParty)},
	{"backend/local", join(engineAll, engineThirdParty)},
	{"engine", join(engineAll, engineThirdParty)},
	{"engine/record", join(engineAll, engineThirdParty)},
	{"engine/index", join(engineAll, engineThirdParty)},
	{"engine/vfs", join(engineAll, engineThirdParty)},
	{"internal/panics", nil}, // standard library only
	{"policies", join(engineAll, engineThirdParty, []string{mod + "/internal/panics"})},
	{"fusefs", join(engineAll, engineThirdParty, []string{
		mod + "/policies", mod + "/internal/panics", mod + "/keyindex", "github.com/hanwen/go-fuse/v2"})},
	// The key index works on the backend seam alone, so both modes share it.
	{"keyindex", join(engineLeaves, engineThirdParty, []string{mod + "/backend", mod + "/internal/panics"})},
	{"tools", join(engineAll, engineThirdParty)},
	// Cluster mode: franz-go, the backend seam, and the engine's public API
	// for its local copy of what it fetched (the Mirror).
	{"cluster", join(engineAll, engineThirdParty, []string{mod + "/backend", "github.com/twmb/franz-go"})},
	// bench: the cluster rows run franz-go's in-process cluster (kfake)
	// and, as their baselines, plain franz-go clients doing the mount's
	// work; the mount itself is exec'd, never imported.
	{"bench", join(engineAll, engineThirdParty, []string{mod + "/policies", mod + "/internal/panics", mod + "/keyindex", "github.com/twmb/franz-go"})},
	{"internal/archtest", nil},
	// The command wires everything together: anything but test helpers.
	{"internal/cli", nil},
	{"", nil},
	// Test helpers: whatever they need, but only tests import them (below).
	{"internal/testutil", nil},
	{"internal/testutil/kfakelog", nil},
	{"internal/testutil/kfakehold", nil},
}

// unrestricted packages skip the closure check; the direct-import rules
// below still apply to them.
var unrestricted = map[string]bool{
	"internal/cli": true, "": true, "internal/testutil": true, "internal/testutil/kfakelog": true,
	"internal/testutil/kfakehold": true,
}

// directOnly lists import paths that only the named packages may import
// directly (in non-test files), whatever their closure allows.
var directOnly = []struct {
	path     string
	importer []string
}{
	// go-fuse is fusefs's alone; internal/cli mounts through fusefs.
	{"github.com/hanwen/go-fuse/v2", []string{"fusefs", "internal/cli"}},
	// Test helpers are for _test.go files only.
	{mod + "/internal/testutil", []string{"internal/testutil", "internal/testutil/kfakelog", "internal/testutil/kfakehold"}},
}

type pkgInfo struct {
	ImportPath string
	Standard   bool
	DepOnly    bool
	Module     *struct{ Path string }
	Imports    []string
	Deps       []string
	GoFiles    []string
}

func under(path, prefix string) bool {
	return path == prefix || strings.HasPrefix(path, prefix+"/")
}

func rel(path string) (string, bool) {
	if path == mod {
		return "", true
	}
	r, ok := strings.CutPrefix(path, mod+"/")
	return r, ok
}

// listPackages runs go list -deps -json over the module: the module's
// packages with their non-test imports and dependency closure, and every
// dependency with its Standard flag.
func listPackages(t *testing.T) (own []pkgInfo, std map[string]bool) {
	t.Helper()
	cmd := exec.Command("go", "list", "-deps", "-json", mod+"/...")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, stderr.String())
	}
	std = map[string]bool{}
	dec := json.NewDecoder(bytes.NewReader(out))
	for {
		var p pkgInfo
		if err := dec.Decode(&p); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			t.Fatalf("decode go list output: %v", err)
		}
		std[p.ImportPath] = p.Standard
		if _, ok := rel(p.ImportPath); ok && !p.DepOnly {
			own = append(own, p)
		}
	}
	return own, std
}

// violations returns one line per forbidden import of the module's packages.
func violations(own []pkgInfo, std map[string]bool) []string {
	table := map[string]rule{}
	for _, r := range rules {
		table[r.pkg] = r
	}
	var bad []string
	for _, p := range own {
		name, _ := rel(p.ImportPath)
		if len(p.GoFiles) == 0 {
			continue // test-only package (tests/): its imports are tests'
		}
		r, ok := table[name]
		if !ok {
			bad = append(bad, "package "+p.ImportPath+" has no row in the import rule table")
			continue
		}
		if !unrestricted[name] {
			for _, d := range p.Deps {
				if std[d] {
					continue
				}
				if !slices.ContainsFunc(r.allowed, func(a string) bool { return under(d, a) }) {
					via := "directly"
					if !slices.Contains(p.Imports, d) {
						via = "through its dependencies"
					}
					bad = append(bad, "package "+p.ImportPath+" imports "+d+" ("+via+"), forbidden by the rules")
				}
			}
		}
		for _, d := range directOnly {
			for _, imp := range p.Imports {
				if under(imp, d.path) && !slices.Contains(d.importer, name) {
					bad = append(bad, "package "+p.ImportPath+" imports "+imp+" directly; only "+
						strings.Join(d.importer, ", ")+" may")
				}
			}
		}
	}
	return bad
}

func TestImportRules(t *testing.T) {
	own, std := listPackages(t)
	if len(own) < len(rules)-1 {
		t.Fatalf("go list found %d packages of %s, the table has %d rows", len(own), mod, len(rules))
	}
	for _, v := range violations(own, std) {
		t.Error(v)
	}
}

// TestImportRulesCatchViolations feeds the checker made-up packages that
// break each kind of rule, so a checker that passes everything fails here.
func TestImportRulesCatchViolations(t *testing.T) {
	std := map[string]bool{"os": true, "golang.org/x/sys/unix": false}
	own := []pkgInfo{
		{ImportPath: mod + "/engine", GoFiles: []string{"a.go"},
			Imports: []string{"os", mod + "/policies"}, Deps: []string{"os", mod + "/policies"}},
		{ImportPath: mod + "/tools", GoFiles: []string{"a.go"},
			Imports: []string{mod + "/engine"}, Deps: []string{mod + "/engine", mod + "/fusefs"}},
		{ImportPath: mod + "/internal/cli", GoFiles: []string{"a.go"},
			Imports: []string{mod + "/internal/testutil"}, Deps: []string{mod + "/internal/testutil"}},
		{ImportPath: mod + "/policies", GoFiles: []string{"a.go"},
			Imports: []string{"github.com/hanwen/go-fuse/v2/fs"}, Deps: []string{"github.com/hanwen/go-fuse/v2/fs"}},
		{ImportPath: mod + "/newpkg", GoFiles: []string{"a.go"}},
		{ImportPath: mod + "/cluster", GoFiles: []string{"a.go"},
			Imports: []string{mod + "/engine/record", mod + "/fusefs"}, Deps: []string{mod + "/engine/record", mod + "/fusefs"}},
	}
	got := violations(own, std)
	want := []string{
		"package " + mod + "/engine imports " + mod + "/policies (directly)",
		"package " + mod + "/tools imports " + mod + "/fusefs (through its dependencies)",
		"package " + mod + "/internal/cli imports " + mod + "/internal/testutil directly",
		"package " + mod + "/policies imports github.com/hanwen/go-fuse/v2/fs (directly)",
		"package " + mod + "/policies imports github.com/hanwen/go-fuse/v2/fs directly",
		"package " + mod + "/newpkg has no row",
		"package " + mod + "/cluster imports " + mod + "/fusefs (directly)",
	}
	for _, w := range want {
		if !slices.ContainsFunc(got, func(g string) bool { return strings.HasPrefix(g, w) }) {
			t.Errorf("no violation starting %q; got:\n%s", w, strings.Join(got, "\n"))
		}
	}
}
