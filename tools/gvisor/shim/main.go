// Command shim is gVisor's containerd shim (containerd-shim-runsc-v1) as
// gVisor's shim/main.go makes it, but answering the start action as
// containerd 1.x reads it: the shim's socket address alone on stdout.
// gVisor's shim is built on containerd 2's shim library, which prints its
// bootstrap parameters as JSON; containerd 1.6 (Debian's, the local
// cluster's) dials that JSON as an address and fails ("dial unix
// {"version":2,...}: connect: invalid argument"). containerd 2 reads a bare
// address too (the older shims' answer), so this works with both.
//
// scripts/gvisor-build.sh builds it against a copy of gVisor's module whose
// shim does not fail when it cannot lower its own OOM score (no
// CAP_SYS_RESOURCE here; see that script).
package main

import (
	"context"
	"fmt"
	"os"

	containerdshim "github.com/containerd/containerd/v2/pkg/shim"
	runscshim "gvisor.dev/gvisor/pkg/shim/v1"
	_ "gvisor.dev/gvisor/pkg/shim/v1/plugin" // registers the runsc task service
)

// bareAddress is gVisor's shim manager whose start prints the address the
// way containerd 1.x reads it, and exits.
type bareAddress struct {
	containerdshim.Manager
}

// Start starts the shim's daemon as gVisor's manager does, then prints its
// address alone and exits: containerd 1.x reads the whole of stdout and
// stderr as the address, so nothing else may follow it.
func (m bareAddress) Start(ctx context.Context, id string, opts containerdshim.StartOpts) (containerdshim.BootstrapParams, error) {
	p, err := m.Manager.Start(ctx, id, opts)
	if err != nil {
		return p, err
	}
	if _, err := fmt.Fprint(os.Stdout, p.Address); err != nil {
		return p, err
	}
	os.Exit(0)
	return p, nil
}

func main() {
	containerdshim.Run(context.Background(), bareAddress{runscshim.NewShimManager("io.containerd.runsc.v1")})
}
