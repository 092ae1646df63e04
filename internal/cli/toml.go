package cli

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"

	"github.com/BurntSushi/toml"
)

// fileConfig is mount.toml flattened to Kafka names, before validation.
//
// mount.toml accepts a setting under its Kafka name in either TOML spelling:
//
//	"segment.bytes" = 1073741824     # a quoted key
//	[segment]
//	bytes = 1073741824               # a table: flattens to segment.bytes
//	segment.bytes = 1073741824       # a dotted key: the same table
//
// plus log.dirs (the data directory) and [topics.NAME] tables of per-topic
// overrides. Values may be integers, floats, booleans, strings, or arrays of
// strings (joined with ",", so cleanup.policy = ["compact", "delete"] works).
type fileConfig struct {
	Path     string
	Settings map[string]string            // top-level Kafka names → value
	Topics   map[string]map[string]string // [topics.NAME] → Kafka name → value
	DataDir  string                       // log.dirs (or log.dir), resolved; "" if absent
	Cluster  map[string]string            // cluster-mode settings (clusterKeys)
}

// topicsTable is the reserved top-level table of per-topic overrides.
const topicsTable = "topics"

// loadConfigFile reads and flattens mount.toml. It does not validate names or
// values: LoadMountConfig passes every one through engine.Config.Set.
func loadConfigFile(path string) (*fileConfig, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		var pe *os.PathError
		if errors.As(err, &pe) {
			return nil, fmt.Errorf("cannot read config %s: %v", path, pe.Err)
		}
		return nil, fmt.Errorf("cannot read config %s: %v", path, err)
	}
	return parseConfig(path, string(data))
}

// parseConfig flattens the TOML text of a mount.toml read from path.
func parseConfig(path, text string) (*fileConfig, error) {
	var raw map[string]any
	if _, err := toml.Decode(text, &raw); err != nil {
		var pe toml.ParseError
		if errors.As(err, &pe) {
			msg := pe.Message
			if pe.LastKey != "" {
				msg = fmt.Sprintf("%s (after key %q)", msg, pe.LastKey)
			}
			return nil, fmt.Errorf("config %s: line %d: %s", path, pe.Position.Line, msg)
		}
		return nil, fmt.Errorf("config %s: %v", path, err)
	}
	fc := &fileConfig{
		Path:     path,
		Settings: map[string]string{},
		Topics:   map[string]map[string]string{},
		Cluster:  map[string]string{},
	}
	for key, v := range raw {
		if key != topicsTable {
			continue
		}
		tables, ok := v.(map[string]any)
		if !ok {
			return nil, fmt.Errorf("config %s: %q must be a table of [topics.NAME] tables", path, topicsTable)
		}
		for name, tv := range tables {
			t, ok := tv.(map[string]any)
			if !ok {
				return nil, fmt.Errorf("config %s: topics.%s must be a table of settings ([topics.%q])", path, name, name)
			}
			kv := map[string]string{}
			if err := flatten(kv, "", t); err != nil {
				return nil, fmt.Errorf("config %s: [topics.%s]: %v", path, name, err)
			}
			fc.Topics[name] = kv
		}
	}
	delete(raw, topicsTable)
	if err := flatten(fc.Settings, "", raw); err != nil {
		return nil, fmt.Errorf("config %s: %v", path, err)
	}
	for _, k := range clusterKeys {
		if v, ok := fc.Settings[k]; ok {
			fc.Cluster[k] = v
			delete(fc.Settings, k)
		}
	}
	var dirKeys []string
	for _, k := range []string{"log.dirs", "log.dir"} {
		if v, ok := fc.Settings[k]; ok {
			dirKeys = append(dirKeys, k)
			delete(fc.Settings, k)
			if strings.Contains(v, ",") {
				return nil, fmt.Errorf("config %s: key %q lists several directories (%s); topicfs mounts one data directory", path, k, v)
			}
			if strings.TrimSpace(v) == "" {
				return nil, fmt.Errorf("config %s: key %q is empty", path, k)
			}
			dir := resolvePath(filepath.Dir(path), strings.TrimSpace(v))
			if dir != strings.TrimSpace(dir) {
				// "a /" cleans to "a ": a directory whose name ends in white
				// space, which the trim above makes impossible to write as
				// log.dirs; refuse it rather than mount a look-alike.
				return nil, fmt.Errorf("config %s: key %q names a directory ending in white space (%q)", path, k, dir)
			}
			fc.DataDir = dir
		}
	}
	if len(dirKeys) > 1 {
		return nil, fmt.Errorf("config %s: both log.dirs and log.dir are set; keep one", path)
	}
	return fc, nil
}

// flatten walks a decoded TOML table, joining nested keys with "." into
// Kafka names, and stores each value as the string Config.Set takes.
func flatten(dst map[string]string, prefix string, table map[string]any) error {
	keys := make([]string, 0, len(table))
	for k := range table {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		name := k
		if prefix != "" {
			name = prefix + "." + k
		}
		if sub, ok := table[k].(map[string]any); ok {
			if err := flatten(dst, name, sub); err != nil {
				return err
			}
			continue
		}
		s, err := scalarString(table[k])
		if err != nil {
			return fmt.Errorf("key %q: %v", name, err)
		}
		if _, dup := dst[name]; dup {
			return fmt.Errorf("key %q is given twice (once quoted, once as a table or dotted key)", name)
		}
		dst[name] = s
	}
	return nil
}

// scalarString renders a TOML value as the text Config.Set accepts.
func scalarString(v any) (string, error) {
	switch x := v.(type) {
	case string:
		return x, nil
	case int64:
		return strconv.FormatInt(x, 10), nil
	case float64:
		return strconv.FormatFloat(x, 'g', -1, 64), nil
	case bool:
		return strconv.FormatBool(x), nil
	case []any:
		parts := make([]string, 0, len(x))
		for _, e := range x {
			if _, nested := e.([]any); nested {
				return "", errors.New("nested arrays are not a setting value")
			}
			if _, table := e.(map[string]any); table {
				return "", errors.New("an array of tables is not a setting value")
			}
			s, err := scalarString(e)
			if err != nil {
				return "", err
			}
			parts = append(parts, s)
		}
		return strings.Join(parts, ","), nil
	default:
		return "", fmt.Errorf("unsupported value type %T (use a number, string or boolean)", v)
	}
}

// resolvePath expands a leading ~/ and makes a relative path relative to
// base (the config file's directory).
func resolvePath(base, p string) string {
	if p == "~" || strings.HasPrefix(p, "~/") {
		if home, err := os.UserHomeDir(); err == nil {
			p = filepath.Join(home, strings.TrimPrefix(p, "~"))
		}
	}
	if !filepath.IsAbs(p) {
		p = filepath.Join(base, p)
	}
	if abs, err := filepath.Abs(p); err == nil {
		p = abs
	}
	return filepath.Clean(p)
}
