package panics

import (
	"cmp"
	"fmt"
	"log/slog"
	"slices"
	"sync"
)

// Error is a recovered panic: where it happened (the subsystem: "fuse",
// "readahead", "notifier", "append", "policies", ...), in which operation
// ("read", "lookup", "housekeeping", ...) and the value it panicked with
// (Recovered has logged its stack).
type Error struct {
	Where, Op string
	Value     any
}

func (e *Error) Error() string { return fmt.Sprintf("panic in %s %s: %v", e.Where, e.Op, e.Value) }

// Count is how many panics were recovered at one place.
type Count struct {
	Where, Op string
	N         int64
}

var counts struct {
	sync.Mutex
	m map[[2]string]int64
}

// Recovered logs a recovered panic (value v, stack taken at the panic) on
// log (nil: slog.Default) at error level with attrs, then counts it, and returns
// it as an *Error.
func Recovered(log *slog.Logger, where, op string, v any, stack []byte, attrs ...any) *Error {
	e := &Error{Where: where, Op: op, Value: v}
	if log == nil {
		log = slog.Default()
	}
	args := append([]any{"where", where, "op", op, "panic", fmt.Sprint(v)}, attrs...)
	args = append(args, "stack", string(stack))
	log.Error("recovered from a panic; failing only this operation", args...)
	// Counted after the log line is written, so whoever sees the count can
	// also find the line.
	counts.Lock()
	if counts.m == nil {
		counts.m = map[[2]string]int64{}
	}
	counts.m[[2]string{where, op}]++
	counts.Unlock()
	return e
}

// Counts returns the panics recovered so far by place, sorted by where
// and op.
func Counts() []Count {
	counts.Lock()
	out := make([]Count, 0, len(counts.m))
	for k, n := range counts.m {
		out = append(out, Count{Where: k[0], Op: k[1], N: n})
	}
	counts.Unlock()
	slices.SortFunc(out, func(a, b Count) int { return cmp.Or(cmp.Compare(a.Where, b.Where), cmp.Compare(a.Op, b.Op)) })
	return out
}

// CountOf returns how many panics were recovered at where/op.
func CountOf(where, op string) int64 {
	counts.Lock()
	defer counts.Unlock()
	return counts.m[[2]string{where, op}]
}
