package cli

import (
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/topicfs/topicfs/engine"
)

// MountConfig is mount.toml resolved and validated: what mount opens the
// data directory with.
type MountConfig struct {
	Source    string                       // the config file, or "built-in defaults"
	Keys      []string                     // the top-level Kafka names the file set, sorted
	Defaults  engine.Config                // every topic's config before [topics.NAME]
	Overrides map[string]map[string]string // [topics.NAME] tables, validated
	DataDir   string                       // log.dirs, or the default data home; "" if neither
	Cluster   map[string]string            // cluster-mode settings (clusterKeys), unvalidated
}

// defaultDataDir is $XDG_DATA_HOME/topicfs, else ~/.local/share/topicfs.
func defaultDataDir() (string, error) {
	if x := os.Getenv("XDG_DATA_HOME"); x != "" && filepath.IsAbs(x) {
		return filepath.Join(x, "topicfs"), nil
	}
	home, err := os.UserHomeDir()
	if err != nil {
		return "", fmt.Errorf("no data directory: give --data DIR (cannot find the home directory: %v)", err)
	}
	return filepath.Join(home, ".local", "share", "topicfs"), nil
}

// LoadMountConfig loads mount.toml from path ("" = none: built-in defaults)
// and applies every setting through engine.Config.Set, so names and values
// are validated exactly as a topic's config file validates them. Errors name
// the offending key.
func LoadMountConfig(path string) (*MountConfig, error) {
	mc := &MountConfig{
		Source:    "built-in defaults",
		Defaults:  engine.DefaultConfig(),
		Overrides: map[string]map[string]string{},
	}
	if path == "" {
		return mc, nil
	}
	fc, err := loadConfigFile(path)
	if err != nil {
		return nil, err
	}
	return mc.apply(fc)
}

// parseMountConfig is LoadMountConfig over mount.toml's bytes: path names the
// source in errors and is the base log.dirs resolves against; it is not read.
func parseMountConfig(path string, data []byte) (*MountConfig, error) {
	fc, err := parseConfig(path, string(data))
	if err != nil {
		return nil, err
	}
	mc := &MountConfig{Defaults: engine.DefaultConfig(), Overrides: map[string]map[string]string{}}
	return mc.apply(fc)
}

// apply validates the flattened file fc into mc (built-in defaults so far).
func (mc *MountConfig) apply(fc *fileConfig) (*MountConfig, error) {
	path := fc.Path
	mc.Source = path
	mc.DataDir = fc.DataDir
	mc.Cluster = fc.Cluster
	// Broker-wide names (log.retention.hours, ...) as copied from a broker's
	// server.properties become the topic settings they are defaults of.
	settings, err := engine.FromBrokerNames(fc.Settings)
	if err != nil {
		return nil, fmt.Errorf("config %s: %s", path, strings.ReplaceAll(err.Error(), "engine: ", ""))
	}
	mc.Keys = sortedKeys(settings)
	for _, name := range mc.Keys {
		if err := mc.Defaults.Set(name, settings[name]); err != nil {
			return nil, fmt.Errorf("config %s: %s", path, engineMsg(err))
		}
	}
	for _, topic := range sortedKeys(fc.Topics) {
		if err := engine.ValidTopicName(topic); err != nil {
			return nil, fmt.Errorf("config %s: [topics.%s]: %s", path, topic, engineMsg(err))
		}
		kv := fc.Topics[topic]
		c := mc.Defaults
		for _, name := range sortedKeys(kv) {
			if own, ok := engine.BrokerNameTopic(name); ok {
				return nil, fmt.Errorf("config %s: [topics.%s] key %q is a broker-wide name, for the top level; a topic table takes %s", path, topic, name, own)
			}
			if err := c.Set(name, kv[name]); err != nil {
				return nil, fmt.Errorf("config %s: [topics.%s]: %s", path, topic, engineMsg(err))
			}
			if !engine.IsTopicSetting(name) {
				return nil, fmt.Errorf("config %s: [topics.%s] key %q is a mount-wide setting; set it at the top level", path, topic, name)
			}
		}
		mc.Overrides[topic] = kv
	}
	return mc, nil
}

// engineMsg is an engine error without the "engine: " prefix: the engine's
// messages already name the setting and the rule it breaks.
func engineMsg(err error) string {
	return strings.TrimPrefix(err.Error(), "engine: ")
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
