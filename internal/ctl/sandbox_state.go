package ctl

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/spf13/cobra"

	"github.com/devdepot-ai/agentd/internal/allowlist"
	hubv1 "github.com/devdepot-ai/agentd/proto/gen/agentd/hub/v1"
)

// sandboxAction is one of agentctl sandbox
// pause|resume|stop|start|archive|restore.
type sandboxAction struct {
	name, short, long, example string
}

var sandboxActions = []sandboxAction{
	{"pause", "Pause sandboxes: freeze their processes in memory (no CPU)",
		`Pause each sandbox: its processes are frozen where they are (the cgroup
freezer, as docker pause), keeping their memory, using no CPU. A call for it,
or sandbox resume, thaws it. Needs an admin token. A stopped sandbox has
nothing to pause: start it first.`,
		"  agentctl sandbox pause sb-1a2b3c sb-4d5e6f"},
	{"resume", "Resume paused (or stopped, or archived) sandboxes, and wait for their agentd",
		`Bring each sandbox back to running: a paused one is thawed, a stopped one
started again (its /workspace as it was; /tmp, HOME and processes are new),
an archived one restored (as sandbox restore).
Waits until its agentd is back, and prints how long that took. A call for the
sandbox does the same by itself.`,
		"  agentctl sandbox resume sb-1a2b3c"},
	{"stop", "Stop sandboxes: end their processes, keep /workspace",
		`Stop each sandbox: its processes get SIGTERM, then SIGKILL after 5 s; its
container is stopped and its /workspace volume kept. Stopped sandboxes do not
count against --org-max-sandboxes. A call for it, or sandbox start, starts it
again. Needs an admin token.`,
		"  agentctl sandbox stop sb-1a2b3c"},
	{"start", "Start stopped (or paused) sandboxes, and wait for their agentd",
		`Start each stopped sandbox again with its /workspace (as sandbox resume,
which also takes paused ones). Waits until its agentd is back.`,
		"  agentctl sandbox start sb-1a2b3c"},
	{"archive", "Archive sandboxes: pack /workspace into the hub's archive store, remove container and volume",
		`Archive each sandbox: it is stopped (if it runs), its /workspace is packed
into the hub's archive store (agenthub serve --archive-url) as a
content-addressed snapshot, every stored file read back and checked, and only
then are its container and workspace volume removed. The sandbox keeps its id
and its conversation; sandbox ls shows it archived, with the archive's size.
Archived sandboxes cost no CPU, memory or engine disk, and do not count
against --org-max-sandboxes; their archives count against --org-max-archive.
A call for it, or sandbox restore, brings it back. If anything fails, the
sandbox stays stopped with its /workspace volume. The hub archives stopped
sandboxes by itself after --sandbox-archive-after (default 7d; env set
--archive-after). Needs an admin token.`,
		"  agentctl sandbox archive sb-1a2b3c sb-4d5e6f"},
	{"restore", "Restore archived sandboxes: running again with their /workspace",
		`Restore each archived sandbox: a new container of its environment's current
image, its /workspace written back from the archive (every file's sha256
checked before anything runs: a damaged archive fails naming the file, and
the sandbox stays archived), then started. When it is done the sandbox is
running, and the archive is deleted. Waits until its agentd is back. A call
for the sandbox does the same by itself. A sandbox that is not archived is
resumed or started, as sandbox resume does.`,
		"  agentctl sandbox restore sb-1a2b3c"},
}

// sandboxStateCmd is agentctl sandbox ACTION ID…: each id reported on its
// own line ("sb-… paused (was running)"), a failure on stderr for its id,
// the others still done, and exit 1 if any failed.
func (a *app) sandboxStateCmd(act sandboxAction) *cobra.Command {
	var org string
	cmd := &cobra.Command{
		Use:   act.name + " ID... [--org O]",
		Short: act.short,
		Long: act.long + `

Prints one line per sandbox, "ID STATE (was STATE)" (--json: one document per
sandbox). A sandbox that fails is reported on stderr with its id, the others
are still done, and the exit code is 1.`,
		Example: act.example,
		Args: func(_ *cobra.Command, args []string) error {
			if len(args) == 0 {
				return usagef("sandbox %s needs one or more sandbox ids (sb-…); list them with 'agentctl sandbox ls'", act.name)
			}
			for _, id := range args {
				if strings.TrimSpace(id) == "" {
					return usagef("sandbox %s: an empty sandbox id", act.name)
				}
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			return a.envClient(cmd, func(ctx context.Context, ec hubv1.EnvironmentServiceClient) error {
				failed := false
				for _, id := range args {
					resp, err := ec.ChangeSandboxState(ctx, &hubv1.ChangeSandboxStateRequest{Id: id, Org: org, Action: act.name})
					if err != nil {
						if ctx.Err() != nil || len(args) == 1 {
							return err
						}
						failed = true
						fmt.Fprintf(a.io.Err, "agentctl: %s: %s\n", id, describe(err))
						continue
					}
					if a.json {
						if err := a.printJSON(resp); err != nil {
							return err
						}
						continue
					}
					line := fmt.Sprintf("%s %s (was %s", id, resp.GetTo(), resp.GetFrom())
					if resp.GetFrom() != resp.GetTo() && resp.GetTo() == "running" {
						line += fmt.Sprintf("; back in %d ms", resp.GetTookMs())
					}
					fmt.Fprintln(a.io.Out, line+")")
				}
				if failed {
					return &exitError{code: ExitError, err: fmt.Errorf("some sandboxes were not %s", pastTense(act.name))}
				}
				return nil
			})
		},
	}
	cmd.Flags().StringVar(&org, "org", "", "org of the sandboxes (default: your token's; another org needs the hub owner's token)")
	return cmd
}

func pastTense(action string) string {
	switch action {
	case "stop":
		return "stopped"
	case "pause":
		return "paused"
	case "archive", "restore":
		return action + "d"
	}
	return action + "ed"
}

// envSetCmd is agentctl env set NAME with an environment's own settings:
// its isolation and its idle policy.
func (a *app) envSetCmd(org *string) *cobra.Command {
	var pause, stop, arch, del, isolation string
	var allow, allowPrivate []string
	cmd := &cobra.Command{
		Use:   "set NAME [--isolation runc|gvisor] [--pause-after D] [--stop-after D] [--archive-after D] [--delete-after D|never] [--allow HOST[:PORT]]... [--allow-private CIDR|HOST]...",
		Short: "Change an environment's settings (builtin included): isolation, idle policy, allow lists",
		Long: `Change an environment's own settings; builtin is the org's own to set. Flags
not given keep their value. Needs an admin token.

--isolation gvisor runs its sandboxes under gVisor, a user-space kernel
between the agent's code and the host's; runc runs them as containers of the
host's kernel. The environment's sandboxes are removed (their workspaces
with them) and its next call starts one of the new isolation. The hub's
engine needs gVisor registered ('make sandbox-runtime' on the hub's host);
without it the change is refused and nothing changes.

--pause-after, --stop-after, --archive-after and --delete-after set the idle
policy of its sandboxes over the hub's defaults (agenthub serve
--sandbox-pause-after, default 5m; --sandbox-stop-after, 30m;
--sandbox-archive-after, 7d; --sandbox-delete-after, never). Idle this long,
a sandbox is paused (processes frozen in memory), then stopped (container
stopped, /workspace kept), then archived (/workspace packed into the hub's
archive store, container and volume removed; a call restores it), and
removed with its /workspace only when a delete-after says so. Each value is a duration of at least 10s (90s,
5m, 2h, 7d), never, or default (the hub's again). Prints the environment as
env show does.

--allow-private CIDR|ADDRESS|HOST (repeatable, or comma-separated) replaces
the private destinations a custom environment's sandboxes may reach through
the hub's egress proxy, besides the hub's own (agenthub serve
--egress-allow-private); "" clears them. Loopback and the hub's host stay
refused. New connections see the new list; env show shows it. For an
environment on network public, addresses and CIDRs also go into the sandbox
network's kernel rules for each of its running sandboxes (new ones at start,
running ones within one reaper tick); host names only through the proxy.

The policy is set first, so a bad value changes nothing; if the isolation is
then refused, the message says the policy was set. Setting the isolation an
environment has already changes nothing.

--allow sets the allow list of its new sandboxes: they get no network but
the hub's egress proxy, which opens only these destinations (HOST, HOST:PORT
or *.DOMAIN[:PORT]; the port defaults to 443), whatever the environment's
--network; each connection, opened or refused, is in the org's activity.
Repeat the flag or separate entries with commas; the list replaces the one
before. --allow '' removes the list (new sandboxes get the environment's
network again). Its warm sandboxes are replaced; those of conversations keep
the list they have: change it with 'agentctl sandbox allow | deny ID'. A bad
entry changes nothing.`,
		Example: `  agentctl env set builtin --isolation gvisor
  agentctl env set builtin --pause-after 10m --stop-after 2h
  agentctl env set py --archive-after 2d --delete-after 30d
  agentctl env set py --pause-after never --stop-after default
  agentctl env set py --allow pypi.org,files.pythonhosted.org --allow '*.github.com'
  agentctl env set py --allow ''
  agentctl env set py --allow-private 10.20.0.0/16,mirror.internal`,
		Args: envName,
		RunE: func(cmd *cobra.Command, args []string) error {
			req := &hubv1.SetEnvironmentPolicyRequest{Org: *org, Name: args[0]}
			for _, f := range []struct {
				flag string
				val  string
				to   **string
			}{{"pause-after", pause, &req.PauseAfter}, {"stop-after", stop, &req.StopAfter}, {"archive-after", arch, &req.ArchiveAfter}, {"delete-after", del, &req.DeleteAfter}} {
				if cmd.Flags().Changed(f.flag) {
					v := f.val
					*f.to = &v
				}
			}
			policy := req.PauseAfter != nil || req.StopAfter != nil || req.ArchiveAfter != nil || req.DeleteAfter != nil
			iso := cmd.Flags().Changed("isolation")
			setAllow := cmd.Flags().Changed("allow")
			private := cmd.Flags().Changed("allow-private")
			if !policy && !iso && !setAllow && !private {
				return usagef("env set needs a setting to change: --isolation runc|gvisor, --pause-after, --stop-after, --archive-after, --delete-after, --allow or --allow-private")
			}
			allow = slices.DeleteFunc(allow, func(s string) bool { return strings.TrimSpace(s) == "" })
			if _, err := allowlist.ParseList(allow); err != nil {
				return usagef("--allow: %v", err)
			}
			if iso && isolation != "runc" && isolation != "gvisor" {
				return usagef("--isolation %q: want runc or gvisor", isolation)
			}
			return a.envClient(cmd, func(ctx context.Context, ec hubv1.EnvironmentServiceClient) error {
				// The policy first: a bad value is refused before the
				// isolation, whose change replaces the sandboxes.
				var env *hubv1.Environment
				if policy {
					resp, err := ec.SetEnvironmentPolicy(ctx, req)
					if err != nil {
						return err
					}
					env = resp.GetEnvironment()
				}
				if setAllow {
					resp, err := ec.SetEnvironmentAllow(ctx, &hubv1.SetEnvironmentAllowRequest{Org: *org, Name: args[0], Allow: allow})
					if err != nil {
						if policy {
							return fmt.Errorf("the idle policy was set, but the allow list was refused: %w", err)
						}
						return err
					}
					env = resp.GetEnvironment()
				}
				if private {
					var l []string
					for _, s := range allowPrivate {
						if s != "" {
							l = append(l, s)
						}
					}
					resp, err := ec.SetEnvironmentAllowPrivate(ctx, &hubv1.SetEnvironmentAllowPrivateRequest{Org: *org, Name: args[0], AllowPrivate: l})
					if err != nil {
						if policy {
							return fmt.Errorf("the idle policy was set, but --allow-private was refused: %w", err)
						}
						return err
					}
					env = resp.GetEnvironment()
				}
				if iso {
					resp, err := ec.SetEnvironmentIsolation(ctx, &hubv1.SetEnvironmentIsolationRequest{Org: *org, Name: args[0], Isolation: isolation})
					if err != nil {
						if policy {
							return fmt.Errorf("the idle policy (and any allow list) was set, but the isolation was refused: %w", err)
						}
						return err
					}
					env = resp.GetEnvironment()
				}
				if a.json {
					return a.printEnv(env)
				}
				return writeEnv(a.io.Out, env)
			})
		},
	}
	cmd.Flags().StringArrayVar(&allowPrivate, "allow-private", nil, "private destination (CIDR, address or host name) its sandboxes may reach (egress proxy; addresses and CIDRs also in the public network's kernel rules); repeatable or comma-separated; replaces the list (\"\" clears it)")
	cmd.Flags().StringVar(&isolation, "isolation", "", "runc (a container of the host's kernel) or gvisor (gVisor's user-space kernel)")
	cmd.Flags().StringVar(&pause, "pause-after", "", "pause a sandbox idle this long (like 5m), or never, or default")
	cmd.Flags().StringVar(&stop, "stop-after", "", "stop a sandbox idle this long (like 30m; /workspace kept), or never, or default")
	cmd.Flags().StringSliceVar(&allow, "allow", nil, "the allow list of its new sandboxes: HOST[:PORT], *.DOMAIN[:PORT] (repeat, or comma-separated; '' for none)")
	cmd.Flags().StringVar(&arch, "archive-after", "", "archive a sandbox idle this long (like 7d; /workspace into the hub's archive store), or never, or default")
	cmd.Flags().StringVar(&del, "delete-after", "", "remove a sandbox and its /workspace idle this long (like 30d), or never, or default")
	return cmd
}
