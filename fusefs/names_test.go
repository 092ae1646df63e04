package fusefs

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestParseByOffset(t *testing.T) {
	tests := []struct {
		name   string
		off    int64
		jsonl  bool
		wantOK bool
	}{
		{"0", 0, false, true},
		{"12345", 12345, false, true},
		{"12345.jsonl", 12345, true, true},
		{"007", 7, false, true},
		{"9223372036854775807", 1<<63 - 1, false, true},
		{"9223372036854775808", 0, false, false},
		{"", 0, false, false},
		{".jsonl", 0, false, false},
		{"-1", -1, false, true},
		{"-10.jsonl", -10, true, true},
		{"-9223372036854775807", -(1<<63 - 1), false, true},
		{"-0", 0, false, false},
		{"--1", 0, false, false},
		{"-", 0, false, false},
		{"-.jsonl", 0, false, false},
		{"+1", 0, false, false},
		{"1e3", 0, false, false},
		{"12.json", 0, false, false},
		{"12 ", 0, false, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			off, jsonl, err := parseByOffset(tt.name)
			if !tt.wantOK {
				require.ErrorIs(t, err, errParse)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tt.off, off)
			assert.Equal(t, tt.jsonl, jsonl)
		})
	}
}

func TestParseByTime(t *testing.T) {
	now := time.UnixMilli(1_700_000_000_000)
	tests := []struct {
		name   string
		at     int64 // resolved at now
		jsonl  bool
		wantOK bool
	}{
		{"1700000000000", 1_700_000_000_000, false, true},
		{"0", 0, false, true},
		{"1700000000000.jsonl", 1_700_000_000_000, true, true},
		{"2023-11-14T22:13:20Z", 1_700_000_000_000, false, true},
		{"2023-11-14T22:13:20.5Z", 1_700_000_000_500, false, true},
		{"2023-11-14T23:13:20+01:00", 1_700_000_000_000, false, true},
		{"-15m", 1_700_000_000_000 - 15*60_000, false, true},
		{"-2h.jsonl", 1_700_000_000_000 - 2*3_600_000, true, true},
		{"-7d", 1_700_000_000_000 - 7*86_400_000, false, true},
		{"-30s", 1_700_000_000_000 - 30_000, false, true},
		{"-500ms", 1_700_000_000_000 - 500, false, true},
		{"-1h30m", 1_700_000_000_000 - 90*60_000, false, true},
		{"-1w", 1_700_000_000_000 - 7*86_400_000, false, true},
		{"-", 0, false, false},
		{"-15", 0, false, false},
		{"-m", 0, false, false},
		{"-15x", 0, false, false},
		{"15m", 0, false, false},
		{"yesterday", 0, false, false},
		{"2023-11-14", 0, false, false},
		{"", 0, false, false},
		{"-99999999999999999d", 0, false, false},
		{"9223372036854775807", 1<<63 - 1, false, true},
		{"9223372036854775807.jsonl", 1<<63 - 1, true, true},
		{"9223372036854775808", 0, false, false},
		{"99999999999999999999", 0, false, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			spec, jsonl, err := parseByTime(tt.name)
			if !tt.wantOK {
				require.ErrorIs(t, err, errParse)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tt.at, spec.resolve(now))
			assert.Equal(t, tt.jsonl, jsonl)
		})
	}
}

func FuzzParseByOffset(f *testing.F) {
	for _, s := range []string{"0", "12", "12.jsonl", "-1", "", "99999999999999999999"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, name string) {
		off, jsonl, err := parseByOffset(name)
		if err != nil {
			return
		}
		if off == 0 && name[0] == '-' {
			t.Fatalf("-0 accepted: %q", name)
		}
		canon := formatOffsetName(off, jsonl)
		off2, jsonl2, err := parseByOffset(canon)
		if err != nil || off2 != off || jsonl2 != jsonl {
			t.Fatalf("%q -> %d,%v -> %q -> %d,%v,%v", name, off, jsonl, canon, off2, jsonl2, err)
		}
	})
}

func FuzzParseByTime(f *testing.F) {
	for _, s := range []string{"0", "1700000000000", "-15m", "-2h.jsonl", "-1h30m", "2024-05-01T12:00:00Z", "2024-05-01T12:00:00.123+02:00.jsonl", "-", "x"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, name string) {
		spec, jsonl, err := parseByTime(name)
		if err != nil {
			return
		}
		canon := spec.String()
		if jsonl {
			canon += jsonlSuffix
		}
		spec2, jsonl2, err := parseByTime(canon)
		if err != nil || spec2 != spec || jsonl2 != jsonl {
			t.Fatalf("%q -> %+v -> %q -> %+v,%v", name, spec, canon, spec2, err)
		}
	})
}

func TestParseByTimeBeforeEpochRefused(t *testing.T) {
	_, _, err := parseByTime("0001-01-01T00:00:00Z")
	require.ErrorIs(t, err, errParse)
}

// TestParseByTimeCanonicalRoundTrip: the largest relative times, written
// in ms as String writes them (16 digits), parse back; a 17-digit number is
// refused. FuzzParseByTime found "-1000000000h" (3.6e15 ms) whose
// canonical name did not parse when numbers were held to 15 digits.
func TestParseByTimeCanonicalRoundTrip(t *testing.T) {
	for _, name := range []string{"-1000000000h", "-9007199254740992ms", "-14892w"} {
		spec, _, err := parseByTime(name)
		require.NoError(t, err, name)
		back, _, err := parseByTime(spec.String())
		require.NoError(t, err, "%s -> %s", name, spec)
		assert.Equal(t, spec, back)
	}
	_, _, err := parseByTime("-9007199254740993ms")
	require.ErrorIs(t, err, errParse, "past maxRelMs")
	_, _, err = parseByTime("-10000000000000000ms")
	require.ErrorIs(t, err, errParse, "17 digits")
}
