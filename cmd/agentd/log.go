package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/signal"
	"sync"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/devdepot-ai/agentd/internal/activity"
	"github.com/devdepot-ai/agentd/internal/config"
)

func newLogCmd() *cobra.Command {
	var (
		follow  bool
		asJSON  bool
		dirFlag string
	)
	cmd := &cobra.Command{
		Use:   "log [-f]",
		Short: "Print the local audit log: every operation agentd ran, newest last",
		Long: `Print the audit log agentd keeps of every operation it performs for an agent —
commands run, files written, edited, moved and removed — one line each: time,
sequence number, who asked, what, and the outcome. The log lives in the state
directory (audit.jsonl, rotated) and is readable only by you.`,
		Example: `  agentd log
  agentd log -f            # follow new operations as they happen
  agentd log --json | jq 'select(.kind == "process.exit")'`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			dir := dirFlag
			if dir == "" {
				var err error
				if dir, err = config.StateDir(); err != nil {
					return err
				}
			}
			ctx, caught, stop := stopOnSignal(cmd.Context())
			defer stop()
			out := cmd.OutOrStdout()
			err := activity.Tail(ctx, dir, follow, 0, func(r activity.Record) error {
				if asJSON {
					b, err := json.Marshal(r)
					if err != nil {
						return err
					}
					_, err = fmt.Fprintf(out, "%s\n", b)
					return err
				}
				_, err := fmt.Fprintln(out, r.Line())
				return err
			})
			if s := caught(); s != 0 {
				return statusError{128 + int(s)} // like a shell: 130 for Ctrl-C, 143 for SIGTERM
			}
			return err
		},
	}
	cmd.Flags().BoolVarP(&follow, "follow", "f", false, "keep printing new operations as they happen")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the raw records, one JSON object per line")
	cmd.Flags().StringVar(&dirFlag, "state-dir", "", "state directory (default: $AGENTD_STATE_DIR or ~/.local/state/agentd)")
	return cmd
}

// stopOnSignal returns a context that SIGINT or SIGTERM cancels, a func
// that tells which of them did (0: none), and a stop func that must be
// called. It takes the signals for itself rather than reading them off
// ctx, which main's signal.NotifyContext cancels without saying which
// signal came: 'agentd log -f' exits 128+N, as a shell reports a process
// a signal ended.
func stopOnSignal(parent context.Context) (ctx context.Context, caught func() syscall.Signal, stop func()) {
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	ctx, cancel := context.WithCancel(context.WithoutCancel(parent))
	var (
		mu  sync.Mutex
		got syscall.Signal
	)
	done := make(chan struct{})
	go func() {
		defer close(done)
		select {
		case s := <-sigs:
			mu.Lock()
			got, _ = s.(syscall.Signal)
			mu.Unlock()
			cancel()
		case <-ctx.Done():
		}
	}()
	caught = func() syscall.Signal {
		mu.Lock()
		defer mu.Unlock()
		return got
	}
	return ctx, caught, func() {
		signal.Stop(sigs)
		cancel()
		<-done
	}
}
