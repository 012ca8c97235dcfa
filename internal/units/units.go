// Package units renders quantities for people, and reads them back.
package units

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"
)

// Bytes renders a byte count with a binary unit: "512 B", "1.5 MiB".
func Bytes(n int64) string {
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%d B", n)
	}
	div, exp := int64(unit), 0
	for m := n / unit; m >= unit; m /= unit {
		div *= unit
		exp++
	}
	return fmt.Sprintf("%.1f %ciB", float64(n)/float64(div), "KMGTPE"[exp])
}

// ParseBytes reads a byte count a person wrote: a whole number, optionally
// followed by a binary unit, K, M or G (also KiB, KB, MiB, MB, GiB, GB, any
// case; all mean powers of 1024, as docker's sizes do): "1048576", "64K",
// "1GiB". Negative, fractional and too large values are errors.
func ParseBytes(s string) (int64, error) {
	t := strings.TrimSpace(s)
	i := strings.IndexFunc(t, func(r rune) bool { return r < '0' || r > '9' })
	if i < 0 {
		i = len(t)
	}
	num, unit := t[:i], strings.ToLower(strings.TrimSpace(t[i:]))
	if num == "" {
		return 0, fmt.Errorf("size %q: want a whole number of bytes, optionally with K, M or G (like 64K or 1G)", s)
	}
	shift, ok := map[string]uint{"": 0, "b": 0, "k": 10, "kb": 10, "kib": 10, "m": 20, "mb": 20, "mib": 20, "g": 30, "gb": 30, "gib": 30}[unit]
	if !ok {
		return 0, fmt.Errorf("size %q: unit %q is not one of K, M, G (KiB, MiB, GiB)", s, t[i:])
	}
	n, err := strconv.ParseInt(num, 10, 64)
	if err != nil || n > math.MaxInt64>>shift {
		return 0, fmt.Errorf("size %q: too large", s)
	}
	return n << shift, nil
}

// ParseDuration reads a duration as time.ParseDuration does, and also in
// whole days ("7d", "30d"), which ParseDuration does not take.
func ParseDuration(s string) (time.Duration, error) {
	if n, ok := strings.CutSuffix(s, "d"); ok && n != "" {
		days, err := strconv.ParseUint(n, 10, 16)
		if err != nil {
			return 0, fmt.Errorf("duration %q: want a number of days, like 7d", s)
		}
		return time.Duration(days) * 24 * time.Hour, nil
	}
	d, err := time.ParseDuration(s)
	if err != nil {
		return 0, fmt.Errorf("duration %q: want a number and a unit, like 90s, 5m, 2h or 7d", s)
	}
	return d, nil
}
