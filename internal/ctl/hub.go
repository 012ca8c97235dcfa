package ctl

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/devdepot-ai/agentd/internal/activityproto"
	hubv1 "github.com/devdepot-ai/agentd/proto/gen/agentd/hub/v1"
	agentdv1 "github.com/devdepot-ai/agentd/proto/gen/agentd/v1"
)

// hubCall dials the hub (--hub, without needing --machine) and runs fn.
func (a *app) hubCall(cmd *cobra.Command, fn func(ctx context.Context, c *conn) error) error {
	if a.target.hub == "" {
		return usagef("this command talks to the hub: give --hub URL (or set $AGENTD_HUB) and an API token in $AGENTD_TOKEN")
	}
	saved := a.target.addr
	a.target.addr = ""
	defer func() { a.target.addr = saved }()
	c, err := a.dialHubOnly()
	if err != nil {
		return err
	}
	defer c.Close()
	return fn(c.ctx(cmd.Context()), c)
}

func ago(t time.Time) string {
	if t.IsZero() || t.Unix() <= 0 {
		return "never"
	}
	d := time.Since(t)
	switch {
	case d < time.Minute:
		return "just now"
	case d < time.Hour:
		return fmt.Sprintf("%dm ago", int(d.Minutes()))
	case d < 48*time.Hour:
		return fmt.Sprintf("%dh ago", int(d.Hours()))
	}
	return t.Local().Format(time.DateOnly)
}

func (a *app) machinesCmd() *cobra.Command {
	var org string
	cmd := &cobra.Command{
		Use:   "machines [--org O]",
		Short: "List the org's machines: id, name, status, last seen, os/arch, agentd version",
		Example: `  agentctl --hub https://hub.example.com machines
  agentctl --json machines
  agentctl machines --org acme      # another org: the hub owner's token`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return a.hubCall(cmd, func(ctx context.Context, c *conn) error {
				resp, err := hubv1.NewAdminServiceClient(c).ListMachines(ctx, &hubv1.ListMachinesRequest{Org: org})
				if err != nil {
					return err
				}
				if a.json {
					return a.printJSON(resp)
				}
				tw := tabwriter.NewWriter(a.io.Out, 0, 4, 2, ' ', 0)
				fmt.Fprintln(tw, "ID\tNAME\tSTATUS\tLAST SEEN\tOS/ARCH\tVERSION")
				for _, m := range resp.GetMachines() {
					st := strings.ToLower(strings.TrimPrefix(m.GetStatus().String(), "MACHINE_STATUS_"))
					seen := ago(m.GetLastSeen().AsTime())
					if m.GetStatus() == hubv1.MachineStatus_MACHINE_STATUS_ONLINE {
						seen = "now"
					}
					fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s/%s\t%s\n", m.GetId(), m.GetName(), st, seen, m.GetOs(), m.GetArch(), m.GetAgentdVersion())
				}
				return tw.Flush()
			})
		},
	}
	cmd.Flags().StringVar(&org, "org", "", "org (default: your token's; another org needs the hub owner's token)")
	return cmd
}

func (a *app) activityCmd() *cobra.Command {
	var follow bool
	var tail uint32
	var org string
	cmd := &cobra.Command{
		Use:   "activity [-f] [--machine ID] [--org O]",
		Short: "Show what was done: who asked, what ran, the outcome",
		Long: `Show the activity records: every operation, with who asked and the outcome.
Through the hub (--hub) without --machine: every machine of your org; with
--machine, one machine; --org names another org (the hub owner's token).
Direct to a daemon (--addr): that daemon's records.

Through the hub there are two kinds of record. The hub's own, one per call
it routed: the actor is the caller's token ("alice via agentctl-mcp/1.2"
when the client program names itself), with the command, exit code and
output the hub saw pass. And each machine's account of its own work, shown
as "reported by the daemon (claims: alice)": what the machine says it did,
which the hub stores as reported and does not vouch for.`,
		Example: `  agentctl activity
  agentctl activity -f --machine m-abc123
  agentctl activity --org acme --tail 100
  agentctl --addr unix:///tmp/agentd.sock activity -f`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if a.target.hub == "" || a.target.addr != "" {
				if org != "" {
					return usagef("activity --org is for the hub (--hub): a daemon has no orgs")
				}
				return a.daemonActivity(cmd, follow, tail)
			}
			return a.hubCall(cmd, func(ctx context.Context, c *conn) error {
				st, err := hubv1.NewActivityServiceClient(c).Watch(ctx, &hubv1.WatchRequest{
					MachineId: a.target.machine, Newest: proto.Uint32(tail), NoFollow: !follow, Org: org,
				})
				if err != nil {
					return err
				}
				return printStream(ctx, a, st.Recv, ActivityLine)
			})
		},
	}
	cmd.Flags().BoolVarP(&follow, "follow", "f", false, "keep printing new activity as it happens")
	cmd.Flags().Uint32Var(&tail, "tail", 20, "how many stored records to show first (0: only new ones)")
	cmd.Flags().StringVar(&org, "org", "", "org (default: your token's; another org needs the hub owner's token)")
	return cmd
}

// daemonActivity prints a daemon's own activity (ActivityService.Watch):
// the last `tail` retained records, then, with follow, new ones.
func (a *app) daemonActivity(cmd *cobra.Command, follow bool, tail uint32) error {
	return a.call(cmd, func(ctx context.Context, c *conn) error {
		req := &agentdv1.WatchRequest{NoFollow: !follow, Tail: proto.Uint32(tail)}
		st, err := agentdv1.NewActivityServiceClient(c).Watch(ctx, req)
		if err != nil {
			return err
		}
		return printStream(ctx, a, st.Recv, func(m *agentdv1.WatchResponse) string {
			return activityproto.Record(m.GetRecord()).Line() // as `agentd log` prints it
		})
	})
}

// printStream prints what recv returns until the stream ends (or ctx is
// done: a follow the user interrupted): one JSON document per message with
// --json, else line(m).
func printStream[M proto.Message](ctx context.Context, a *app, recv func() (M, error), line func(M) string) error {
	for {
		m, err := recv()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return err
		}
		if a.json {
			if err := a.printJSON(m); err != nil {
				return err
			}
			continue
		}
		fmt.Fprintln(a.io.Out, line(m))
	}
}

// ActivityLine renders an activity record for a person, with the machine
// it happened on; see activityproto.Line, which it is.
func ActivityLine(m *hubv1.WatchResponse) string { return activityproto.Line(m) }

func (a *app) adminCmd() *cobra.Command {
	admin := &cobra.Command{
		Use:   "admin",
		Short: "Manage the hub: orgs, API tokens, pairing codes, revoking machines",
		Long: `Manage the hub with an admin API token in $AGENTD_TOKEN. An owner token (the
one 'agenthub init' printed, or one made with 'admin token create --owner') can
also create orgs and act in any org: every command here but 'org' takes --org,
as do 'agentctl machines', 'activity', 'env', 'sandbox ls' and 'sandbox rm'.
Ownership is the token's: other admin tokens, in the first org too, manage
their own org only. 'admin token ls' shows which tokens are owners.`,
	}
	org := &cobra.Command{Use: "org", Short: "Create and list orgs"}
	org.AddCommand(&cobra.Command{
		Use: "create NAME", Short: "Create an org (owner tokens only); prints its id", Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return a.hubCall(cmd, func(ctx context.Context, c *conn) error {
				resp, err := hubv1.NewAdminServiceClient(c).CreateOrg(ctx, &hubv1.CreateOrgRequest{Name: args[0]})
				if err != nil {
					return err
				}
				if a.json {
					return a.printJSON(resp)
				}
				fmt.Fprintln(a.io.Out, resp.GetOrg().GetId())
				return nil
			})
		},
	}, &cobra.Command{
		Use: "list", Aliases: []string{"ls"}, Short: "List orgs (an owner token lists them all; any other token, its own)", Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return a.hubCall(cmd, func(ctx context.Context, c *conn) error {
				resp, err := hubv1.NewAdminServiceClient(c).ListOrgs(ctx, &hubv1.ListOrgsRequest{})
				if err != nil {
					return err
				}
				if a.json {
					return a.printJSON(resp)
				}
				for _, o := range resp.GetOrgs() {
					fmt.Fprintf(a.io.Out, "%s\t%s\n", o.GetId(), o.GetName())
				}
				return nil
			})
		},
	})

	token := &cobra.Command{Use: "token", Short: "Create, list and revoke API tokens"}
	var tokOrg, tokRole, tokName string
	var tokOwner bool
	create := &cobra.Command{
		Use:   "create [--org O] [--role admin|member] [--owner] [--name NAME]",
		Short: "Create an API token; prints the secret alone, once",
		Long: `Create an API token and print its secret alone on stdout, once (only its
hash is kept). A member token uses the org's machines, sandboxes and
activity; an admin token also manages tokens, pairing codes, environments
and sandboxes, runs agents, and alone may call a sandbox that holds an agent
run's secrets. --owner makes an owner token (an admin token that also creates
orgs and acts in every org with --org): only an owner token may make one.`,
		Example: `  agentctl admin token create --name chat-backend
  agentctl admin token create --org acme --role admin --name alice
  agentctl admin token create --owner --name second-owner`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			role := hubv1.Role_ROLE_MEMBER
			switch tokRole {
			case "member":
				if tokOwner {
					if cmd.Flags().Changed("role") {
						return usagef("--owner makes an admin token: drop --role member")
					}
					role = hubv1.Role_ROLE_ADMIN
				}
			case "admin":
				role = hubv1.Role_ROLE_ADMIN
			default:
				return usagef("--role %q: want admin or member", tokRole)
			}
			return a.hubCall(cmd, func(ctx context.Context, c *conn) error {
				resp, err := hubv1.NewAdminServiceClient(c).CreateToken(ctx, &hubv1.CreateTokenRequest{Org: tokOrg, Name: tokName, Role: role, Owner: tokOwner})
				if err != nil {
					return err
				}
				if a.json {
					return a.printJSON(resp)
				}
				fmt.Fprintln(a.io.Out, resp.GetSecret())
				return nil
			})
		},
	}
	create.Flags().StringVar(&tokOrg, "org", "", "org (default: your token's)")
	create.Flags().StringVar(&tokRole, "role", "member", "admin or member")
	create.Flags().StringVar(&tokName, "name", "", "who uses it; recorded as the actor in activity")
	create.Flags().BoolVar(&tokOwner, "owner", false, "an owner token: admin, plus creating orgs and acting in any org (needs an owner token)")
	var listOrg string
	list := &cobra.Command{
		Use: "list", Aliases: []string{"ls"}, Short: "List the org's tokens (never their secrets); OWNER marks owner tokens", Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return a.hubCall(cmd, func(ctx context.Context, c *conn) error {
				resp, err := hubv1.NewAdminServiceClient(c).ListTokens(ctx, &hubv1.ListTokensRequest{Org: listOrg})
				if err != nil {
					return err
				}
				if a.json {
					return a.printJSON(resp)
				}
				tw := tabwriter.NewWriter(a.io.Out, 0, 4, 2, ' ', 0)
				fmt.Fprintln(tw, "ID\tNAME\tROLE\tOWNER\tLAST USED\tREVOKED")
				for _, t := range resp.GetTokens() {
					fmt.Fprintf(tw, "%s\t%s\t%s\t%v\t%s\t%v\n", t.GetId(), t.GetName(), strings.ToLower(strings.TrimPrefix(t.GetRole().String(), "ROLE_")), t.GetOwner(), ago(t.GetLastUsed().AsTime()), t.GetRevoked())
				}
				return tw.Flush()
			})
		},
	}
	list.Flags().StringVar(&listOrg, "org", "", "org (default: your token's)")
	var revokeTokOrg string
	revokeTok := &cobra.Command{
		Use: "revoke ID [--org O]", Short: "Revoke a token at once", Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return a.hubCall(cmd, func(ctx context.Context, c *conn) error {
				_, err := hubv1.NewAdminServiceClient(c).RevokeToken(ctx, &hubv1.RevokeTokenRequest{Id: args[0], Org: revokeTokOrg})
				return err
			})
		},
	}
	revokeTok.Flags().StringVar(&revokeTokOrg, "org", "", "org of the token (default: your token's)")
	token.AddCommand(create, list, revokeTok)

	var codeOrg string
	var ttl time.Duration
	code := &cobra.Command{Use: "pair-code", Short: "Create pairing codes"}
	codeCreate := &cobra.Command{
		Use:   "create [--org O] [--ttl 15m]",
		Short: "Create a single-use pairing code; prints it alone",
		Long: `Create a single-use code that pairs one machine into the org. Give it to the
machine's owner, who runs: agentd pair --hub URL --code CODE`,
		Example: `  agentctl admin pair-code create
  agentctl admin pair-code create --org acme --ttl 1h`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if ttl < 0 {
				return usagef("--ttl must be positive")
			}
			req := &hubv1.CreatePairingCodeRequest{Org: codeOrg}
			if ttl > 0 {
				req.Ttl = durationpb.New(ttl)
			}
			return a.hubCall(cmd, func(ctx context.Context, c *conn) error {
				resp, err := hubv1.NewAdminServiceClient(c).CreatePairingCode(ctx, req)
				if err != nil {
					return err
				}
				if a.json {
					return a.printJSON(resp)
				}
				fmt.Fprintln(a.io.Out, resp.GetCode())
				fmt.Fprintf(a.io.Err, "Pairs one machine into org %s until %s:\n  agentd pair --hub %s --code %s\n",
					resp.GetOrg(), resp.GetExpires().AsTime().Local().Format(time.Kitchen), a.target.hub, resp.GetCode())
				return nil
			})
		},
	}
	codeCreate.Flags().StringVar(&codeOrg, "org", "", "org (default: your token's)")
	codeCreate.Flags().DurationVar(&ttl, "ttl", 15*time.Minute, "how long the code is valid (at most 24h)")
	code.AddCommand(codeCreate)

	var revokeOrg string
	revoke := &cobra.Command{
		Use:   "revoke MACHINE [--org O]",
		Short: "Remove a machine from the org; its live tunnel closes at once",
		Example: `  agentctl admin revoke m-1a2b3c4d
  agentctl admin revoke m-1a2b3c4d --org acme   # another org: the hub owner's token`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return a.hubCall(cmd, func(ctx context.Context, c *conn) error {
				_, err := hubv1.NewAdminServiceClient(c).RevokeMachine(ctx, &hubv1.RevokeMachineRequest{Id: args[0], Org: revokeOrg})
				if err == nil && !a.json {
					fmt.Fprintf(a.io.Err, "Revoked %s.\n", args[0])
				}
				return err
			})
		},
	}
	revoke.Flags().StringVar(&revokeOrg, "org", "", "org of the machine (default: your token's)")
	admin.AddCommand(org, token, code, revoke)
	return admin
}
