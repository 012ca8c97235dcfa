package ctl

import (
	"context"
	"fmt"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	"google.golang.org/protobuf/types/known/durationpb"

	hubv1 "github.com/devdepot-ai/agentd/proto/gen/agentd/hub/v1"
	agentdv1 "github.com/devdepot-ai/agentd/proto/gen/agentd/v1"
)

func (a *app) agentCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:     "agent",
		Aliases: []string{"agents"},
		Short:   "Run coding agents (Codex, Claude Code, OpenCode, …) in disposable sandboxes",
		Long: `The hub knows coding-agent profiles: where each one's image comes from, its
limits, network and TTL, and what it can do unattended. 'agent run' makes a
disposable sandbox with the agent's image and prints its id (sb-…), which
works wherever a machine id does; with arguments after --, it runs the agent
with them and exits as 'agentctl exec' does. The sandbox stays until
'agentctl sandbox rm' or its TTL.`,
		Example: `  agentctl agent ls
  agentctl agent run codex
  agentctl agent run opencode -- --version
  agentctl agent run commandcode --image ghcr.io/x/cc:1`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return cmd.Help() },
	}
	cmd.AddCommand(a.agentLsCmd(), a.agentRunCmd())
	return cmd
}

func (a *app) agentClient(cmd *cobra.Command, fn func(ctx context.Context, ac hubv1.AgentServiceClient) error) error {
	return a.hubCall(cmd, func(ctx context.Context, c *conn) error {
		return fn(ctx, hubv1.NewAgentServiceClient(c))
	})
}

func (a *app) agentLsCmd() *cobra.Command {
	return &cobra.Command{
		Use:     "ls",
		Aliases: []string{"list"},
		Short:   "List the agent profiles: executable, image strategy, whether the image is on the hub",
		Long: `List the profiles the hub knows. STRATEGY says where the image comes from:
"builder" (built on the hub's host with agenthub image build), "image" (a
published image) or "custom" (run needs --image). IMAGE is "yes" when it is
on the hub's Docker engine, else what to run there to get it.`,
		Example: `  agentctl agent ls
  agentctl --json agent ls | jq -r '.agents[] | select(.imagePresent) | .name'`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return a.agentClient(cmd, func(ctx context.Context, ac hubv1.AgentServiceClient) error {
				resp, err := ac.ListAgents(ctx, &hubv1.ListAgentsRequest{})
				if err != nil {
					return err
				}
				if a.json {
					return a.printJSON(resp)
				}
				tw := tabwriter.NewWriter(a.io.Out, 0, 4, 2, ' ', 0)
				fmt.Fprintln(tw, "PROFILE\tEXECUTABLE\tSTRATEGY\tIMAGE\tNETWORK\tTTL\tSENSITIVITY")
				for _, g := range resp.GetAgents() {
					image := "yes"
					switch {
					case g.GetStrategy() == "custom":
						image = "--image required"
					case !g.GetImagePresent():
						image = "no: " + g.GetImageHint()
					}
					fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", g.GetName(), g.GetExecutable(), g.GetStrategy(), image,
						g.GetNetwork(), g.GetTtl().AsDuration(), g.GetSensitivity())
				}
				return tw.Flush()
			})
		},
	}
}

func (a *app) agentRunCmd() *cobra.Command {
	var (
		req     hubv1.RunAgentRequest
		ttl     time.Duration
		timeout time.Duration
		secrets []string
	)
	cmd := &cobra.Command{
		Use:   "run PROFILE [--org O] [--image REF] [--allow HOST[:PORT]]... [--network open] [--ttl D] [-- ARG...]",
		Short: "Make a disposable sandbox with a coding agent; with -- ARGS, run the agent with them",
		Long: `Make a disposable sandbox for the agent of PROFILE (see 'agentctl agent ls';
claude names claude-code), from its image on the hub's Docker engine, with the
profile's limits. The hub
pins the image by its local id (sha256:…), which stderr shows, as do
'agentctl sandbox ls' and the run's activity record. Without arguments,
print the sandbox's id (sb-…) alone on stdout once its agentd is online. With arguments after --, run the agent's executable with them (no
shell) and exit as 'agentctl exec' does: the agent's exit code, its stderr on
stderr, 124 when --timeout killed it, 128+N when signal N did, 125 when
agentctl itself failed (the hub refused the run, say).

The network starts restricted, as the profile says (NETWORK in 'agentctl
agent ls'): none at all, or only the hosts of its allow list. The sandbox has
no network interface but loopback either way; the allowed hosts are reached
through the hub's egress proxy, which the sandbox's processes find in
HTTPS_PROXY, HTTP_PROXY and ALL_PROXY (http://127.0.0.1:3128). The hub checks
each connection against the list (HOST or *.DOMAIN, port 443 unless the entry
names one), never opens one to a private, loopback or link-local address, and
records every destination, allowed or refused, in the org's activity; a
refused one gets "403 Forbidden" naming the list. --allow adds destinations
for this run. --network open gives the sandbox the public network instead
(never private ones), recorded in the org's activity.

The sandbox stays until 'agentctl sandbox rm' or its TTL (--ttl, default the
profile's; 1m to 24h).

--secret NAME=ref:PATH gives every command in the sandbox the variable NAME,
its value resolved by the hub's secret provider (agenthub serve --secret-dir
or --secret-command) and delivered onto the sandbox's tmpfs: never into the
image, the hub's store, logs or activity, or the container's configuration. It is still inside: the agent, or a prompt
that steers it, can read it and send it wherever the allow list permits, and
agent run warns so.

Brokered credentials never enter the sandbox. --secret-header
HOST[:PORT]:HEADER=VALUE, VALUE holding ref:PATH, has the hub's egress proxy
set that header on every request the sandbox sends to HOST (replacing what
the agent sent), with ref:PATH replaced by the secret; HOST joins the allow
list. The proxy terminates the sandbox's TLS to HOST with a certificate of
the org's own CA, which the sandbox trusts (a bundle at
/run/agentd-ca/bundle.pem, named by SSL_CERT_FILE, NODE_EXTRA_CA_CERTS,
REQUESTS_CA_BUNDLE, CURL_CA_BUNDLE and GIT_SSL_CAINFO), and verifies the
real host itself. Other hosts stay plain tunnels. For a profile's own key
variable (codex: OPENAI_API_KEY, claude-code: ANTHROPIC_API_KEY; see
the profile's "brokered" entries) --secret NAME=ref:PATH is brokered the same way
(Authorization: Bearer … to api.openai.com, x-api-key to
api.anthropic.com), and NAME holds a placeholder, agentd-brokered-…, that
means nothing outside. Not with --network open (no proxy): there the value
is delivered.`,
		Example: `  agentctl agent run codex
  agentctl agent run claude -- -p "explain this repository"
  agentctl agent run opencode -- --version
  agentctl agent run aider --allow api.openai.com -- --model gpt-5 --yes-always
  agentctl agent run aider --network open --ttl 30m
  agentctl agent run commandcode --image ghcr.io/x/cc:1
  agentctl agent run codex --secret OPENAI_API_KEY=ref:team/openai -- exec "fix the failing test"
  agentctl agent run aider --secret-header api.openai.com:Authorization='Bearer ref:team/openai'`,
		Args: func(cmd *cobra.Command, args []string) error {
			dash := cmd.ArgsLenAtDash()
			if (dash < 0 && len(args) != 1) || dash > 1 || dash == 0 {
				return usagef("agent run takes one PROFILE, then -- and the agent's arguments (see 'agentctl agent ls')")
			}
			return nil
		},
		// With arguments it exits as exec does, so its own failures (the
		// hub's refusal among them) are 125, never a code the agent gives.
		PreRun: func(cmd *cobra.Command, _ []string) {
			if cmd.ArgsLenAtDash() > 0 {
				a.failCode = ExitFailed
			}
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			req.Profile = args[0]
			for _, kv := range secrets {
				name, ref, ok := strings.Cut(kv, "=")
				if !ok || name == "" || !strings.HasPrefix(ref, "ref:") {
					// Never echo it: it may be a value given by mistake.
					return usagef("--secret %s: want NAME=ref:PATH (a reference the hub resolves, e.g. OPENAI_API_KEY=ref:team/openai), never the value", strings.SplitN(kv, "=", 2)[0])
				}
				if req.Secrets == nil {
					req.Secrets = map[string]string{}
				}
				req.Secrets[name] = ref
			}
			if cmd.Flags().Changed("ttl") {
				req.Ttl = durationpb.New(ttl)
			}
			if timeout < 0 {
				return usagef("--timeout must not be negative")
			}
			var resp *hubv1.RunAgentResponse
			err := a.agentClient(cmd, func(ctx context.Context, ac hubv1.AgentServiceClient) error {
				var err error
				resp, err = ac.RunAgent(ctx, &req)
				return err
			})
			if err != nil {
				return err
			}
			for _, n := range resp.GetNotices() {
				if strings.HasPrefix(n, "warning: ") {
					fmt.Fprintf(a.io.Err, "agentctl: %s\n", n)
					continue
				}
				fmt.Fprintf(a.io.Err, "agentctl: note: %s\n", n)
			}
			argv := args[1:]
			if len(argv) == 0 && a.json {
				return a.printJSON(resp)
			}
			// The image by id: the name may point at a newer build later.
			fmt.Fprintf(a.io.Err, "agentctl: sandbox %s from image %s (until %s; remove it with 'agentctl sandbox rm %s')\n",
				resp.GetSandboxId(), resp.GetImage(), resp.GetExpires().AsTime().Local().Format(time.DateTime), resp.GetSandboxId())
			if len(argv) == 0 {
				_, err := fmt.Fprintln(a.io.Out, resp.GetSandboxId())
				return err
			}
			a.target.machine, a.target.env, a.target.conv = resp.GetSandboxId(), "", ""
			run := &agentdv1.StartRequest{Argv: append([]string{resp.GetExecutable()}, argv...)}
			if timeout > 0 {
				run.Timeout = durationpb.New(timeout)
			}
			return a.runProcess(cmd.Context(), run, &execFlags{timeout: timeout})
		},
	}
	f := cmd.Flags()
	f.StringVar(&req.Org, "org", "", "org (default: your token's)")
	f.StringVar(&req.Image, "image", "", "an image on the hub's engine instead of the profile's (required for custom profiles)")
	f.StringVar(&req.Network, "network", "", `"open" for the public network (default: restricted, as the profile says)`)
	f.StringArrayVar(&req.Allow, "allow", nil, "HOST[:PORT] or *.DOMAIN[:PORT] the sandbox may reach through the hub's egress proxy, besides the profile's allow list (repeatable; port 443 unless given)")
	f.DurationVar(&ttl, "ttl", 0, "how long the sandbox lives (default: the profile's TTL)")
	f.StringArrayVar(&secrets, "secret", nil, "NAME=ref:PATH: the agent's commands get NAME from the hub's secret provider (repeatable)")
	f.StringArrayVar(&req.SecretHeaders, "secret-header", nil, "HOST[:PORT]:HEADER=VALUE with ref:PATH in VALUE: the hub's egress proxy sets HEADER on the sandbox's requests to HOST, the secret never entering the sandbox (repeatable)")
	f.DurationVar(&timeout, "timeout", 0, "with -- ARGS: kill the agent's process group after this long (exit 124)")
	return cmd
}
