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

	"github.com/devdepot-ai/agentd/internal/units"
	hubv1 "github.com/devdepot-ai/agentd/proto/gen/agentd/hub/v1"
)

// envWaitPoll is how often env wait asks the hub at first, and at most.
const (
	envWaitPollMin = 500 * time.Millisecond
	envWaitPollMax = time.Second
)

func (a *app) envCmd() *cobra.Command {
	var org string
	cmd := &cobra.Command{
		Use:     "env",
		Aliases: []string{"environment"},
		Short:   "Manage where agents run: the built-in sandbox, custom images, machines",
		Long: `An environment is where an org's agents run: "builtin" (the hub's own sandbox
image, the default until another is chosen), a custom image, or a paired
machine. A custom image is validated first (VALIDATING), then READY, pinned by
digest, or REJECTED with a report saying what breaks and how to fix it.

Calls reach an environment with --env NAME (and --conversation ID: one sandbox
per conversation); with neither --env nor --machine, the org's default.`,
		Example: `  agentctl env create py --image ghcr.io/acme/sandbox:v1 && agentctl env wait py
  agentctl env show py
  agentctl env default py
  agentctl --env py --conversation c-42 info
  AGENTD_ENV=py AGENTD_CONVERSATION=c-42 agentctl sh 'python3 -V'   # exec, sh, python: --env is K=V`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return cmd.Help() },
	}
	cmd.PersistentFlags().StringVar(&org, "org", "", "org (default: your token's)")
	cmd.AddCommand(a.envLsCmd(&org), a.envShowCmd(&org), a.envCreateCmd(&org), a.envUpdateCmd(&org),
		a.envRevalidateCmd(&org), a.envWaitCmd(&org), a.envDefaultCmd(&org), a.envRmCmd(&org), a.envSetCmd(&org))
	return cmd
}

// envName is the Args of a command taking one environment NAME.
func envName(cmd *cobra.Command, args []string) error {
	if len(args) != 1 || strings.TrimSpace(args[0]) == "" {
		return usagef("env %s needs one NAME, the environment's; list them with 'agentctl env ls'", cmd.Name())
	}
	return nil
}

func (a *app) envClient(cmd *cobra.Command, fn func(ctx context.Context, ec hubv1.EnvironmentServiceClient) error) error {
	return a.hubCall(cmd, func(ctx context.Context, c *conn) error {
		return fn(ctx, hubv1.NewEnvironmentServiceClient(c))
	})
}

func (a *app) envLsCmd(org *string) *cobra.Command {
	return &cobra.Command{
		Use:     "ls",
		Aliases: []string{"list"},
		Short:   "List the org's environments: name, kind, state, default, isolation, image, last change",
		Long: `List the org's environments: builtin first, then images, then machines. The
default one is marked *; IMAGE is the reference as given, with the digest it
is pinned to (shortened) once ready.`,
		Example: `  agentctl env ls
  agentctl --json env ls | jq -r '.environments[] | select(.state == "ready") | .name'`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return a.envClient(cmd, func(ctx context.Context, ec hubv1.EnvironmentServiceClient) error {
				resp, err := ec.ListEnvironments(ctx, &hubv1.ListEnvironmentsRequest{Org: *org})
				if err != nil {
					return err
				}
				if a.json {
					docs := []envDoc{}
					for _, e := range resp.GetEnvironments() {
						docs = append(docs, envDocOf(e))
					}
					return a.printDoc(map[string]any{"environments": docs})
				}
				tw := tabwriter.NewWriter(a.io.Out, 0, 4, 2, ' ', 0)
				fmt.Fprintln(tw, "NAME\tKIND\tSTATE\tDEFAULT\tISOLATION\tIMAGE\tUPDATED")
				for _, e := range resp.GetEnvironments() {
					def := ""
					if e.GetDefault() {
						def = "*"
					}
					iso := e.GetIsolation()
					if iso == "" {
						iso = "-"
					}
					fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", e.GetName(), envKind(e.GetKind()), envState(e.GetState()), def,
						iso, shortImage(e.GetImage(), e.GetPinned()), ago(e.GetUpdated().AsTime()))
				}
				return tw.Flush()
			})
		},
	}
}

func (a *app) envShowCmd(org *string) *cobra.Command {
	return &cobra.Command{
		Use:   "show NAME",
		Short: "Describe an environment: state, image, pinned digest, its validation report and what the image adds",
		Long: `Describe an environment: its state, image, pinned digest, why it is not ready,
its network and isolation (runc or gvisor); then the validation report, one check per line (PASS, WARN or
FAIL; a warning or failure says what breaks and the fix); then what the image
adds to the base image: tools and Python packages. --json prints the whole
environment.`,
		Example: `  agentctl env show py
  agentctl --json env show py | jq '.report[] | select(.status != "pass")'`,
		Args: envName,
		RunE: func(cmd *cobra.Command, args []string) error {
			return a.envClient(cmd, func(ctx context.Context, ec hubv1.EnvironmentServiceClient) error {
				resp, err := ec.GetEnvironment(ctx, &hubv1.GetEnvironmentRequest{Org: *org, Name: args[0]})
				if err != nil {
					return err
				}
				if a.json {
					return a.printEnv(resp.GetEnvironment())
				}
				return writeEnv(a.io.Out, resp.GetEnvironment())
			})
		},
	}
}

func (a *app) envCreateCmd(org *string) *cobra.Command {
	var image, network, wsMax, isolation string
	cmd := &cobra.Command{
		Use:   "create NAME --image REF [--network none|public] [--workspace-max SIZE] [--isolation runc|gvisor]",
		Short: "Add a custom image environment; the hub validates it (follow with env wait)",
		Long: `Add an environment that runs a custom image. The hub pulls it and runs its
checks; the environment is VALIDATING until it ends READY (pinned by digest)
or REJECTED. Nothing is printed on stdout; follow with 'agentctl env wait
NAME'. The reference needs an explicit registry host.

--workspace-max bounds what each sandbox's /workspace holds (writes past it
fail with "No space left on device"); without it, the hub's
--sandbox-workspace-max (10 GiB unless the hub says otherwise). env show says
what bounds it.

--isolation gvisor runs its sandboxes under gVisor: a user-space kernel
between the agent's code and the host's, for untrusted input (a repository,
a web page, a prompt injection), at a cost in start time and system calls
(docs/performance.md). The hub's engine needs it registered ('make
sandbox-runtime' on the hub's host); without it the environment is refused,
never run on runc instead.`,
		Example: `  agentctl env create py --image ghcr.io/acme/sandbox:v1
  agentctl env create untrusted --image ghcr.io/acme/sandbox:v1 --isolation gvisor
  agentctl env create offline --image ghcr.io/acme/sandbox:v1 --network none
  agentctl env create data --image ghcr.io/acme/sandbox:v1 --workspace-max 50GiB
  agentctl env create py --image ghcr.io/acme/sandbox:v1 && agentctl env wait py`,
		Args: envName,
		RunE: func(cmd *cobra.Command, args []string) error {
			if strings.TrimSpace(image) == "" {
				return usagef("env create needs --image REF, e.g. --image ghcr.io/acme/sandbox:v1")
			}
			if network != "none" && network != "public" {
				return usagef("--network %q: want none or public", network)
			}
			if isolation != "runc" && isolation != "gvisor" {
				return usagef("--isolation %q: want runc or gvisor", isolation)
			}
			var ws int64
			if wsMax != "" {
				n, err := units.ParseBytes(wsMax)
				if err != nil || n == 0 {
					return usagef("--workspace-max %q: want a size like 512MiB, 10GiB or 2G", wsMax)
				}
				ws = n
			}
			return a.envClient(cmd, func(ctx context.Context, ec hubv1.EnvironmentServiceClient) error {
				resp, err := ec.CreateEnvironment(ctx, &hubv1.CreateEnvironmentRequest{Org: *org, Name: args[0], Image: image, Network: network,
					WorkspaceMaxBytes: ws, Isolation: isolation})
				return a.envStarted(resp.GetEnvironment(), err, "validating "+args[0])
			})
		},
	}
	cmd.Flags().StringVar(&image, "image", "", "image reference with its registry host, e.g. ghcr.io/acme/sandbox:v1 (required)")
	cmd.Flags().StringVar(&network, "network", "public", "the sandboxes' network: public (internet, no private networks) or none")
	cmd.Flags().StringVar(&wsMax, "workspace-max", "", "most each sandbox's /workspace holds, like 512MiB or 10GiB (default: the hub's --sandbox-workspace-max)")
	cmd.Flags().StringVar(&isolation, "isolation", "runc", "what separates its sandboxes from the host: runc (a container) or gvisor (gVisor's user-space kernel)")
	return cmd
}

func (a *app) envUpdateCmd(org *string) *cobra.Command {
	return &cobra.Command{
		Use:   "update NAME",
		Short: "Pull an image environment's reference again and re-run its checks (follow with env wait)",
		Long: `Let go of the pinned digest at once, pull the image reference again (a moved
tag gives a new image) and re-run every check; on success the new digest is
pinned. Until then the environment is VALIDATING and calls to it fail.`,
		Example: `  agentctl env update py && agentctl env wait py`,
		Args:    envName,
		RunE: func(cmd *cobra.Command, args []string) error {
			return a.envClient(cmd, func(ctx context.Context, ec hubv1.EnvironmentServiceClient) error {
				resp, err := ec.UpdateEnvironment(ctx, &hubv1.UpdateEnvironmentRequest{Org: *org, Name: args[0]})
				return a.envStarted(resp.GetEnvironment(), err, "pulling and validating "+args[0])
			})
		},
	}
}

func (a *app) envRevalidateCmd(org *string) *cobra.Command {
	return &cobra.Command{
		Use:   "revalidate NAME",
		Short: "Re-run an image environment's checks on its pinned digest (follow with env wait)",
		Long: `Re-run every check on the pinned digest (never the tag: use env update to
move to a new image). The pin and the report stay until the new run ends.`,
		Example: `  agentctl env revalidate py && agentctl env wait py`,
		Args:    envName,
		RunE: func(cmd *cobra.Command, args []string) error {
			return a.envClient(cmd, func(ctx context.Context, ec hubv1.EnvironmentServiceClient) error {
				resp, err := ec.RevalidateEnvironment(ctx, &hubv1.RevalidateEnvironmentRequest{Org: *org, Name: args[0]})
				return a.envStarted(resp.GetEnvironment(), err, "revalidating "+args[0])
			})
		},
	}
}

// envStarted finishes a command that started a validation: the environment
// with --json, else a note on stderr.
func (a *app) envStarted(e *hubv1.Environment, err error, what string) error {
	if err != nil {
		return err
	}
	if a.json {
		return a.printEnv(e)
	}
	fmt.Fprintf(a.io.Err, "%s: follow with 'agentctl env wait %s'\n", what, e.GetName())
	return nil
}

func (a *app) envWaitCmd(org *string) *cobra.Command {
	var timeout time.Duration
	cmd := &cobra.Command{
		Use:   "wait NAME [--timeout 10m]",
		Short: "Wait for an environment's validation to end: exit 0 when ready, 1 when rejected",
		Long: `Wait until the environment is no longer VALIDATING, printing each step on
stderr. Exit 0 when it is READY; 1 when it is REJECTED (the failed checks and
their fixes go to stderr), when --timeout passes first, or on an error.`,
		Example: `  agentctl env create py --image ghcr.io/acme/sandbox:v1 && agentctl env wait py
  agentctl env wait py --timeout 30m || agentctl env show py`,
		Args: envName,
		RunE: func(cmd *cobra.Command, args []string) error {
			if timeout <= 0 {
				return usagef("--timeout must be positive")
			}
			return a.envClient(cmd, func(ctx context.Context, ec hubv1.EnvironmentServiceClient) error {
				return a.envWait(ctx, ec, &hubv1.GetEnvironmentRequest{Org: *org, Name: args[0]}, timeout)
			})
		},
	}
	cmd.Flags().DurationVar(&timeout, "timeout", 10*time.Minute, "give up after this long")
	return cmd
}

// envWait polls the environment until its validation ends or timeout
// passes.
func (a *app) envWait(ctx context.Context, ec hubv1.EnvironmentServiceClient, req *hubv1.GetEnvironmentRequest, timeout time.Duration) error {
	wctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	timer := time.NewTimer(0)
	defer timer.Stop()
	poll, last := envWaitPollMin, ""
	for {
		select {
		case <-wctx.Done():
			if ctx.Err() != nil {
				return ctx.Err()
			}
			if last != "" {
				last = " (" + last + ")"
			}
			return fmt.Errorf("environment %s still validating after %s%s; wait again with 'agentctl env wait %s'", req.GetName(), timeout, last, req.GetName())
		case <-timer.C:
		}
		resp, err := ec.GetEnvironment(wctx, req)
		if err != nil {
			if wctx.Err() != nil && ctx.Err() == nil {
				continue // the timeout case above reports it
			}
			return err
		}
		e := resp.GetEnvironment()
		step := envState(e.GetState())
		if e.GetReason() != "" {
			step += ": " + e.GetReason()
		}
		if step != last {
			fmt.Fprintf(a.io.Err, "%s: %s\n", e.GetName(), step)
			last = step
		}
		switch {
		case e.GetState() == hubv1.EnvironmentState_ENVIRONMENT_STATE_REJECTED:
			writeChecks(a.io.Err, e.GetReport(), true)
			if a.json {
				if err := a.printEnv(e); err != nil {
					return err
				}
			}
			return &exitError{code: ExitError, err: fmt.Errorf("environment %s was rejected; fix the image, then 'agentctl env update %s'", e.GetName(), e.GetName())}
		case e.GetState() == hubv1.EnvironmentState_ENVIRONMENT_STATE_READY,
			// builtin and machine environments have nothing to validate
			e.GetState() == hubv1.EnvironmentState_ENVIRONMENT_STATE_UNSPECIFIED && e.GetKind() != hubv1.EnvironmentKind_ENVIRONMENT_KIND_IMAGE:
			if a.json {
				return a.printEnv(e)
			}
			return nil
		}
		timer.Reset(poll)
		poll = min(2*poll, envWaitPollMax)
	}
}

func (a *app) envDefaultCmd(org *string) *cobra.Command {
	return &cobra.Command{
		Use:   "default NAME",
		Short: "Make an environment the org's default: calls naming neither --env nor --machine run there",
		Example: `  agentctl env default py
  agentctl env default builtin`,
		Args: envName,
		RunE: func(cmd *cobra.Command, args []string) error {
			return a.envClient(cmd, func(ctx context.Context, ec hubv1.EnvironmentServiceClient) error {
				return a.quiet(ec.SetDefaultEnvironment(ctx, &hubv1.SetDefaultEnvironmentRequest{Org: *org, Name: args[0]}))
			})
		},
	}
}

func (a *app) envRmCmd(org *string) *cobra.Command {
	return &cobra.Command{
		Use:     "rm NAME",
		Aliases: []string{"delete"},
		Short:   "Remove a custom image environment and its sandboxes",
		Long: `Remove a custom image environment and every sandbox of it, in every state:
running, paused, stopped (their workspace volumes go) and archived (their
archives go from the archive store). Nothing of their workspaces is kept:
export one first with 'agentctl sandbox archive ID --export FILE'. Says how
many sandboxes went (--json: {"sandboxes", "stopped", "archived"}).`,
		Example: `  agentctl env rm py
  agentctl sandbox ls --env py    # what goes with it`,
		Args: envName,
		RunE: func(cmd *cobra.Command, args []string) error {
			return a.envClient(cmd, func(ctx context.Context, ec hubv1.EnvironmentServiceClient) error {
				resp, err := ec.DeleteEnvironment(ctx, &hubv1.DeleteEnvironmentRequest{Org: *org, Name: args[0]})
				if err != nil {
					return err
				}
				if a.json {
					return a.printJSON(resp)
				}
				fmt.Fprintf(a.io.Out, "removed environment %s and %s\n", args[0], removedSandboxes(resp))
				return nil
			})
		},
	}
}

// removedSandboxes says what env rm removed with the environment: "no
// sandboxes", "3 sandboxes (1 stopped, 1 archived): their workspaces and
// archives deleted".
func removedSandboxes(r *hubv1.DeleteEnvironmentResponse) string {
	n := r.GetSandboxes()
	if n == 0 {
		return "no sandboxes"
	}
	s := "1 sandbox"
	if n > 1 {
		s = fmt.Sprintf("%d sandboxes", n)
	}
	var of []string
	if k := r.GetStopped(); k > 0 {
		of = append(of, fmt.Sprintf("%d stopped", k))
	}
	if k := r.GetArchived(); k > 0 {
		of = append(of, fmt.Sprintf("%d archived", k))
	}
	if len(of) > 0 {
		s += " (" + strings.Join(of, ", ") + ")"
	}
	if r.GetArchived() > 0 {
		return s + ": their workspaces and archives deleted"
	}
	return s + ": their workspaces deleted"
}

// workspaceBound says how much /workspace holds and what bounds it:
// "10 GiB, ext4 on loop", or "unbounded (the engine's disk)".
func workspaceBound(e *hubv1.Environment) string {
	n := e.GetWorkspaceMaxBytes()
	if n <= 0 {
		return "unbounded: the engine's disk (agenthub serve --sandbox-workspace-max 0)"
	}
	size := units.Bytes(n)
	switch {
	case n%(1<<30) == 0:
		size = fmt.Sprintf("%d GiB", n>>30)
	case n%(1<<20) == 0:
		size = fmt.Sprintf("%d MiB", n>>20)
	}
	if b := e.GetWorkspaceBound(); b != "" {
		return size + ", " + b
	}
	return size
}

// writeEnv describes e for a person (env show).
func writeEnv(w io.Writer, e *hubv1.Environment) error {
	tw := tabwriter.NewWriter(w, 0, 4, 1, ' ', 0)
	row := func(k, v string) { fmt.Fprintf(tw, "%s:\t%s\n", k, v) }
	row("name", e.GetName())
	row("kind", envKind(e.GetKind()))
	state := envState(e.GetState())
	if e.GetDefault() {
		state += " (default)"
	}
	row("state", state)
	if e.GetImage() != "" {
		row("image", e.GetImage())
	}
	if e.GetPinned() != "" {
		row("pinned", e.GetPinned())
	}
	if e.GetReason() != "" {
		row("reason", e.GetReason())
	}
	if e.GetNetwork() != "" {
		row("network", e.GetNetwork())
	}
	if e.GetIsolation() != "" {
		row("isolation", e.GetIsolation())
	}
	if len(e.GetAllow()) > 0 {
		row("allow", strings.Join(e.GetAllow(), ", ")+" (new sandboxes reach only these, through the hub's egress proxy)")
	}
	if l := e.GetAllowPrivate(); len(l) > 0 {
		row("allow private", strings.Join(l, ", ")+" (through the egress proxy, besides the hub's)")
	}
	if e.GetWorkspaceMaxBytes() > 0 || e.GetWorkspaceBound() != "" {
		row("workspace", workspaceBound(e))
	}
	if e.GetStopAfter() != "" {
		row("idle policy", fmt.Sprintf("pause after %s, stop after %s, archive after %s, delete after %s", e.GetPauseAfter(), e.GetStopAfter(), e.GetArchiveAfter(), e.GetDeleteAfter()))
	}
	row("updated", ago(e.GetUpdated().AsTime()))
	if err := tw.Flush(); err != nil {
		return err
	}
	if len(e.GetReport()) > 0 {
		fmt.Fprintln(w)
		writeChecks(w, e.GetReport(), false)
	}
	if inv := e.GetInventory(); inv != nil {
		fmt.Fprintln(w, "\nWhat the image adds:")
		if len(inv.GetTools()) == 0 && len(inv.GetPythonPackages()) == 0 {
			fmt.Fprintln(w, "  nothing beyond the base image")
		}
		if len(inv.GetTools()) > 0 {
			fmt.Fprintf(w, "  tools: %s\n", strings.Join(inv.GetTools(), ", "))
		}
		if len(inv.GetPythonPackages()) > 0 {
			fmt.Fprintf(w, "  python packages: %s\n", strings.Join(inv.GetPythonPackages(), ", "))
		}
	}
	return nil
}

// writeChecks writes the report, one check per line; a warning or failure
// is followed by what breaks and the fix. onlyFailed leaves out the rest.
func writeChecks(w io.Writer, checks []*hubv1.Check, onlyFailed bool) {
	for _, c := range checks {
		st := c.GetStatus()
		if onlyFailed && st != hubv1.CheckStatus_CHECK_STATUS_FAIL {
			continue
		}
		fmt.Fprintf(w, "%s  %s  %s\n", checkStatus(st), c.GetId(), c.GetTitle())
		if st == hubv1.CheckStatus_CHECK_STATUS_WARN || st == hubv1.CheckStatus_CHECK_STATUS_FAIL {
			fmt.Fprintf(w, "      breaks: %s\n", c.GetBreaks())
			fmt.Fprintf(w, "      fix: %s\n", c.GetFix())
		}
	}
}

func checkStatus(s hubv1.CheckStatus) string {
	switch s {
	case hubv1.CheckStatus_CHECK_STATUS_PASS:
		return "PASS"
	case hubv1.CheckStatus_CHECK_STATUS_WARN:
		return "WARN"
	case hubv1.CheckStatus_CHECK_STATUS_FAIL:
		return "FAIL"
	}
	return "????"
}

func envKind(k hubv1.EnvironmentKind) string {
	return enumWord(k.String(), "ENVIRONMENT_KIND_")
}

func envState(s hubv1.EnvironmentState) string {
	return enumWord(s.String(), "ENVIRONMENT_STATE_")
}

// enumWord turns PREFIX_READY into "ready", and an unspecified value into "-".
func enumWord(name, prefix string) string {
	w := strings.ToLower(strings.TrimPrefix(name, prefix))
	if w == "unspecified" {
		return "-"
	}
	return w
}

// shortImage is the image reference with the digest it is pinned to cut to
// 12 hex digits: ghcr.io/acme/sb:v1@sha256:0123456789ab.
func shortImage(image, pinned string) string {
	_, digest, ok := strings.Cut(pinned, "@")
	switch {
	case image == "" && pinned == "":
		return "-"
	case !ok:
		return image
	case image == "":
		image, _, _ = strings.Cut(pinned, "@")
	}
	if algo, hex, ok := strings.Cut(digest, ":"); ok && len(hex) > 12 {
		digest = algo + ":" + hex[:12]
	}
	return image + "@" + digest
}

func (a *app) sandboxCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:     "sandbox",
		Aliases: []string{"sandboxes"},
		Short:   "List, pause, stop, start, fork, export and remove the sandboxes the hub runs for environments",
		Long: `The hub runs a sandbox (a container with its own agentd) per environment and
conversation. A sandbox id (sb-…) works wherever a machine id does:
'agentctl --machine sb-… sh …'. A sandbox that holds an agent run's secrets
(agent run --secret) takes calls only from admin tokens and the token that
started the run.

A sandbox keeps its work: it is running, paused (its processes frozen in
memory, no CPU), stopped (its container stopped, /workspace kept) or
archived (/workspace packed into the hub's archive store, container and
volume removed). An idle one is paused, then stopped, then archived, as the
environment's policy says (agentctl env set NAME --pause-after D
--stop-after D --archive-after D); it is removed only by sandbox rm, env
rm, or a delete-after policy. A call for a paused, stopped or archived
sandbox brings it back first (an archived one into a fresh container, every
file checked).

A sandbox forks (sandbox fork: new sandboxes with a copy of its /workspace),
and its /workspace travels as a snapshot export: sandbox archive --export
writes one, sandbox create --from starts a sandbox from one (a laptop's
'agentctl snapshot export').`,
		Example: `  agentctl sandbox ls --env py
  agentctl sandbox pause sb-1a2b3c sb-4d5e6f
  agentctl sandbox start sb-1a2b3c
  agentctl sandbox archive sb-1a2b3c
  agentctl sandbox restore sb-1a2b3c
  agentctl sandbox fork sb-1a2b3c --count 2
  agentctl sandbox archive sb-1a2b3c --export work.tar
  agentctl sandbox create --env py --conversation chat-42 --from work.tar
  agentctl sandbox rm sb-1a2b3c`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return cmd.Help() },
	}
	var org, env, rmOrg string
	ls := &cobra.Command{
		Use:     "ls [--env NAME]",
		Aliases: []string{"list"},
		Short:   "List the org's sandboxes: id, environment, conversation, state, online, created, last used, next policy step, workspace size, image",
		Long: `List the org's sandboxes, oldest first. CONVERSATION is "(pool)" for a warm
sandbox no conversation has taken yet. STATE is starting, running, paused,
stopped, archived or failed; NEXT is the idle policy's next step for it
("stops in 12m", "archives in 6d"); SIZE is what its /workspace held
when last measured (du through its agentd before each pause and stop; for an
archived sandbox, the archive's size; "-": not yet). IMAGE is the image the
sandbox was
made from, as the hub pinned it: an agent run's by its local id (sha256:…),
so what ran is known exactly even after its name moved to a newer build.`,
		Example: `  agentctl sandbox ls
  agentctl sandbox ls --env py
  agentctl --json sandbox ls | jq -r '.sandboxes[] | select(.state == "failed") | .error'`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return a.envClient(cmd, func(ctx context.Context, ec hubv1.EnvironmentServiceClient) error {
				resp, err := ec.ListSandboxes(ctx, &hubv1.ListSandboxesRequest{Org: org, Environment: env})
				if err != nil {
					return err
				}
				if a.json {
					return a.printJSON(resp)
				}
				tw := tabwriter.NewWriter(a.io.Out, 0, 4, 2, ' ', 0)
				fmt.Fprintln(tw, "ID\tENV\tCONVERSATION\tSTATE\tONLINE\tCREATED\tLAST USED\tNEXT\tSIZE\tIMAGE")
				for _, s := range resp.GetSandboxes() {
					conv := s.GetConversation()
					if conv == "" {
						conv = "(pool)"
					}
					image := s.GetImage()
					if image == "" {
						image = "-"
					}
					online := "no"
					if s.GetOnline() {
						online = "yes"
					}
					next := s.GetNextStep()
					if next == "" {
						next = "-"
					}
					size := "-"
					if s.GetWorkspaceMeasured() != nil && s.GetWorkspaceBytes() >= 0 {
						size = units.Bytes(s.GetWorkspaceBytes())
					}
					fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", s.GetId(), s.GetEnvironment(), conv, s.GetState(), online,
						ago(s.GetCreated().AsTime()), ago(s.GetLastUsed().AsTime()), next, size, image)
				}
				return tw.Flush()
			})
		},
	}
	ls.Flags().StringVar(&org, "org", "", "org (default: your token's)")
	ls.Flags().StringVar(&env, "env", "", "only this environment's sandboxes")
	rm := &cobra.Command{
		Use:   "rm ID... [--org O]",
		Short: "Stop and remove sandboxes: their containers and workspaces",
		Long: `Stop and remove each sandbox: its container and its workspace. Needs an admin
token (a member's is refused). Prints nothing (--json: one document per
sandbox); a failure is reported for its id, the rest are still removed, and
the exit code is 1.`,
		Example: `  agentctl sandbox rm sb-1a2b3c
  agentctl sandbox rm sb-1a2b3c --org acme   # another org: an owner token
  agentctl --json sandbox ls | jq -r '.sandboxes[] | select(.online | not) | .id' | xargs agentctl sandbox rm`,
		Args: func(_ *cobra.Command, args []string) error {
			if len(args) == 0 {
				return usagef("sandbox rm needs one or more sandbox ids (sb-…); list them with 'agentctl sandbox ls'")
			}
			for _, id := range args {
				if strings.TrimSpace(id) == "" {
					return usagef("sandbox rm: an empty sandbox id")
				}
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			return a.envClient(cmd, func(ctx context.Context, ec hubv1.EnvironmentServiceClient) error {
				if len(args) == 1 {
					return a.quiet(ec.RemoveSandbox(ctx, &hubv1.RemoveSandboxRequest{Id: args[0], Org: rmOrg}))
				}
				failed := false
				for _, id := range args {
					err := a.quiet(ec.RemoveSandbox(ctx, &hubv1.RemoveSandboxRequest{Id: id, Org: rmOrg}))
					if err != nil {
						if ctx.Err() != nil {
							return err
						}
						failed = true
						fmt.Fprintf(a.io.Err, "agentctl: %s: %s\n", id, describe(err))
					}
				}
				if failed {
					return &exitError{code: ExitError, err: errors.New("some sandboxes were not removed")}
				}
				return nil
			})
		},
	}
	rm.Flags().StringVar(&rmOrg, "org", "", "org of the sandboxes (default: your token's; another org needs the hub owner's token)")
	cmd.AddCommand(ls, rm, a.sandboxEgressCmd(true), a.sandboxEgressCmd(false), a.sandboxForkCmd(), a.sandboxCreateCmd())
	for _, act := range sandboxActions {
		c := a.sandboxStateCmd(act)
		if act.name == "archive" {
			a.withExport(c)
		}
		cmd.AddCommand(c)
	}
	return cmd
}
