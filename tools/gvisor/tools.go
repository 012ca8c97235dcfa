//go:build tools

// Package tools pins the gVisor version that scripts/gvisor-build.sh builds
// (runsc and containerd-shim-runsc-v1, from the same commit); this module is
// separate so the product's go.mod never grows gvisor.dev/gvisor.
package tools

import (
	_ "gvisor.dev/gvisor/pkg/shim/v1/plugin"
	_ "gvisor.dev/gvisor/runsc"
)
