package ctl

import (
	"context"
	"fmt"
	"strings"

	"github.com/spf13/cobra"

	hubv1 "github.com/devdepot-ai/agentd/proto/gen/agentd/hub/v1"
)

// sandboxForkCmd is agentctl sandbox fork ID [--count N] [--conversation C].
func (a *app) sandboxForkCmd() *cobra.Command {
	var org string
	var count int
	cmd := &cobra.Command{
		Use:   "fork ID [--count N] [--conversation C] [--org O]",
		Short: "Copy a sandbox into new ones: its /workspace at one instant, its environment and image",
		Long: `Make N new sandboxes (default 1, at most 16) whose /workspace is a copy of
sandbox ID's, taken at one instant: a running source is paused while its
workspace is copied, then resumed; a paused or stopped one stays as it is.
Writes in one copy never show in another, nor in the source. Each fork runs
what its source runs: the same environment, the same image digest (even if the
environment has been updated since), isolation and network. Its processes,
/tmp and HOME are new.

Each fork serves a conversation of its own: with --conversation C, C for one
fork and C-1 … C-N for several; without it, SOURCE-CONVERSATION-fork-XXXXXX.
'agentctl sandbox ls' shows them. A name that has a sandbox already is
refused, and so is a count that would exceed the org's --org-max-sandboxes:
then no fork is made. Needs an admin token (the source is paused).

Prints the new sandbox ids, one per line, and nothing else on stdout.`,
		Example: `  agentctl sandbox fork sb-1a2b3c
  agentctl sandbox fork sb-1a2b3c --count 3 --conversation try   # try-1 try-2 try-3
  for id in $(agentctl sandbox fork sb-1a2b3c --count 2); do agentctl --machine "$id" sh 'make test'; done`,
		Args: func(_ *cobra.Command, args []string) error {
			if len(args) != 1 || strings.TrimSpace(args[0]) == "" {
				return usagef("sandbox fork needs one sandbox id (sb-…); list them with 'agentctl sandbox ls'")
			}
			if count < 1 || count > 16 {
				return usagef("sandbox fork --count %d: want 1 to 16", count)
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			conv := ""
			if cmd.Flags().Changed("conversation") { // not $AGENTD_CONVERSATION: a fork's name is asked for
				conv = a.target.conv
				if conv == "" {
					return usagef("sandbox fork --conversation: an empty name")
				}
			}
			return a.envClient(cmd, func(ctx context.Context, ec hubv1.EnvironmentServiceClient) error {
				resp, err := ec.ForkSandbox(ctx, &hubv1.ForkSandboxRequest{Id: args[0], Org: org, Count: int32(count), Conversation: conv})
				if err != nil {
					return err
				}
				if a.json {
					return a.printJSON(resp)
				}
				for _, id := range resp.GetIds() {
					fmt.Fprintln(a.io.Out, id)
				}
				return nil
			})
		},
	}
	cmd.Flags().IntVar(&count, "count", 1, "how many forks (1 to 16)")
	cmd.Flags().StringVar(&org, "org", "", "org of the sandbox (default: your token's)")
	return cmd
}
