//go:build !unix

package hub_test

import (
	"testing"
	"time"
)

// cpuTime is -1: this platform's process CPU time is not read here.
func cpuTime(testing.TB) time.Duration { return -1 }
