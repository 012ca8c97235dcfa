package ctl

import (
	"context"
	"fmt"
	"io"
	"os"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	"golang.org/x/term"

	"github.com/devdepot-ai/agentd/internal/units"
	hubv1 "github.com/devdepot-ai/agentd/proto/gen/agentd/hub/v1"
)

// clearScreen moves the cursor home and clears the terminal (ANSI).
const clearScreen = "\x1b[H\x1b[2J"

func (a *app) topCmd() *cobra.Command {
	var org string
	var once bool
	interval := 5 * time.Second
	cmd := &cobra.Command{
		Use:   "top [--once] [--interval D] [--org O]",
		Short: "Show what the org's sandboxes and machines use, live: CPU, memory, processes, network, workspace, load",
		Long: `Show what each of the org's running and paused sandboxes uses, as its
container engine reports it, redrawn every --interval (5s) like docker stats:
CPU in percent of one core (since the hub's previous sample of the sandbox;
the first answer waits a second for a second sample), memory and processes
with their limits, bytes received and sent over the network, and what its
/workspace held when last measured ("-": not yet). Stopped sandboxes use
nothing and are left out; so are sandboxes another hub replica drives.

Below, one row per online machine of the org: what the commands its agentd
started use (each command's whole process group: how many run, CPU since
the hub's previous sample, resident memory, processes), the host's 1-minute
load against its CPUs, and its available and total memory. A machine that
does not answer within 3 s says so; offline machines are left out.

On a terminal the table is redrawn in place; otherwise each sample is printed
below the last. --once prints one sample and exits; --json prints one JSON
document per sample. Ctrl-C (SIGINT) or SIGTERM stops (exit 130 or 143).`,
		Example: `  agentctl top
  agentctl top --once
  agentctl top --interval 2s
  agentctl top --once --json | jq -r '.sandboxes[] | select((.memory_bytes | tonumber) > 1e9) | .id'`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if interval < time.Second || interval > time.Hour {
				return usagef("--interval %s: want 1s to 1h", interval)
			}
			clear := false
			if f, ok := a.io.Out.(*os.File); ok && !a.json && !once && term.IsTerminal(int(f.Fd())) {
				clear = true
			}
			return a.envClient(cmd, func(ctx context.Context, ec hubv1.EnvironmentServiceClient) error {
				for {
					resp, err := ec.SandboxStats(ctx, &hubv1.SandboxStatsRequest{Org: org})
					if err != nil {
						if a.interrupted() {
							return nil
						}
						return err
					}
					if err := a.printTop(resp, clear); err != nil {
						return err
					}
					if once {
						return nil
					}
					select {
					case <-time.After(interval):
					case <-ctx.Done():
						if a.interrupted() {
							return nil
						}
						return ctx.Err()
					}
				}
			})
		},
	}
	cmd.Flags().BoolVar(&once, "once", false, "print one sample and exit")
	cmd.Flags().DurationVar(&interval, "interval", interval, "time between samples (1s to 1h)")
	cmd.Flags().StringVar(&org, "org", "", "org (default: your token's)")
	return cmd
}

// printTop prints one sample: JSON, or the table (after clearing the
// terminal when clear).
func (a *app) printTop(resp *hubv1.SandboxStatsResponse, clear bool) error {
	if a.json {
		return a.printJSON(resp)
	}
	if clear {
		if _, err := io.WriteString(a.io.Out, clearScreen); err != nil {
			return err
		}
	}
	tw := tabwriter.NewWriter(a.io.Out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tENV\tCONVERSATION\tSTATE\tCPU %\tMEM / LIMIT\tMEM %\tPIDS\tNET RX / TX\tWORKSPACE")
	for _, s := range resp.GetSandboxes() {
		conv := s.GetConversation()
		if conv == "" {
			conv = "(pool)"
		}
		memPct, pids := "-", fmt.Sprint(s.GetPids())
		if s.GetMemoryLimit() > 0 {
			memPct = fmt.Sprintf("%.1f%%", float64(s.GetMemoryBytes())/float64(s.GetMemoryLimit())*100)
		}
		if s.GetPidsLimit() > 0 {
			pids += fmt.Sprintf(" / %d", s.GetPidsLimit())
		}
		ws := "-"
		if s.GetWorkspaceBytes() >= 0 {
			ws = units.Bytes(s.GetWorkspaceBytes())
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%.1f%%\t%s / %s\t%s\t%s\t%s / %s\t%s\n",
			s.GetId(), s.GetEnvironment(), conv, s.GetState(), s.GetCpuPercent(),
			units.Bytes(s.GetMemoryBytes()), limitBytes(s.GetMemoryLimit()), memPct, pids,
			units.Bytes(s.GetNetRxBytes()), units.Bytes(s.GetNetTxBytes()), ws)
	}
	if len(resp.GetSandboxes()) == 0 {
		fmt.Fprintln(tw, "(no running or paused sandboxes)")
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if len(resp.GetMachines()) == 0 {
		return nil
	}
	fmt.Fprintln(a.io.Out)
	tw = tabwriter.NewWriter(a.io.Out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "MACHINE\tNAME\tCOMMANDS\tCPU %\tMEM\tPROCS\tLOAD / CPUS\tHOST MEM AVAIL / TOTAL")
	for _, m := range resp.GetMachines() {
		if m.GetError() != "" {
			fmt.Fprintf(tw, "%s\t%s\tno answer: %s\n", m.GetId(), m.GetName(), m.GetError())
			continue
		}
		host := "-"
		if m.GetMemoryTotalBytes() > 0 {
			host = units.Bytes(m.GetMemoryAvailableBytes()) + " / " + units.Bytes(m.GetMemoryTotalBytes())
		}
		fmt.Fprintf(tw, "%s\t%s\t%d\t%.1f%%\t%s\t%d\t%.2f / %d\t%s\n", m.GetId(), m.GetName(), m.GetCommands(), m.GetCpuPercent(),
			units.Bytes(m.GetMemoryBytes()), m.GetProcesses(), m.GetLoad1(), m.GetCpus(), host)
	}
	return tw.Flush()
}

// limitBytes is a limit in bytes, "-" for none.
func limitBytes(n int64) string {
	if n <= 0 {
		return "-"
	}
	return units.Bytes(n)
}
