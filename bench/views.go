package bench

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"sync"
	"time"

	"github.com/topicfs/topicfs/engine"
	"github.com/topicfs/topicfs/engine/vfs"
)

// Topics of the shared views data directory.
const (
	topicSmall  = "small"  // sizes.Read: sequential reads, small by-offset and RSS partition
	topicLarge  = "large"  // sizes.OffsetLarge: large by-offset partition
	topicBig    = "big"    // sizes.RSSRead: read end to end before the RSS figure
	topicAppend = "append" // empty: mount appends go here
)

// viewValueSize is the value size of the view partitions (a 100-byte line
// each with its '\n').
const viewValueSize = 99

// viewsData is a data directory (built through engine.LogDir, closed
// cleanly) holding the partitions the read, offset and RSS rows read.
type viewsData struct {
	dir       string
	valueSize int
	built     map[string]topicInfo
}

type topicInfo struct {
	records  int64
	logBytes int64
}

// viewData returns the views data directory with at least the small
// partition and the other topics given, building what is missing.
func (r *runner) viewData(ctx context.Context, topics ...string) (*viewsData, error) {
	if r.views == nil {
		r.views = &viewsData{dir: r.path("views"), valueSize: viewValueSize, built: map[string]topicInfo{}}
	}
	v := r.views
	want := r.viewSizes(topics)
	var missing []string
	for t := range want {
		if _, ok := v.built[t]; !ok {
			missing = append(missing, t)
		}
	}
	if len(missing) == 0 {
		return v, nil
	}
	d, err := engine.OpenLogDir(vfs.OS, v.dir, engine.LogDirOptions{Logger: quietLogger})
	if err != nil {
		return nil, err
	}
	start := time.Now()
	errs := v.fill(ctx, d, missing, want)
	errs = append(errs, v.measureLogs(missing, want)...)
	if err := d.Close(); err != nil {
		errs = append(errs, err)
	}
	if err := errors.Join(errs...); err != nil {
		return nil, errorf("build views data", err)
	}
	r.logf("built %v in %s in %v", missing, v.dir, time.Since(start).Round(time.Millisecond))
	return v, ctx.Err()
}

// viewSizes returns the partitions a caller of viewData needs, by topic:
// the small one and those of topics, each with the bytes of .log it is to
// hold (0: empty).
func (r *runner) viewSizes(topics []string) map[string]int64 {
	want := map[string]int64{topicSmall: r.sizes.Read}
	for _, t := range topics {
		switch t {
		case topicLarge:
			want[t] = r.sizes.OffsetLarge
		case topicBig:
			want[t] = r.sizes.RSSRead
		case topicAppend:
			want[t] = 0
		}
	}
	return want
}

// fill creates the topics missing in d, one partition each, and fills each
// to about want[name] bytes of .log, two at a time, until ctx is done; it
// records each one built in v.built and returns what failed.
func (v *viewsData) fill(ctx context.Context, d *engine.LogDir, missing []string, want map[string]int64) []error {
	p := newPool(2)
	var mu sync.Mutex // guards errs and v.built
	var errs []error
	fail := func(err error) {
		mu.Lock()
		defer mu.Unlock()
		errs = append(errs, err)
	}
	var wg sync.WaitGroup
	for i, name := range missing {
		t, err := d.CreateTopic(name, 1)
		if err != nil {
			fail(err)
			continue
		}
		part, err := t.Partition(0)
		if err != nil {
			fail(err)
			continue
		}
		wg.Go(func() {
			var n int64
			var err error
			if want[name] > 0 {
				n, err = fillPartition(part, p, want[name]*int64(viewValueSize)/int64(viewValueSize+recordOverhead), viewValueSize, int64(i)*7919)
			}
			if err != nil {
				fail(fmt.Errorf("fill %s: %w", name, err))
				return
			}
			mu.Lock()
			defer mu.Unlock()
			v.built[name] = topicInfo{records: n}
		})
		if ctx.Err() != nil {
			break
		}
	}
	wg.Wait()
	return errs
}

// measureLogs records in v.built the .log bytes of each partition of
// missing that was built and holds records, and returns what failed.
func (v *viewsData) measureLogs(missing []string, want map[string]int64) []error {
	var errs []error
	for _, name := range missing {
		if info, ok := v.built[name]; ok {
			if want[name] > 0 {
				_, lb, err := logFiles(v.partDir(name))
				if err != nil {
					errs = append(errs, err)
				}
				info.logBytes = lb
				v.built[name] = info
			}
		}
	}
	return errs
}

// recordOverhead is about what a 99-byte value costs on top of its bytes in
// an uncompressed batch of 1000 (record framing + batch header share), so a
// partition of "N bytes" holds about N bytes of .log.
const recordOverhead = 9

func (v *viewsData) partDir(topic string) string { return filepath.Join(v.dir, topic+"-0") }
