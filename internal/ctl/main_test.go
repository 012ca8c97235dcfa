package ctl

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the package's tests if a goroutine outlives them: every
// one the code starts must end when its owner is closed.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}
