package testutil

import (
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
)

// ExtraFixturesEnv names the directory of the extra Kafka fixture corpus:
// real broker directories whose source repositories carry no licence, so
// they are not part of this repository (testdata/kafka-real/PROVENANCE.md).
// A relative path is taken from the repository root. .ci/run sets it when
// the corpus sits beside the clone.
const ExtraFixturesEnv = "TOPICFS_KAFKA_FIXTURES"

// ExtraKafkaSets are the fixture sets read from ExtraFixturesEnv; every
// other set lives in testdata/kafka-real.
var ExtraKafkaSets = []string{"kafka41-kraft-nomanazeem", "cp76-kafka36-lz4-rjmfernandes"}

// ExtraMissing is the line a test package logs, once, when the extra corpus
// is absent and its cases are skipped.
const ExtraMissing = "extra Kafka fixture corpus not found: set " + ExtraFixturesEnv + " to run its cases (testdata/kafka-real/PROVENANCE.md)"

var (
	rootOnce   sync.Once
	rootDir    string
	rootErr    error
	missLogged atomic.Bool
)

// RepoRoot returns the repository root: the nearest directory above the
// working directory (a package directory under go test) holding go.mod.
func RepoRoot(t testing.TB) string {
	t.Helper()
	rootOnce.Do(func() {
		dir, err := os.Getwd()
		for err == nil {
			if _, e := os.Stat(filepath.Join(dir, "go.mod")); e == nil {
				rootDir = dir
				return
			}
			parent := filepath.Dir(dir)
			if parent == dir {
				err = os.ErrNotExist
				break
			}
			dir = parent
		}
		rootErr = err
	})
	if rootErr != nil {
		t.Fatalf("repository root (go.mod) not found: %v", rootErr)
	}
	return rootDir
}

// KafkaFixtures returns testdata/kafka-real, the real broker data kept in
// the repository.
func KafkaFixtures(t testing.TB) string {
	t.Helper()
	return filepath.Join(RepoRoot(t), "testdata", "kafka-real")
}

// ExtraKafkaFixtures returns the extra corpus directory and true, or ""
// and false when ExtraFixturesEnv is unset; the first miss in a test binary
// logs ExtraMissing. A set variable naming no directory fails the test: the
// caller asked for the corpus.
func ExtraKafkaFixtures(t testing.TB) (string, bool) {
	t.Helper()
	dir, ok := extraDir(t)
	if !ok {
		if missLogged.CompareAndSwap(false, true) {
			t.Log(ExtraMissing)
		}
		return "", false
	}
	if st, err := os.Stat(dir); err != nil || !st.IsDir() {
		t.Fatalf("%s=%s: not a directory (%v)", ExtraFixturesEnv, dir, err)
	}
	return dir, true
}

// IsExtraKafkaSet says whether rel (a path starting with a set's name)
// belongs to the extra corpus.
func IsExtraKafkaSet(rel string) bool {
	set, _, _ := strings.Cut(filepath.ToSlash(rel), "/")
	for _, s := range ExtraKafkaSets {
		if set == s {
			return true
		}
	}
	return false
}

// KafkaFixture returns the path of rel, a path below a fixture set
// ("kafka0110-zk-sharaweil/data/..."), in whichever corpus holds the set.
// A case that needs the extra corpus is skipped when it is absent.
func KafkaFixture(t testing.TB, rel string) string {
	t.Helper()
	if !IsExtraKafkaSet(rel) {
		return filepath.Join(KafkaFixtures(t), rel)
	}
	dir, ok := ExtraKafkaFixtures(t)
	if !ok {
		t.SkipNow()
	}
	return filepath.Join(dir, rel)
}

// KafkaFixtureRoots returns the directories of every fixture set present:
// testdata/kafka-real's sets, then the extra sets when the corpus is set.
// Keys are set names.
func KafkaFixtureRoots(t testing.TB) map[string]string {
	t.Helper()
	out := map[string]string{}
	ents, err := os.ReadDir(KafkaFixtures(t))
	if err != nil {
		t.Fatalf("fixtures: %v", err)
	}
	for _, e := range ents {
		if e.IsDir() {
			out[e.Name()] = filepath.Join(KafkaFixtures(t), e.Name())
		}
	}
	if dir, ok := ExtraKafkaFixtures(t); ok {
		for _, s := range ExtraKafkaSets {
			out[s] = filepath.Join(dir, s)
		}
	}
	return out
}

// KafkaFixtureFile reads rel from whichever corpus holds its set, for fuzz
// seeds: false when the file is absent (the extra corpus may be), without
// skipping or logging.
func KafkaFixtureFile(t testing.TB, rel string) ([]byte, bool) {
	t.Helper()
	dir := filepath.Join(KafkaFixtures(t), rel)
	if IsExtraKafkaSet(rel) {
		env, ok := extraDir(t)
		if !ok {
			return nil, false
		}
		dir = filepath.Join(env, rel)
	}
	b, err := os.ReadFile(dir)
	return b, err == nil
}

// extraDir is the directory ExtraFixturesEnv names (relative to the repo
// root unless absolute), false when it is unset; it neither logs nor fails.
func extraDir(t testing.TB) (string, bool) {
	dir := os.Getenv(ExtraFixturesEnv)
	if dir == "" {
		return "", false
	}
	if !filepath.IsAbs(dir) {
		dir = filepath.Join(RepoRoot(t), dir)
	}
	return dir, true
}
