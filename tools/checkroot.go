package tools

import (
	"fmt"
	"path/filepath"
	"slices"
	"strings"

	"github.com/topicfs/topicfs/engine"
	"github.com/topicfs/topicfs/engine/vfs"
)

// The data directory's root files: checkpoints and topicfs-topics.json.

// Root checkpoint files (docs/FORMATS.md §6.1).
var checkpointFiles = []string{
	engine.RecoveryPointCheckpointFile,
	engine.LogStartOffsetCheckpointFile,
	engine.CleanerOffsetCheckpointFile,
	"replication-offset-checkpoint",
}

// checkTopicsConfig verifies topicfs-topics.json: it must parse; settings
// the engine would not accept are warnings (it skips them when opening).
func checkTopicsConfig(fsys vfs.FS, dir string, rep *CheckReport) {
	path := filepath.Join(dir, engine.TopicsConfigFile)
	topics, err := engine.ReadTopicsFile(fsys, dir)
	if err != nil {
		rep.Root = append(rep.Root, Problem{Path: path, Position: -1, Message: err.Error()})
		return
	}
	for topic, kv := range topics {
		for k, v := range kv {
			if _, err := engine.DefaultConfig().Apply(map[string]string{k: v}); err != nil || !engine.IsTopicSetting(k) {
				rep.Warnings = append(rep.Warnings, Problem{Path: path, Position: -1,
					Message: fmt.Sprintf("topic %s: setting %s=%s is ignored when opening (%v)", topic, k, v, err)})
			}
		}
	}
}

func checkCheckpoints(fsys vfs.FS, dir string, rep *CheckReport) {
	present := map[engine.TopicPartition]*PartitionReport{}
	for i := range rep.Partitions {
		p := &rep.Partitions[i]
		present[engine.TopicPartition{Topic: p.Topic, Partition: p.Partition}] = p
	}
	for _, name := range checkpointFiles {
		path := filepath.Join(dir, name)
		if _, err := fsys.Stat(path); err != nil {
			continue
		}
		m, err := engine.ReadCheckpoint(fsys, path)
		if err != nil {
			rep.Root = append(rep.Root, Problem{Path: path, Position: -1, Message: fmt.Sprintf("does not parse: %v", err)})
			continue
		}
		var absent []string
		for tp, off := range m {
			p := present[tp]
			if p == nil {
				absent = append(absent, fmt.Sprintf("%s-%d", tp.Topic, tp.Partition))
				continue
			}
			if off < 0 {
				rep.Root = append(rep.Root, Problem{Path: path, Position: -1, Message: fmt.Sprintf("%s-%d: negative offset %d", tp.Topic, tp.Partition, off)})
			} else if off > p.NextOffset && name != engine.CleanerOffsetCheckpointFile {
				rep.Warnings = append(rep.Warnings, Problem{Path: path, Position: -1,
					Message: fmt.Sprintf("%s-%d: offset %d is beyond the log end %d (data the checkpoint counted is missing)", tp.Topic, tp.Partition, off, p.NextOffset)})
			}
		}
		if len(absent) > 0 {
			slices.Sort(absent)
			example := strings.Join(absent[:min(3, len(absent))], ", ")
			rep.Warnings = append(rep.Warnings, Problem{Path: path, Position: -1,
				Message: fmt.Sprintf("%d entries name partitions not in this directory (e.g. %s)", len(absent), example)})
		}
	}
}
