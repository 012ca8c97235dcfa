package units

import (
	"strings"
	"testing"
	"time"
)

func TestBytes(t *testing.T) {
	t.Parallel()
	for n, want := range map[int64]string{0: "0 B", 1023: "1023 B", 1024: "1.0 KiB", 1536: "1.5 KiB", 5 << 30: "5.0 GiB"} {
		if got := Bytes(n); got != want {
			t.Errorf("Bytes(%d) = %q, want %q", n, got, want)
		}
	}
}

func TestParseBytes(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		in      string
		want    int64
		wantErr string
	}{
		{in: "0", want: 0},
		{in: "1048576", want: 1 << 20},
		{in: "512B", want: 512},
		{in: "64K", want: 64 << 10},
		{in: "64 KiB", want: 64 << 10},
		{in: "5m", want: 5 << 20},
		{in: "5MB", want: 5 << 20},
		{in: "1G", want: 1 << 30},
		{in: " 1gib ", want: 1 << 30},
		{in: "", wantErr: "want a whole number"},
		{in: "-1", wantErr: "want a whole number"},
		{in: "1.5G", wantErr: `unit ".5G"`},
		{in: "G", wantErr: "want a whole number"},
		{in: "10T", wantErr: `unit "T"`},
		{in: "9223372036854775807", want: 1<<63 - 1},
		{in: "9223372036854775808", wantErr: "too large"},
		{in: "8589934592G", wantErr: "too large"},
	} {
		got, err := ParseBytes(tc.in)
		switch {
		case tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)):
			t.Errorf("ParseBytes(%q) = %d, %v; want an error with %q", tc.in, got, err, tc.wantErr)
		case tc.wantErr == "" && (err != nil || got != tc.want):
			t.Errorf("ParseBytes(%q) = %d, %v; want %d", tc.in, got, err, tc.want)
		}
	}
}

func TestParseDuration(t *testing.T) {
	for in, want := range map[string]time.Duration{"90s": 90 * time.Second, "5m": 5 * time.Minute, "1h30m": 90 * time.Minute, "7d": 7 * 24 * time.Hour} {
		if got, err := ParseDuration(in); err != nil || got != want {
			t.Errorf("ParseDuration(%q) = %v, %v; want %v", in, got, err, want)
		}
	}
	for _, in := range []string{"", "d", "5", "-1d", "1.5d", "soon", "99999999d"} {
		if got, err := ParseDuration(in); err == nil {
			t.Errorf("ParseDuration(%q) = %v, nil; want an error", in, got)
		}
	}
}
