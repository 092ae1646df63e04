package bench

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"time"

	"github.com/topicfs/topicfs/engine"
	"github.com/topicfs/topicfs/engine/record"
	"github.com/topicfs/topicfs/engine/vfs"
)

const (
	kvTopic     = "kv"
	kvValueSize = 32
)

func mountRSS(ctx context.Context, r *runner) (rows []Row, err error) {
	row, err := r.rssRead(ctx)
	if err != nil {
		return nil, errorf("after reading", err)
	}
	rows = append(rows, row)
	row, err = r.rssClean(ctx)
	if err != nil {
		return rows, errorf("after cleaning", err)
	}
	return append(rows, row), nil
}

func mib(kib int64) float64 { return float64(kib) / 1024 }

// rssRead reads the small and the big partition end to end, each through a
// fresh mount of the same data, and compares the two mounts' peak RSS: a
// mount whose memory followed the partition's size would peak higher after
// the big one. (One mount reading both would also compare its second read
// with its first, i.e. measure warm-up and GC timing, not partition size.)
func (r *runner) rssRead(ctx context.Context) (row Row, err error) {
	v, err := r.viewData(ctx, topicBig)
	if err != nil {
		return row, err
	}
	small, err := r.peakAfterRead(ctx, v, topicSmall)
	if err != nil {
		return row, err
	}
	big, err := r.peakAfterRead(ctx, v, topicBig)
	if err != nil {
		return row, err
	}
	cfg := engine.DefaultConfig()
	row = Row{
		Workload: "mount-rss",
		Name:     fmt.Sprintf("mount VmHWM after cat records of %s", fmtBytes(v.built[topicBig].logBytes)),
		Value:    Figure{V: mib(big.hwm), Unit: "MiB", Extra: fmt.Sprintf("RssAnon now %.0f MiB", mib(big.anon))},
		BaseName: "after " + fmtBytes(v.built[topicSmall].logBytes),
		Baseline: Figure{V: mib(small.hwm), Unit: "MiB"},
		Note: fmt.Sprintf("VmHWM = peak resident set incl. mapped index/segment pages, each partition read by a fresh mount; idle VmRSS %.0f MiB; buffers: batch.size %s, max.message.bytes %s; the big read ran at %.0f MB/s",
			mib(big.idle), fmtBytes(cfg.BatchSize), fmtBytes(cfg.MaxMessageBytes), mbps(v.built[topicBig].logBytes, big.took)),
	}
	row.ratio()
	row.ratioAtMost(1.25)
	return row, nil
}

// peak is what peakAfterRead measured of one mount.
type peak struct {
	idle, hwm, anon int64 // KiB: VmRSS before the read, VmHWM and RssAnon after it
	took            time.Duration
}

// peakAfterRead mounts v, reads topic's records view end to end once and
// returns the mount's memory before and after.
func (r *runner) peakAfterRead(ctx context.Context, v *viewsData, topic string) (p peak, err error) {
	m, err := r.startMount(ctx, v.dir, nil)
	if err != nil {
		return p, err
	}
	defer func() {
		if serr := m.stop(); err == nil {
			err = serr
		}
	}()
	if p.idle, err = procStatus(m.pid(), "VmRSS"); err != nil {
		return p, err
	}
	if p.took, err = catView(ctx, m.path(topic, "0", "records")); err != nil {
		return p, err
	}
	if p.hwm, err = procStatus(m.pid(), "VmHWM"); err != nil {
		return p, err
	}
	p.anon, err = procStatus(m.pid(), "RssAnon")
	return p, err
}

// buildKV writes keys distinct keys, then every other key once more (so a
// third of the records are obsolete), into a compacted topic whose records
// all sit in sealed segments, and closes the directory cleanly.
func (r *runner) buildKV(data string, keys int64) (records, logBytes int64, err error) {
	d, err := engine.OpenLogDir(vfs.OS, data, engine.LogDirOptions{Logger: quietLogger})
	if err != nil {
		return 0, 0, err
	}
	defer func() {
		if cerr := d.Close(); err == nil {
			err = cerr
		}
	}()
	t, err := d.CreateTopic(kvTopic, 1)
	if err != nil {
		return 0, 0, err
	}
	approx := keys * 3 / 2 * (kvValueSize + 10 + 12)
	segBytes := max(int64(1<<20), approx/16)
	if err := t.AlterConfig(map[string]string{
		"cleanup.policy": "compact",
		"segment.bytes":  strconv.FormatInt(segBytes, 10),
	}); err != nil {
		return 0, 0, err
	}
	part, err := t.Partition(0)
	if err != nil {
		return 0, 0, err
	}
	p := newPool(4)
	recs := make([]record.Record, appendBatch)
	keyBuf := make([]byte, 0, appendBatch*10)
	appendKeys := func(from, to, step int64) error {
		for k := from; k < to; {
			keyBuf = keyBuf[:0]
			n := 0
			for ; n < appendBatch && k < to; k += step {
				start := len(keyBuf)
				keyBuf = fmt.Appendf(keyBuf, "k%09d", k)
				recs[n] = record.Record{Timestamp: -1, Key: keyBuf[start:len(keyBuf):len(keyBuf)], Value: p.chunk(records+int64(n), kvValueSize)}
				n++
			}
			if _, _, err := part.Append(recs[:n]); err != nil {
				return err
			}
			records += int64(n)
		}
		return nil
	}
	if err := appendKeys(0, keys, 1); err != nil {
		return 0, 0, err
	}
	if err := appendKeys(0, keys, 2); err != nil {
		return 0, 0, err
	}
	if err := part.Roll(); err != nil {
		return 0, 0, err
	}
	for _, s := range part.Segments() {
		logBytes += s.Size
	}
	return records, logBytes, nil
}

// rssClean mounts a compacted topic of sizes.CleanKeys keys, waits for the
// cleaner to clean it all and reports the mount's peak RSS next to the
// configured dedupe buffer.
func (r *runner) rssClean(ctx context.Context) (row Row, err error) {
	data, records, logBytes, err := r.kvData(ctx, "kv-data")
	if err != nil {
		return row, err
	}
	defer os.RemoveAll(data)
	dedupe := engine.DefaultConfig().CleanerDedupeBufferSize
	m, err := r.startMount(ctx, data, map[string]string{"log.cleaner.dedupe.buffer.size": strconv.FormatInt(dedupe, 10)})
	if err != nil {
		return row, err
	}
	defer func() {
		if serr := m.stop(); err == nil {
			err = serr
		}
	}()
	idle, err := procStatus(m.pid(), "VmRSS")
	if err != nil {
		return row, err
	}
	start := time.Now()
	var st partitionStats
	for {
		st, err = m.stats(kvTopic)
		if err != nil {
			return row, err
		}
		// Done when the cleaner has run and will not run again: nothing
		// dirty left, or (a map-full round leaves the rest) the dirty
		// ratio fell below min.cleanable.dirty.ratio.
		if p := st.Policies; p != nil && p.Cleanings > 0 && !p.Cleaning &&
			(p.FirstDirtyOffset >= p.FirstUncleanableOffset || p.DirtyRatio < p.MinCleanableDirtyRatio) {
			break
		}
		if time.Since(start) > readyDeadline {
			return row, fmt.Errorf("the cleaner has not finished with %s/0 after %v (stats: %s)", kvTopic, readyDeadline, statsLine(st))
		}
		select {
		case <-ctx.Done():
			return row, ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
	took := time.Since(start)
	hwm, err := procStatus(m.pid(), "VmHWM")
	if err != nil {
		return row, err
	}
	anon, err := procStatus(m.pid(), "RssAnon")
	if err != nil {
		return row, err
	}
	row = Row{
		Workload: "mount-rss",
		Name:     fmt.Sprintf("mount VmHWM after cleaning %d keys", r.sizes.CleanKeys),
		Value:    Figure{V: mib(hwm), Unit: "MiB", Extra: fmt.Sprintf("RssAnon now %.0f MiB", mib(anon))},
		BaseName: "dedupe buffer",
		Baseline: Figure{V: float64(dedupe) / (1 << 20), Unit: "MiB"},
		Note: fmt.Sprintf("idle VmRSS %.0f MiB; %d records (%s) in, %d cleanings (until the dirty ratio fell to %.2f), log now %s; done within %v of mounting",
			mib(idle), records, fmtBytes(logBytes), st.Policies.Cleanings, st.Policies.DirtyRatio, fmtBytes(st.SizeBytes), took.Round(time.Millisecond)),
	}
	row.ratio()
	limit := float64(dedupe)/(1<<20) + 64
	row.Target = fmt.Sprintf("≤ buffer + 64 MiB")
	met := row.Value.V <= limit
	row.Met = &met
	return row, nil
}

// statsLine summarises the cleaner state of a stats file for an error.
func statsLine(st partitionStats) string {
	p := st.Policies
	if p == nil {
		return "no policies state"
	}
	return fmt.Sprintf("first dirty %d, first uncleanable %d, dirty ratio %.2f (min %.2f), cleanings %d, cleaning now %v",
		p.FirstDirtyOffset, p.FirstUncleanableOffset, p.DirtyRatio, p.MinCleanableDirtyRatio, p.Cleanings, p.Cleaning)
}
