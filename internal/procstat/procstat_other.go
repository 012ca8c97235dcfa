//go:build !linux

package procstat

// Each calls nothing: this system has no /proc.
func Each(func(Sample)) {}
