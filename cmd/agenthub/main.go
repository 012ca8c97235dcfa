// Command agenthub is the self-hostable control plane for agentd: it holds
// the tunnels machines open, pairs machines to orgs and routes the agent's
// calls. See `agenthub --help`.
package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := newRootCmd().ExecuteContext(ctx)
	stop()
	if err != nil {
		var ue usageError
		if errors.As(err, &ue) {
			fmt.Fprintf(os.Stderr, "agenthub: %v\nRun 'agenthub --help' for usage.\n", err)
			os.Exit(2)
		}
		fmt.Fprintf(os.Stderr, "agenthub: %v\n", err)
		os.Exit(1)
	}
}
