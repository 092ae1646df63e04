package fusefs

import (
	"fmt"
	"strconv"
	"strings"
	"time"
)

// jsonlSuffix selects the JSON rendering of a view or append file.
const jsonlSuffix = ".jsonl"

// splitFormat strips a ".jsonl" suffix from a view name.
func splitFormat(name string) (base string, jsonl bool) {
	if b, ok := strings.CutSuffix(name, jsonlSuffix); ok {
		return b, true
	}
	return name, false
}

// parseByOffset parses a by-offset/ entry name: a non-negative decimal
// offset N, or -N (N >= 1) for the last N offsets, optionally followed by
// ".jsonl". Anything else is errParse (ENOENT at lookup).
func parseByOffset(name string) (offset int64, jsonl bool, err error) {
	base, jsonl := splitFormat(name)
	digits, last := strings.CutPrefix(base, "-")
	if digits == "" || len(digits) > 19 {
		return 0, false, fmt.Errorf("%w: by-offset name %q", errParse, name)
	}
	for i := 0; i < len(digits); i++ {
		if digits[i] < '0' || digits[i] > '9' {
			return 0, false, fmt.Errorf("%w: by-offset name %q", errParse, name)
		}
	}
	off, err := strconv.ParseInt(digits, 10, 64)
	if err != nil || (last && off == 0) {
		return 0, false, fmt.Errorf("%w: by-offset name %q", errParse, name)
	}
	if last {
		off = -off
	}
	return off, jsonl, nil
}

// timeSpec is a parsed by-time/ name: an absolute time in epoch milliseconds,
// or a negative duration relative to the time the view is opened.
type timeSpec struct {
	relative bool
	ms       int64 // absolute: epoch ms; relative: the (positive) age in ms
}

// resolve returns the epoch-ms timestamp the spec denotes at now.
func (s timeSpec) resolve(now time.Time) int64 {
	if s.relative {
		return now.UnixMilli() - s.ms
	}
	return s.ms
}

// String is the canonical name of the spec (without ".jsonl"); parseByTime
// accepts it and returns the same spec.
func (s timeSpec) String() string {
	if s.relative {
		return "-" + strconv.FormatInt(s.ms, 10) + "ms"
	}
	return strconv.FormatInt(s.ms, 10)
}

// relUnits are the units a relative by-time name may use, longest first so
// that "ms" is tried before "m".
var relUnits = []struct {
	suffix string
	ms     int64
}{
	{"ms", 1},
	{"s", 1000},
	{"m", 60 * 1000},
	{"h", 60 * 60 * 1000},
	{"d", 24 * 60 * 60 * 1000},
	{"w", 7 * 24 * 60 * 60 * 1000},
}

// maxRelMs bounds relative times to about 290 years so resolve never overflows.
const maxRelMs = int64(1) << 53

// maxRelDigits is the most digits a number of a relative name may have:
// those of maxRelMs, so that every relative time, written in ms as String
// does, parses back (a larger number is refused by the maxRelMs bound), and
// no number overflows ParseInt.
const maxRelDigits = 16 // len("9007199254740992")

// parseByTime parses a by-time/ entry name, optionally followed by ".jsonl":
//
//	1700000000000              epoch milliseconds
//	2024-05-01T12:00:00Z       RFC 3339 (fractional seconds and offsets allowed)
//	-15m, -2h, -7d, -30s, -1h30m, -500ms, -1w   relative to the time of opening
func parseByTime(name string) (timeSpec, bool, error) {
	base, jsonl := splitFormat(name)
	bad := func() (timeSpec, bool, error) {
		return timeSpec{}, false, fmt.Errorf("%w: by-time name %q", errParse, name)
	}
	if base == "" {
		return bad()
	}
	if base[0] == '-' {
		rest := base[1:]
		if rest == "" {
			return bad()
		}
		var total int64
		for rest != "" {
			i := 0
			for i < len(rest) && rest[i] >= '0' && rest[i] <= '9' {
				i++
			}
			if i == 0 || i > maxRelDigits {
				return bad()
			}
			n, _ := strconv.ParseInt(rest[:i], 10, 64)
			rest = rest[i:]
			unit := int64(0)
			for _, u := range relUnits {
				if strings.HasPrefix(rest, u.suffix) {
					unit = u.ms
					rest = rest[len(u.suffix):]
					break
				}
			}
			if unit == 0 || n > maxRelMs/unit {
				return bad()
			}
			total += n * unit
			if total > maxRelMs {
				return bad()
			}
		}
		return timeSpec{relative: true, ms: total}, jsonl, nil
	}
	allDigits := true
	for i := 0; i < len(base); i++ {
		if base[i] < '0' || base[i] > '9' {
			allDigits = false
			break
		}
	}
	if allDigits {
		// Up to 19 digits: every epoch ms to MaxInt64 (a far-future time
		// is an empty view that grows); ParseInt refuses what overflows.
		if len(base) > 19 {
			return bad()
		}
		ms, err := strconv.ParseInt(base, 10, 64)
		if err != nil {
			return bad()
		}
		return timeSpec{ms: ms}, jsonl, nil
	}
	t, err := time.Parse(time.RFC3339Nano, base)
	if err != nil || t.UnixMilli() < 0 {
		return bad()
	}
	return timeSpec{ms: t.UnixMilli()}, jsonl, nil
}

// formatOffsetName is the canonical by-offset/ name of an offset.
func formatOffsetName(off int64, jsonl bool) string {
	s := strconv.FormatInt(off, 10)
	if jsonl {
		s += jsonlSuffix
	}
	return s
}
