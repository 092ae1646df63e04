package cluster

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/topicfs/topicfs/backend"
)

// Bounds of the settings a cluster backend checks itself, the same as the
// local mount's (README.md, Configuration).
const (
	maxBatchSize  = 64 << 20                   // batch.size: bytes an append file buffers per partition
	maxDurationMs = math.MaxInt64 / int64(1e6) // linger.ms: what a time.Duration holds
	maxPartitions = 10000                      // num.partitions
	maxInt16      = math.MaxInt16              // replication.factor
)

// localSettings are topicfs's own settings of a topic: no broker knows
// them, so they persist under the state directory, per cluster and topic.
type localSettings struct {
	ParseKey     bool
	PrintKey     bool
	KeySeparator string
	NullMarker   string
	BatchSize    int64
	LingerMs     int64
	CursorStart  string
}

// localNames are the names of localSettings, sorted.
var localNames = []string{"batch.size", "cursor.start", "key.separator", "linger.ms", "null.marker", "parse.key", "print.key"}

func isLocal(name string) bool { return slices.Contains(localNames, name) }

// defaultSettings are the local mount's defaults.
func defaultSettings() localSettings {
	return localSettings{KeySeparator: "\t", BatchSize: 16384, LingerMs: 5, CursorStart: "earliest"}
}

// get returns the value of name as set accepts it.
func (s localSettings) get(name string) string {
	switch name {
	case "parse.key":
		return strconv.FormatBool(s.ParseKey)
	case "print.key":
		return strconv.FormatBool(s.PrintKey)
	case "key.separator":
		return s.KeySeparator
	case "null.marker":
		return s.NullMarker
	case "batch.size":
		return strconv.FormatInt(s.BatchSize, 10)
	case "linger.ms":
		return strconv.FormatInt(s.LingerMs, 10)
	case "cursor.start":
		return s.CursorStart
	}
	return ""
}

// set returns s with name set to value, or an error wrapping
// backend.ErrInvalidConfig naming both and the rule. Numbers and booleans
// may carry spaces; key.separator and null.marker are taken literally.
func (s localSettings) set(name, value string) (localSettings, error) {
	bad := func(why string) error {
		return fmt.Errorf("%w: %s=%q: %s", backend.ErrInvalidConfig, name, value, why)
	}
	var err error
	switch name {
	case "parse.key":
		s.ParseKey, err = parseBool(value)
	case "print.key":
		s.PrintKey, err = parseBool(value)
	case "key.separator":
		if value == "" {
			return s, bad("must not be empty")
		}
		s.KeySeparator, err = value, checkOneLine(value)
	case "null.marker":
		s.NullMarker, err = value, checkOneLine(value)
	case "batch.size":
		s.BatchSize, err = parseRange(value, 0, maxBatchSize)
	case "linger.ms":
		s.LingerMs, err = parseRange(value, 0, maxDurationMs)
	case "cursor.start":
		switch v := strings.ToLower(strings.TrimSpace(value)); v {
		case "earliest", "latest":
			s.CursorStart = v
		default:
			err = errors.New("must be earliest or latest")
		}
	default:
		return s, fmt.Errorf("%w: unknown setting %q", backend.ErrInvalidConfig, name)
	}
	if err != nil {
		return s, bad(err.Error())
	}
	return s, nil
}

// apply returns s with every name=value of kv set, or an error naming
// every bad entry (and s unchanged).
func (s localSettings) apply(kv map[string]string) (localSettings, error) {
	out := s
	var errs []error
	for _, name := range slices.Sorted(maps.Keys(kv)) {
		next, err := out.set(name, kv[name])
		if err != nil {
			errs = append(errs, err)
			continue
		}
		out = next
	}
	if len(errs) > 0 {
		return s, errors.Join(errs...)
	}
	return out, nil
}

func parseBool(v string) (bool, error) {
	switch strings.ToLower(strings.TrimSpace(v)) {
	case "true":
		return true, nil
	case "false":
		return false, nil
	}
	return false, errors.New("must be true or false")
}

func parseRange(v string, lo, hi int64) (int64, error) {
	n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
	switch {
	case err != nil:
		return 0, errors.New("not an integer")
	case n < lo:
		return 0, fmt.Errorf("must be at least %d", lo)
	case n > hi:
		return 0, fmt.Errorf("must be at most %d", hi)
	}
	return n, nil
}

func checkOneLine(v string) error {
	if strings.ContainsAny(v, "\n\r") {
		return errors.New("must not contain a line break")
	}
	return nil
}

// settingsPath is where the local settings of topic persist. Topic names
// are Kafka's ([a-zA-Z0-9._-], never . or ..), so they are file names.
func (c *Cluster) settingsPath(topic string) string {
	return filepath.Join(c.stateDir, "topics", safeName(topic)+".json")
}

// loadSettings returns the values stored for topic (none if nothing is
// stored). A value that no longer passes its check is dropped with a
// warning: the file is the mount's, but a person may have edited it.
func (c *Cluster) loadSettings(topic string) map[string]string {
	data, err := os.ReadFile(c.settingsPath(topic))
	if errors.Is(err, fs.ErrNotExist) {
		return map[string]string{}
	}
	stored := map[string]string{}
	if err == nil {
		err = json.Unmarshal(data, &stored)
	}
	if err != nil {
		c.log.Warn("cluster: ignoring the stored settings of a topic", "topic", topic,
			"file", c.settingsPath(topic), "err", err)
		return map[string]string{}
	}
	for _, name := range slices.Sorted(maps.Keys(stored)) {
		if _, err := defaultSettings().set(name, stored[name]); err != nil {
			c.log.Warn("cluster: ignoring a stored setting", "topic", topic, "err", err)
			delete(stored, name)
		}
	}
	return stored
}

// saveSettings persists the values set for topic: a new file, fsynced,
// renamed over the old one, and the directory fsynced.
func (c *Cluster) saveSettings(topic string, stored map[string]string) error {
	data, err := json.MarshalIndent(stored, "", "  ")
	if err != nil {
		return err
	}
	path := c.settingsPath(topic)
	dir := filepath.Dir(path)
	f, err := os.CreateTemp(dir, "."+filepath.Base(path)+".*")
	if err != nil {
		return fmt.Errorf("cluster: save settings of %s: %w", topic, err)
	}
	tmp := f.Name()
	_, err = f.Write(append(data, '\n'))
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, path)
	}
	if err != nil {
		_ = os.Remove(tmp)
		return fmt.Errorf("cluster: save settings of %s: %w", topic, err)
	}
	return syncDir(dir)
}

// removeSettings forgets the stored settings of a deleted topic.
func (c *Cluster) removeSettings(topic string) error {
	err := os.Remove(c.settingsPath(topic))
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("cluster: remove settings of %s: %w", topic, err)
	}
	return syncDir(filepath.Dir(c.settingsPath(topic)))
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}
