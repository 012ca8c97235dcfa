package ctl

import (
	"context"
	"fmt"
	"strings"

	"github.com/spf13/cobra"

	"github.com/devdepot-ai/agentd/internal/allowlist"
	hubv1 "github.com/devdepot-ai/agentd/proto/gen/agentd/hub/v1"
)

// sandboxEgressCmd is agentctl sandbox allow ID HOST… (allow) or sandbox
// deny ID HOST… (!allow): a running sandbox's allow list, changed as one
// new generation.
func (a *app) sandboxEgressCmd(allow bool) *cobra.Command {
	var org string
	var cut bool
	name, short, long := "allow", "Add destinations to a running sandbox's allow list",
		`Add destinations to the allow list of a running sandbox (one made with an
allow list: an agent run, or an environment with 'env set --allow'). Each
DEST is HOST, HOST:PORT or *.DOMAIN[:PORT]; the port defaults to 443. Those
already on the list are left as they are.`
	if !allow {
		name, short, long = "deny", "Remove destinations from a running sandbox's allow list",
			`Remove destinations from the allow list of a running sandbox. HOST removes
every entry of that host whatever its port; HOST:PORT only that one. A DEST
that is on no entry is an error and nothing changes (with --cut it is not:
the point may be to close what an earlier deny left open).`
	}
	cmd := &cobra.Command{
		Use:   name + " ID DEST... [--cut] [--org O]",
		Short: short,
		Long: long + `

The change is one new generation of the list (1 as the sandbox was made),
stored by the hub: the sandbox's next connections are checked against it
within a second, on whichever hub replica its proxy runs. Connections open
already stay until they end, unless --cut: then those the new list does not
allow are closed. The change is in the org's activity: who, what, and the
new generation. Needs an admin token. A bad DEST changes nothing.

Prints the list and its generation (--json: the whole change). The list of
every sandbox is in 'agentctl sandbox ls --json' (egress).`,
		Example: "  agentctl sandbox " + map[bool]string{true: "allow sb-1a2b3c pypi.org files.pythonhosted.org '*.github.com:443'",
			false: "deny sb-1a2b3c pypi.org --cut"}[allow],
		Args: func(_ *cobra.Command, args []string) error {
			if len(args) < 2 {
				return usagef("sandbox %s needs a sandbox id (sb-…) and one or more destinations (HOST[:PORT]); list sandboxes with 'agentctl sandbox ls'", name)
			}
			if strings.TrimSpace(args[0]) == "" {
				return usagef("sandbox %s: an empty sandbox id", name)
			}
			for _, d := range args[1:] {
				if _, err := allowlist.Parse(d); err != nil {
					return usagef("sandbox %s: %v", name, err)
				}
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			req := &hubv1.ChangeSandboxEgressRequest{Id: args[0], Org: org, Cut: cut}
			if allow {
				req.Allow = args[1:]
			} else {
				req.Deny = args[1:]
			}
			return a.envClient(cmd, func(ctx context.Context, ec hubv1.EnvironmentServiceClient) error {
				resp, err := ec.ChangeSandboxEgress(ctx, req)
				if err != nil {
					return err
				}
				if a.json {
					return a.printJSON(resp)
				}
				e := resp.GetEgress()
				list := strings.Join(e.GetAllow(), ", ")
				if list == "" {
					list = "(empty: nothing allowed)"
				}
				what := "unchanged"
				if len(resp.GetAdded()) > 0 || len(resp.GetRemoved()) > 0 || cut {
					what = "now"
				}
				fmt.Fprintf(a.io.Out, "%s allow list %s, generation %d: %s\n", args[0], what, e.GetGeneration(), list)
				if cut {
					fmt.Fprintf(a.io.Err, "closed %d open connection(s) it no longer allows here; other hub replicas close theirs within a second\n", resp.GetClosed())
				}
				return nil
			})
		},
	}
	cmd.Flags().StringVar(&org, "org", "", "org of the sandbox (default: your token's; another org needs the hub owner's token)")
	cmd.Flags().BoolVar(&cut, "cut", false, "also close open connections the new list does not allow")
	return cmd
}
