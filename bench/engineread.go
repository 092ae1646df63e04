package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"runtime"
	"time"

	"github.com/topicfs/topicfs/engine"
	"github.com/topicfs/topicfs/engine/record"
	"github.com/topicfs/topicfs/engine/vfs"
)

// catLogs times `cat` of the partition's .log files to /dev/null.
func catLogs(ctx context.Context, dir string) (time.Duration, int64, error) {
	files, total, err := logFiles(dir)
	if err != nil {
		return 0, 0, err
	}
	d, err := timeCmd(ctx, nil, "cat", files...)
	return d, total, err
}

// rawReadLogs reads the partition's .log files end to end in this process,
// 1 MiB preads into one buffer and nothing else: the raw sequential read
// the engine read rows are measured against. It returns the time and the
// bytes read.
func rawReadLogs(dir string) (time.Duration, int64, error) {
	files, _, err := logFiles(dir)
	if err != nil {
		return 0, 0, err
	}
	buf := make([]byte, engine.DefaultReaderBufferSize)
	var total int64
	start := time.Now()
	for _, name := range files {
		f, err := os.Open(name)
		if err != nil {
			return 0, 0, err
		}
		for off := int64(0); ; {
			n, err := f.ReadAt(buf, off)
			off += int64(n)
			total += int64(n)
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				f.Close()
				return 0, 0, err
			}
		}
		f.Close()
	}
	return time.Since(start), total, nil
}

// readPartition reads the partition at dir end to end through the engine's
// sequential Reader (1 MiB preads, every batch CRC-checked and structurally
// verified before use, the next chunk prefetched by a second goroutine) and,
// when decode is set, decodes every record with Batch.EachRecord (key and
// value in hand, aliasing the read buffer; a null value is an error: the
// bench data has none); it returns the records (those the batches declare
// when not decoding) and .log bytes read.
func readPartition(dir, topic string, decode bool) (records, bytes int64, err error) {
	part, err := engine.OpenPartition(vfs.OS, dir, topic, 0, engine.PartitionOptions{
		Config: engine.DefaultConfig(), RecoveryPoint: -1, LogStartOffset: -1, FirstDirty: -1,
		ReadOnly: true, CleanShutdown: true, Logger: quietLogger,
	})
	if err != nil {
		return 0, 0, err
	}
	defer part.Close()
	rd := part.NewReader(part.LogStartOffset(), engine.ReaderOptions{})
	defer rd.Close()
	count := func(r *record.Record) error {
		if r.Value == nil {
			return fmt.Errorf("null value at offset %d", r.Offset)
		}
		records++
		return nil
	}
	var scratch []byte
	for {
		b, err := rd.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return records, bytes, err
		}
		if !decode {
			records += int64(b.RecordCount)
		} else if scratch, err = b.EachRecord(scratch, count); err != nil {
			return records, bytes, err
		}
		bytes += int64(b.Size())
	}
	if records == 0 {
		return 0, 0, errNoData
	}
	return records, bytes, nil
}

// readKiBDir returns the partition of 1 KiB values the engine read rows
// read (sizes.Read bytes of .log), building it the first time.
func (r *runner) readKiBDir() (string, error) {
	dir := r.path("read-1k", "t-0")
	if r.readKiB {
		return dir, nil
	}
	part, err := engine.OpenPartition(vfs.OS, dir, "t", 0, newPartitionOptions(engine.DefaultConfig()))
	if err != nil {
		return "", err
	}
	const size = 1024
	if _, err := fillPartition(part, newPool(3), r.sizes.Read*size/(size+recordOverhead), size, 11); err != nil {
		part.Close()
		return "", err
	}
	if err := part.Close(); err != nil {
		return "", err
	}
	r.readKiB = true
	return dir, nil
}

// readSide is one engine side of an engine read row: its best run.
type readSide struct {
	best        time.Duration
	recs, bytes int64
	cpuShare    string
}

// timeRead runs readPartition once and keeps it in s if it is the best.
func (s *readSide) timeRead(dir, topic string, decode bool) error {
	runtime.GC()
	u := startUsage()
	start := time.Now()
	n, b, err := readPartition(dir, topic, decode)
	d := time.Since(start)
	if err != nil {
		return err
	}
	if s.best == 0 || d < s.best {
		s.best, s.recs, s.bytes = d, n, b
		s.cpuShare = u.share(d)
	}
	return nil
}

// engineRead times the engine's sequential read of a partition of 99-byte
// values (every record decoded; and as verified batches only) and of one of
// 1 KiB values (decoded), each beside the raw read of the same .log files
// in this process, the sides interleaved and the best run of each kept.
func engineRead(ctx context.Context, r *runner) ([]Row, error) {
	v, err := r.viewData(ctx)
	if err != nil {
		return nil, err
	}
	kib, err := r.readKiBDir()
	if err != nil {
		return nil, errorf("build 1 KiB partition", err)
	}
	parts := []*readPart{
		{dir: v.partDir(topicSmall), topic: topicSmall, valueSize: v.valueSize, target: 0.6, sides: make([]readSide, 2)},
		{dir: kib, topic: "t", valueSize: 1024, target: 0.85, sides: make([]readSide, 1)},
	}
	for _, p := range parts {
		if _, _, err := rawReadLogs(p.dir); err != nil { // warm the page cache
			return nil, errorf("read .log", err)
		}
	}
	for range r.targetReps() {
		for _, p := range parts {
			if ctx.Err() != nil {
				return nil, ctx.Err()
			}
			runtime.GC()
			d, n, err := rawReadLogs(p.dir)
			if err != nil {
				return nil, errorf("read .log", err)
			}
			if p.raw == 0 || d < p.raw {
				p.raw, p.rawBytes = d, n
			}
			for i := range p.sides {
				if err := p.sides[i].timeRead(p.dir, p.topic, i == 0); err != nil {
					return nil, errorf("engine read", err)
				}
			}
		}
	}
	var rows []Row
	for _, p := range parts {
		rs, err := p.rows()
		if err != nil {
			return rows, err
		}
		rows = append(rows, rs...)
	}
	return rows, nil
}

// readPart is one partition of the engine read rows: the best run of each
// side.
type readPart struct {
	dir, topic string
	valueSize  int
	target     float64
	sides      []readSide // decoded, then (when there are two) batches only
	raw        time.Duration
	rawBytes   int64
}

// rows are p's rows: decoded, and batches only when measured.
func (p *readPart) rows() ([]Row, error) {
	for _, s := range p.sides {
		if s.bytes != p.rawBytes {
			return nil, fmt.Errorf("engine read %d bytes, the .log files hold %d", s.bytes, p.rawBytes)
		}
	}
	if len(p.sides) > 1 && p.sides[0].recs != p.sides[1].recs {
		return nil, fmt.Errorf("engine read decoded %d records, the batches declare %d", p.sides[0].recs, p.sides[1].recs)
	}
	base := Figure{V: mbps(p.rawBytes, p.raw), Unit: "MB/s"}
	dec := p.sides[0]
	row := Row{
		Workload: "engine-read",
		Name:     fmt.Sprintf("engine read %s (%s values)", fmtBytes(dec.bytes), sizeName(p.valueSize)),
		Value:    Figure{V: mbps(dec.bytes, dec.best), Unit: "MB/s", Extra: perSec(dec.recs, dec.best, "rec") + ", " + dec.cpuShare},
		BaseName: "pread .log",
		Baseline: base,
	}
	row.ratio()
	row.ratioAtLeast(p.target)
	rows := []Row{row}
	if p.valueSize < 1024 {
		rows[0].Note = "engine.Reader (1 MiB preads, next chunk prefetched; CRC + structure of every batch verified before use) + Batch.EachRecord (every record decoded, key/value aliasing the buffer, non-null value checked, counted); MB/s of .log bytes; baseline: the same .log files read in 1 MiB preads into one buffer by this process; page cache warm for both"
	}
	if len(p.sides) > 1 {
		bat := p.sides[1]
		batches := Row{
			Workload: "engine-read",
			Name:     fmt.Sprintf("engine read %s, batches only", fmtBytes(bat.bytes)),
			Value:    Figure{V: mbps(bat.bytes, bat.best), Unit: "MB/s", Extra: bat.cpuShare},
			BaseName: "pread .log",
			Baseline: base,
			Note:     "the same engine.Reader, its verified batches not decoded into records (what a broker serving fetches needs): the rest of the row above is decoding",
		}
		batches.ratio()
		rows = append(rows, batches)
	}
	return rows, nil
}
