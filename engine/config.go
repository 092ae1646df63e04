package engine

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"

	"github.com/topicfs/topicfs/engine/record"
)

// Config holds a topic's settings under Kafka's names and defaults
// (README.md, Configuration), plus topicfs's append and view settings. The zero
// value is not useful; start from DefaultConfig. A Config is a plain value:
// copy it freely; Set mutates only the receiver.
type Config struct {
	SegmentBytes             int64   // segment.bytes
	SegmentMs                int64   // segment.ms
	SegmentJitterMs          int64   // segment.jitter.ms
	SegmentIndexBytes        int64   // segment.index.bytes
	IndexIntervalBytes       int64   // index.interval.bytes
	RetentionMs              int64   // retention.ms (-1 = forever)
	RetentionBytes           int64   // retention.bytes (-1 = no limit)
	RetentionCheckIntervalMs int64   // retention.check.interval.ms
	CleanupPolicy            string  // cleanup.policy: delete, compact, compact,delete
	MinCleanableDirtyRatio   float64 // min.cleanable.dirty.ratio
	DeleteRetentionMs        int64   // delete.retention.ms
	MinCompactionLagMs       int64   // min.compaction.lag.ms
	MaxCompactionLagMs       int64   // max.compaction.lag.ms
	FileDeleteDelayMs        int64   // file.delete.delay.ms
	FlushMessages            int64   // flush.messages
	FlushMs                  int64   // flush.ms
	CompressionType          string  // compression.type: producer, uncompressed, none, gzip, snappy, lz4, zstd
	MaxMessageBytes          int64   // max.message.bytes
	MessageTimestampType     string  // message.timestamp.type: CreateTime, LogAppendTime
	NumPartitions            int64   // num.partitions
	CleanerThreads           int64   // log.cleaner.threads (mount-wide)
	CleanerDedupeBufferSize  int64   // log.cleaner.dedupe.buffer.size (mount-wide)
	CleanerLoadFactor        float64 // log.cleaner.io.buffer.load.factor (mount-wide)
	IndexMappedMaxSegments   int64   // log.index.mapped.max.segments (mount-wide)
	BatchSize                int64   // batch.size: append batching, bytes
	LingerMs                 int64   // linger.ms: append batching delay
	ParseKey                 bool    // parse.key: appended lines are key<separator>value
	KeySeparator             string  // key.separator
	NullMarker               string  // null.marker: prints (and parses) a null value
	PrintKey                 bool    // print.key: views print key<separator>value
	CursorStart              string  // cursor.start: where a new cursor starts, earliest or latest
	KeyIndexMemoryBytes      int64   // key.index.memory.bytes (mount-wide): heap of the by-key/ indexes
}

// DefaultConfig returns Kafka's defaults plus topicfs's.
func DefaultConfig() Config {
	return Config{
		SegmentBytes:             1073741824,
		SegmentMs:                604800000,
		SegmentJitterMs:          0,
		SegmentIndexBytes:        10485760,
		IndexIntervalBytes:       4096,
		RetentionMs:              604800000,
		RetentionBytes:           -1,
		RetentionCheckIntervalMs: 300000,
		CleanupPolicy:            "delete",
		MinCleanableDirtyRatio:   0.5,
		DeleteRetentionMs:        86400000,
		MinCompactionLagMs:       0,
		MaxCompactionLagMs:       math.MaxInt64,
		FileDeleteDelayMs:        60000,
		FlushMessages:            math.MaxInt64,
		FlushMs:                  math.MaxInt64,
		CompressionType:          "producer",
		MaxMessageBytes:          1048588,
		MessageTimestampType:     "CreateTime",
		NumPartitions:            1,
		CleanerThreads:           1,
		CleanerDedupeBufferSize:  134217728,
		CleanerLoadFactor:        0.9,
		IndexMappedMaxSegments:   1024,
		BatchSize:                16384,
		LingerMs:                 5,
		ParseKey:                 false,
		KeySeparator:             "\t",
		NullMarker:               "",
		PrintKey:                 false,
		CursorStart:              "earliest",
		KeyIndexMemoryBytes:      64 << 20,
	}
}

// setting describes one name: its field and the values it accepts.
type setting struct {
	name string
	// exactly one of these is set
	i64 func(c *Config) *int64
	f64 func(c *Config) *float64
	b   func(c *Config) *bool
	str func(c *Config) *string
	// ranges for ints (inclusive), as Kafka's LogConfig validators say
	min, max int64
	// range for floats: [fmin, fmax], or (fmin, fmax] with fminOpen
	fmin, fmax float64
	fminOpen   bool
	// str: canonicalises and validates a value
	check func(v string) (string, error)
	// mountWide: one value for the whole mount (mount.toml's top level),
	// not a per-topic setting
	mountWide bool
}

// mountWide marks s as a setting of the whole mount.
func mountWide(s setting) setting {
	s.mountWide = true
	return s
}

func intSetting(name string, field func(c *Config) *int64, min, max int64) setting {
	return setting{name: name, i64: field, min: min, max: max}
}

const maxInt32 = math.MaxInt32

// Ranges beyond Kafka's own validators, so that no accepted value can take
// the mount down (each is in README.md's config table):
const (
	// MaxDurationMs is the largest duration in milliseconds that Go's
	// time.Duration holds (about 292 years). Durations the engine adds to
	// the clock or converts to a time.Duration (delete.retention.ms,
	// file.delete.delay.ms, linger.ms) stop there; durations only ever
	// compared with an age keep Kafka's Long.MAX_VALUE (= never).
	MaxDurationMs = math.MaxInt64 / int64(1e6)
	// MaxPartitions bounds num.partitions: mkdir creates every partition at
	// once, each a directory with open segment files.
	MaxPartitions = 10000
	// MaxCleanerThreads bounds log.cleaner.threads. Each thread owns an
	// offset map; more threads than CPUs only share them.
	MaxCleanerThreads = 32
	// MaxDedupeBytesPerThread is Kafka's per-thread limit of the cleaner's
	// offset map (an int-sized buffer): 2 GiB - 1.
	MaxDedupeBytesPerThread = math.MaxInt32
	// MinDedupeBufferSize is the smallest log.cleaner.dedupe.buffer.size: an
	// offset map that holds some tens of thousands of keys.
	MinDedupeBufferSize = 1 << 20
	// MaxDedupeBufferSize is MaxCleanerThreads threads at the per-thread
	// limit; CheckCleanerMemory bounds the buffer further by the machine.
	MaxDedupeBufferSize = MaxCleanerThreads * MaxDedupeBytesPerThread
	// OffsetMapEntryBytes is what one key takes of
	// log.cleaner.dedupe.buffer.size: a 16-byte key hash and an 8-byte
	// offset, as in Kafka's SkimpyOffsetMap (MD5), so a buffer holds as
	// many keys as a broker's. The map adds a one-byte probe tag per entry
	// on top (policies.OffsetMap; DedupeMemory).
	OffsetMapEntryBytes = 24
	// MaxIndexMappedSegments bounds log.index.mapped.max.segments: each
	// sealed segment with open indexes takes two mappings, and Linux's
	// default vm.max_map_count is 65530 for the whole process.
	MaxIndexMappedSegments = 16384
	// MaxBatchSize bounds batch.size: every open append file may buffer
	// that much per partition before it appends.
	MaxBatchSize = 64 << 20
)

// settings is the table of every setting, in ConfigNames order.
var settings = []setting{
	intSetting("segment.bytes", func(c *Config) *int64 { return &c.SegmentBytes }, 14, maxInt32),
	intSetting("segment.ms", func(c *Config) *int64 { return &c.SegmentMs }, 1, math.MaxInt64),
	intSetting("segment.jitter.ms", func(c *Config) *int64 { return &c.SegmentJitterMs }, 0, math.MaxInt64),
	// segment.index.bytes: Kafka accepts 4, but an index file must hold at
	// least one entry; 12 is one .timeindex entry (docs/NOTES.md "Choices").
	intSetting("segment.index.bytes", func(c *Config) *int64 { return &c.SegmentIndexBytes }, 12, maxInt32),
	intSetting("index.interval.bytes", func(c *Config) *int64 { return &c.IndexIntervalBytes }, 0, maxInt32),
	intSetting("retention.ms", func(c *Config) *int64 { return &c.RetentionMs }, -1, math.MaxInt64),
	intSetting("retention.bytes", func(c *Config) *int64 { return &c.RetentionBytes }, math.MinInt64, math.MaxInt64),
	intSetting("retention.check.interval.ms", func(c *Config) *int64 { return &c.RetentionCheckIntervalMs }, 1, math.MaxInt64),
	{name: "cleanup.policy", str: func(c *Config) *string { return &c.CleanupPolicy }, check: checkCleanupPolicy},
	{name: "min.cleanable.dirty.ratio", f64: func(c *Config) *float64 { return &c.MinCleanableDirtyRatio }, fmin: 0, fmax: 1},
	intSetting("delete.retention.ms", func(c *Config) *int64 { return &c.DeleteRetentionMs }, 0, MaxDurationMs),
	intSetting("min.compaction.lag.ms", func(c *Config) *int64 { return &c.MinCompactionLagMs }, 0, math.MaxInt64),
	intSetting("max.compaction.lag.ms", func(c *Config) *int64 { return &c.MaxCompactionLagMs }, 1, math.MaxInt64),
	intSetting("file.delete.delay.ms", func(c *Config) *int64 { return &c.FileDeleteDelayMs }, 0, MaxDurationMs),
	intSetting("flush.messages", func(c *Config) *int64 { return &c.FlushMessages }, 1, math.MaxInt64),
	intSetting("flush.ms", func(c *Config) *int64 { return &c.FlushMs }, 0, math.MaxInt64),
	{name: "compression.type", str: func(c *Config) *string { return &c.CompressionType },
		check: oneOf("producer", "uncompressed", "none", "gzip", "snappy", "lz4", "zstd")},
	intSetting("max.message.bytes", func(c *Config) *int64 { return &c.MaxMessageBytes }, 0, maxInt32),
	{name: "message.timestamp.type", str: func(c *Config) *string { return &c.MessageTimestampType },
		check: oneOf("CreateTime", "LogAppendTime")},
	intSetting("num.partitions", func(c *Config) *int64 { return &c.NumPartitions }, 1, MaxPartitions),
	mountWide(intSetting("log.cleaner.threads", func(c *Config) *int64 { return &c.CleanerThreads }, 0, MaxCleanerThreads)),
	mountWide(intSetting("log.cleaner.dedupe.buffer.size", func(c *Config) *int64 { return &c.CleanerDedupeBufferSize }, MinDedupeBufferSize, MaxDedupeBufferSize)),
	// The share of the offset map's slots a cleaning fills. Kafka has no
	// validator; 0 would map no key at all, and above 1 a full map has no
	// empty slot to end a probe.
	{name: "log.cleaner.io.buffer.load.factor", f64: func(c *Config) *float64 { return &c.CleanerLoadFactor }, fmin: 0, fmax: 1, fminOpen: true, mountWide: true},
	mountWide(intSetting("log.index.mapped.max.segments", func(c *Config) *int64 { return &c.IndexMappedMaxSegments }, 1, MaxIndexMappedSegments)),
	intSetting("batch.size", func(c *Config) *int64 { return &c.BatchSize }, 0, MaxBatchSize),
	intSetting("linger.ms", func(c *Config) *int64 { return &c.LingerMs }, 0, MaxDurationMs),
	{name: "parse.key", b: func(c *Config) *bool { return &c.ParseKey }},
	{name: "key.separator", str: func(c *Config) *string { return &c.KeySeparator }, check: checkSeparator},
	{name: "null.marker", str: func(c *Config) *string { return &c.NullMarker }, check: checkOneLine},
	{name: "print.key", b: func(c *Config) *bool { return &c.PrintKey }},
	{name: "cursor.start", str: func(c *Config) *string { return &c.CursorStart }, check: oneOf("earliest", "latest")},
	// One table of 1,024 slots at least; above the top, tables spill to
	// files anyway, so a larger heap would only hold the machine's memory.
	mountWide(intSetting("key.index.memory.bytes", func(c *Config) *int64 { return &c.KeyIndexMemoryBytes }, 16384, MaxKeyIndexMemory)),
}

// MaxKeyIndexMemory bounds key.index.memory.bytes (64 GiB).
const MaxKeyIndexMemory = 64 << 30

// SettingRange returns the values a numeric setting accepts, as text
// ("14 to 2147483647"; "0 to 1" for the ratio), or false for a setting
// that is not numeric or not known.
func SettingRange(name string) (string, bool) {
	s, ok := findSetting(name)
	switch {
	case !ok:
		return "", false
	case s.i64 != nil:
		return fmt.Sprintf("%d to %d", s.min, s.max), true
	case s.f64 != nil && s.fminOpen:
		return fmt.Sprintf("%g (excluded) to %g", s.fmin, s.fmax), true
	case s.f64 != nil:
		return fmt.Sprintf("%g to %g", s.fmin, s.fmax), true
	}
	return "", false
}

// CheckCleanerMemory checks the mount-wide cleaner settings against each
// other and the machine: each thread's share of
// log.cleaner.dedupe.buffer.size (the buffer divided by
// log.cleaner.threads; 0 threads run no cleaner and allocate nothing) must stay
// within Kafka's 2 GiB - 1 per thread, and the memory the offset maps take
// (DedupeMemory) within half of memTotal, the machine's physical memory in
// bytes (0 = unknown: not checked). Errors wrap ErrInvalidConfig.
func (c Config) CheckCleanerMemory(memTotal uint64) error {
	if c.CleanerThreads == 0 {
		return nil // no cleaner (as in Kafka): no offset map is allocated
	}
	threads := c.CleanerThreads
	if per := c.CleanerDedupeBufferSize / threads; per > MaxDedupeBytesPerThread {
		return fmt.Errorf("%w: log.cleaner.dedupe.buffer.size=%d over log.cleaner.threads=%d gives each cleaner thread %d bytes; the most is %d (2 GiB - 1, as in Kafka): lower the buffer or add threads",
			ErrInvalidConfig, c.CleanerDedupeBufferSize, threads, per, int64(MaxDedupeBytesPerThread))
	}
	if half := memTotal / 2; memTotal > 0 && uint64(c.DedupeMemory()) > half {
		return fmt.Errorf("%w: log.cleaner.dedupe.buffer.size=%d takes %d bytes with the offset map's probe tags, more than half of this machine's %d bytes of memory (at most %d)",
			ErrInvalidConfig, c.CleanerDedupeBufferSize, c.DedupeMemory(), memTotal, half)
	}
	return nil
}

// DedupeMemory is the memory the cleaner's offset maps take in all: the
// log.cleaner.dedupe.buffer.size split among the threads into entries of
// OffsetMapEntryBytes, plus one probe tag byte per entry; 0 without
// cleaner threads.
func (c Config) DedupeMemory() int64 {
	if c.CleanerThreads <= 0 {
		return 0
	}
	per := c.CleanerDedupeBufferSize / c.CleanerThreads
	return c.CleanerThreads * (per / OffsetMapEntryBytes) * (OffsetMapEntryBytes + 1)
}

func findSetting(name string) (*setting, bool) {
	for i := range settings {
		if settings[i].name == name {
			return &settings[i], true
		}
	}
	return nil, false
}

func oneOf(allowed ...string) func(string) (string, error) {
	return func(v string) (string, error) {
		v = strings.TrimSpace(v)
		for _, a := range allowed {
			if strings.EqualFold(v, a) {
				return a, nil
			}
		}
		return "", fmt.Errorf("must be one of %s", strings.Join(allowed, ", "))
	}
}

// checkCleanupPolicy accepts a comma list of delete and compact (each once,
// at least one), canonicalised without spaces in the order given.
func checkCleanupPolicy(v string) (string, error) {
	var parts []string
	for _, p := range strings.Split(v, ",") {
		p = strings.ToLower(strings.TrimSpace(p))
		if p != "delete" && p != "compact" {
			return "", errors.New("must be delete, compact, or compact,delete")
		}
		if slices.Contains(parts, p) {
			return "", fmt.Errorf("lists %s twice", p)
		}
		parts = append(parts, p)
	}
	return strings.Join(parts, ","), nil
}

func checkOneLine(v string) (string, error) {
	if strings.ContainsAny(v, "\n\r") {
		return "", errors.New("must not contain a line break")
	}
	return v, nil
}

func checkSeparator(v string) (string, error) {
	if v == "" {
		return "", errors.New("must not be empty")
	}
	return checkOneLine(v)
}

// ConfigNames returns every setting name, in the order of ARCHITECTURE.md's table.
func ConfigNames() []string {
	names := make([]string, len(settings))
	for i, s := range settings {
		names[i] = s.name
	}
	return names
}

// IsTopicSetting reports whether name is a known per-topic setting, not
// one of the mount-wide ones (the log.cleaner.* settings,
// log.index.mapped.max.segments, key.index.memory.bytes).
func IsTopicSetting(name string) bool {
	s, ok := findSetting(name)
	return ok && !s.mountWide
}

// Get returns the value of name as Set accepts it.
func (c Config) Get(name string) (string, error) {
	s, ok := findSetting(name)
	if !ok {
		return "", fmt.Errorf("%w: unknown setting %q", ErrInvalidConfig, name)
	}
	switch {
	case s.i64 != nil:
		return strconv.FormatInt(*s.i64(&c), 10), nil
	case s.f64 != nil:
		return strconv.FormatFloat(*s.f64(&c), 'g', -1, 64), nil
	case s.b != nil:
		return strconv.FormatBool(*s.b(&c)), nil
	default:
		return *s.str(&c), nil
	}
}

// Set validates value and stores it under name. Errors wrap ErrInvalidConfig
// and name the setting, the value and the rule it breaks; c is unchanged on
// error. Numbers and enums may carry surrounding spaces; key.separator and
// null.marker are taken literally.
func (c *Config) Set(name, value string) error {
	s, ok := findSetting(name)
	if !ok {
		return fmt.Errorf("%w: unknown setting %q", ErrInvalidConfig, name)
	}
	bad := func(why string) error {
		return fmt.Errorf("%w: %s=%q: %s", ErrInvalidConfig, name, value, why)
	}
	switch {
	case s.i64 != nil:
		v, err := strconv.ParseInt(strings.TrimSpace(value), 10, 64)
		if err != nil {
			return bad("not an integer")
		}
		if v < s.min {
			return bad(fmt.Sprintf("must be at least %d", s.min))
		}
		if v > s.max {
			return bad(fmt.Sprintf("must be at most %d", s.max))
		}
		*s.i64(c) = v
	case s.f64 != nil:
		v, err := strconv.ParseFloat(strings.TrimSpace(value), 64)
		if err != nil {
			return bad("not a number")
		}
		if !(v >= s.fmin && v <= s.fmax) { // also rejects NaN
			return bad(fmt.Sprintf("must be between %g and %g", s.fmin, s.fmax))
		}
		if s.fminOpen && v == s.fmin {
			return bad(fmt.Sprintf("must be above %g", s.fmin))
		}
		if v == 0 {
			v = 0 // -0 reads back as 0
		}
		*s.f64(c) = v
	case s.b != nil:
		switch strings.ToLower(strings.TrimSpace(value)) {
		case "true":
			*s.b(c) = true
		case "false":
			*s.b(c) = false
		default:
			return bad("must be true or false")
		}
	default:
		v, err := s.check(value)
		if err != nil {
			return bad(err.Error())
		}
		*s.str(c) = v
	}
	return nil
}

// Apply returns c with every name=value of kv set, or c unchanged and an
// error listing every invalid entry (all or nothing).
func (c Config) Apply(kv map[string]string) (Config, error) {
	names := make([]string, 0, len(kv))
	for k := range kv {
		names = append(names, k)
	}
	slices.Sort(names)
	out := c
	var errs []error
	for _, k := range names {
		if err := out.Set(k, kv[k]); err != nil {
			errs = append(errs, err)
		}
	}
	if len(errs) > 0 {
		return c, errors.Join(errs...)
	}
	return out, nil
}

// String returns "name=value\n" lines for every setting, in ConfigNames order.
func (c Config) String() string {
	var b strings.Builder
	for _, s := range settings {
		v, _ := c.Get(s.name)
		b.WriteString(s.name)
		b.WriteByte('=')
		b.WriteString(v)
		b.WriteByte('\n')
	}
	return b.String()
}

// Codec returns the codec mount appends are compressed with:
// compression.type producer, uncompressed and none mean record.None.
func (c Config) Codec() record.Codec {
	switch strings.ToLower(c.CompressionType) {
	case "producer", "uncompressed", "none", "":
		return record.None
	}
	codec, err := record.ParseCodec(c.CompressionType)
	if err != nil {
		return record.None
	}
	return codec
}

// KeepsProducerCodec reports compression.type=producer: batches appended
// raw (AppendBatch) keep the codec their producer chose.
func (c Config) KeepsProducerCodec() bool { return strings.EqualFold(c.CompressionType, "producer") }

// MaxRecordBytes is the largest batch (and so record) an append may write:
// max.message.bytes, capped by segment.bytes because a batch must fit one
// segment, as a broker refuses a batch above segment.bytes
// (RECORD_BATCH_TOO_LARGE). The engine's appends and the mount's line
// checks both use it.
func (c Config) MaxRecordBytes() int64 { return min(c.MaxMessageBytes, c.SegmentBytes) }

// Compact reports whether cleanup.policy includes compact.
func (c Config) Compact() bool { return policyHas(c.CleanupPolicy, "compact") }

// Delete reports whether cleanup.policy includes delete.
func (c Config) Delete() bool { return policyHas(c.CleanupPolicy, "delete") }

func policyHas(policy, p string) bool {
	for _, x := range strings.Split(policy, ",") {
		if strings.EqualFold(strings.TrimSpace(x), p) {
			return true
		}
	}
	return false
}

// LogAppendTime reports message.timestamp.type=LogAppendTime.
func (c Config) LogAppendTime() bool {
	return strings.EqualFold(c.MessageTimestampType, "LogAppendTime")
}
