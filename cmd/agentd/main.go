// Command agentd is the daemon that gives an AI agent a place where its
// files live and its commands run. See `agentd --help`.
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
		var se statusError
		if errors.As(err, &se) {
			os.Exit(se.code)
		}
		var ue usageError
		if errors.As(err, &ue) {
			fmt.Fprintf(os.Stderr, "agentd: %v\nRun 'agentd --help' for usage.\n", err)
			os.Exit(2)
		}
		fmt.Fprintf(os.Stderr, "agentd: %v\n", err)
		os.Exit(1)
	}
}
