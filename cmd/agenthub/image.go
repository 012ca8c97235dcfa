package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"golang.org/x/term"

	"github.com/devdepot-ai/agentd/internal/agentimage"
	"github.com/devdepot-ai/agentd/internal/agentimage/imagebuild"
	"github.com/devdepot-ai/agentd/internal/units"
)

func newImageCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "image COMMAND",
		Short: "The coding agents' runner images: their profiles and Dockerfiles",
		Long: `The runner images of the coding-agent profiles (agentctl agent run PROFILE).
Codex, Claude Code, OpenCode and Pi are built by agenthub from pinned parts;
Aider and Goose use their official images; Command Code needs --image.

  build PROFILE        build a profile's runner image on the Docker engine
  dockerfile PROFILE   print the exact Dockerfile of a profile's runner image
  ls                   list the profiles, whether each one's image is here,
                       and the runner images built
  prune                remove runner images no -latest name and no sandbox uses

dockerfile needs no Docker; ls says "?" where the engine cannot be reached.`,
		Example: `  agenthub image ls
  agenthub image build codex
  agenthub image dockerfile codex > Dockerfile && docker build -t runner-codex - < Dockerfile
  agenthub image prune --dry-run`,
		Args: func(_ *cobra.Command, args []string) error {
			if len(args) > 0 {
				return usageError{fmt.Errorf("image %s: not a subcommand (build, dockerfile, ls and prune exist)", args[0])}
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, _ []string) error { return cmd.Help() },
	}
	cmd.AddCommand(newImageBuildCmd(), newImageDockerfileCmd(), newImageLsCmd(), newImagePruneCmd())
	return cmd
}

func newImageDockerfileCmd() *cobra.Command {
	var opts agentimage.RenderOptions
	var baseFile string
	cmd := &cobra.Command{
		Use:   "dockerfile PROFILE [--agent-version V] [--docker] [--base-dockerfile FILE] [--uid N] [--gid N]",
		Short: "Print the exact Dockerfile of a profile's runner image (no Docker needed)",
		Long: `Print the Dockerfile agenthub builds a builder profile's runner image from.
It needs no build context, so 'docker build - < Dockerfile' builds it.

The stages: a managed base (Debian slim and the command-line tools agents
expect) or the last stage of your --base-dockerfile (its earlier stages kept);
a tool base with curl; Node.js when the agent needs it; Docker's static
binaries with --docker; the agent; and the runner, which creates the agent
user, runs your base's instructions, copies the tools in under
/opt/agentd-tools, appends its bin directory to PATH and ends as the agent
user in /workspace. The versions are the ARG defaults, from versions.json;
--agent-version overrides the agent's.

Profiles that use a published image (aider, goose) or need --image
(commandcode) have no Dockerfile.`,
		Example: `  agenthub image dockerfile claude-code
  agenthub image dockerfile claude         # the same: claude names claude-code
  agenthub image dockerfile codex --agent-version 0.150.0 --docker
  agenthub image dockerfile opencode --base-dockerfile ./Dockerfile.dev`,
		Args: oneProfile("dockerfile"),
		RunE: func(cmd *cobra.Command, args []string) error {
			p, err := profileAndBase(cmd, args[0], baseFile, &opts)
			if err != nil {
				return err
			}
			text, err := agentimage.Render(p, opts)
			if err != nil {
				return usageError{err}
			}
			_, err = io.WriteString(cmd.OutOrStdout(), text)
			return err
		},
	}
	renderFlags(cmd.Flags(), &opts, &baseFile)
	return cmd
}

// oneProfile is the Args of a command taking one PROFILE.
func oneProfile(verb string) cobra.PositionalArgs {
	return func(_ *cobra.Command, args []string) error {
		if len(args) != 1 {
			return usageError{fmt.Errorf("%s takes one profile, got %d arguments (see agenthub image ls)", verb, len(args))}
		}
		return nil
	}
}

// renderFlags registers the flags that choose how a Dockerfile renders.
func renderFlags(f *pflag.FlagSet, opts *agentimage.RenderOptions, baseFile *string) {
	f.StringVar(&opts.AgentVersion, "agent-version", "", "the agent's version (default: its pin in versions.json)")
	f.BoolVar(&opts.Docker, "docker", false, "add Docker (dockerd, containerd, runc, the CLI) and a docker group")
	f.StringVar(baseFile, "base-dockerfile", "", "your Dockerfile, whose last stage is the base (- for stdin; default: the managed base)")
	f.IntVar(&opts.UID, "uid", 1000, "the agent user's uid")
	f.IntVar(&opts.GID, "gid", 1000, "the agent user's group's gid (the next free one if taken)")
}

// profileAndBase looks the profile up and reads --base-dockerfile into opts.
func profileAndBase(cmd *cobra.Command, name, baseFile string, opts *agentimage.RenderOptions) (agentimage.Profile, error) {
	p, err := agentimage.Lookup(name)
	if err != nil {
		return agentimage.Profile{}, usageError{err}
	}
	if baseFile != "" {
		b, err := readBaseFile(baseFile, cmd.InOrStdin())
		if err != nil {
			return agentimage.Profile{}, fmt.Errorf("--base-dockerfile: %w", err)
		}
		opts.CustomBase = string(b)
	}
	return p, nil
}

// readBaseFile reads the --base-dockerfile, "-" being stdin.
func readBaseFile(name string, stdin io.Reader) ([]byte, error) {
	if name == "-" {
		return io.ReadAll(stdin)
	}
	return os.ReadFile(name)
}

func newImageLsCmd() *cobra.Command {
	var dockerHost string
	cmd := &cobra.Command{
		Use:   "ls [--docker-host URL]",
		Short: "List the agent profiles, whether each one's image is here, and the runner images",
		Long: `List the agent profiles: where each one's image comes from, whether it is
on this host's Docker engine (LOCAL), its network and TTL; then the runner
images agenthub built, with the -latest ones and those a sandbox uses marked.
LOCAL is "?" when the engine cannot be reached.`,
		Example: `  agenthub image ls`,
		Args: func(_ *cobra.Command, args []string) error {
			if len(args) > 0 {
				return usageError{fmt.Errorf("ls takes no arguments")}
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, _ []string) error {
			local, images, engineErr := localImages(cmd.Context(), dockerHost)
			if engineErr != nil {
				fmt.Fprintf(cmd.ErrOrStderr(), "agenthub: %v\n", engineErr)
			}
			pins := agentimage.Pins()
			tw := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "PROFILE\tAGENT\tSTRATEGY\tIMAGE\tLOCAL\tNETWORK\tTTL")
			for _, p := range agentimage.Profiles() {
				var image, here string
				switch p.Strategy {
				case agentimage.StrategyBuilder:
					image = "built: " + installSource(p) + "@" + pins.Agents[p.Name]
					here = presence(local, engineErr, imagebuild.LatestTag(imagebuild.ManagedProject, p.Slug), "agenthub image build "+p.Name)
				case agentimage.StrategyImage:
					image = p.Image
					here = presence(local, engineErr, p.Image, "docker pull "+p.Image)
				case agentimage.StrategyCustom:
					image, here = "--image required", "-"
				}
				network := p.Network.Default
				if len(p.Network.Allow) > 0 {
					network = strings.Join(p.Network.Allow, ",")
				}
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", p.Name, p.DisplayName, p.Strategy, image, here, network, p.TTL.Duration)
			}
			if len(images) > 0 {
				fmt.Fprintln(tw, "\nRUNNER IMAGE\tAGENT\tID\tCREATED\tSIZE\tUSED BY A SANDBOX")
				for _, im := range images {
					name := "<no name>"
					if len(im.Tags) > 0 {
						name = strings.Join(im.Tags, ", ")
					}
					fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", name, im.Agent, imagebuild.ShortID(im.ID),
						im.Created.Format(time.DateTime), units.Bytes(im.Size), yesNo(im.InUse))
				}
			}
			return tw.Flush()
		},
	}
	cmd.Flags().StringVar(&dockerHost, "docker-host", "", "Docker engine (default: $DOCKER_HOST, else the local socket)")
	return cmd
}

// localImages says which of the profiles' images are on the engine and
// lists the runner images; the error says why the engine could not tell.
func localImages(ctx context.Context, host string) (map[string]bool, []imagebuild.Image, error) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	b, err := imagebuild.New(imagebuild.Options{Host: host})
	if err != nil {
		return nil, nil, err
	}
	defer b.Close()
	var refs []string
	for _, p := range agentimage.Profiles() {
		switch p.Strategy {
		case agentimage.StrategyBuilder:
			refs = append(refs, imagebuild.LatestTag(imagebuild.ManagedProject, p.Slug))
		case agentimage.StrategyImage:
			refs = append(refs, p.Image)
		}
	}
	here, err := b.Present(ctx, refs...)
	if err != nil {
		return nil, nil, err
	}
	images, err := b.List(ctx)
	return here, images, err
}

func presence(local map[string]bool, engineErr error, name, how string) string {
	switch {
	case engineErr != nil:
		return "?"
	case local[name]:
		return "yes"
	default:
		return "no: " + how
	}
}

func yesNo(b bool) string {
	if b {
		return "yes"
	}
	return "no"
}

func installSource(p agentimage.Profile) string {
	if p.Install.NPM != "" {
		return "npm " + p.Install.NPM
	}
	return "script"
}

func newImageBuildCmd() *cobra.Command {
	var (
		req        imagebuild.Request
		baseFile   string
		buildArgs  []string
		dockerHost string
		quiet      bool
	)
	cmd := &cobra.Command{
		Use:   "build PROFILE [-r] [--agent-version V] [--docker] [--base-dockerfile FILE --project NAME]",
		Short: "Build a profile's runner image on the Docker engine (skipped when up to date)",
		Long: `Build the runner image of a builder profile (codex, claude-code, opencode, pi;
claude names claude-code) from the Dockerfile 'agenthub image dockerfile' prints, on this host's Docker
engine. The image is named agentd/runner-PROJECT:PROFILE-latest (and
:PROFILE-VERSION); PROJECT is "managed" on the managed base, or --project
with --base-dockerfile.

A build is skipped when the -latest image has the same content id (the
rendered Dockerfile and build arguments); otherwise it says why it builds
("agent version changed (1.2.3 → 1.2.4)", "forced", "not present"), and the
engine's layer cache re-runs only what changed: a new agent version
re-installs only the agent. -r builds anyway.

The engine's build output goes to stderr (-q: none); the image's -latest
name is printed alone on stdout. The installers need the network (npm,
nodejs.org, download.docker.com, the agents' release pages): offline, the
build fails in one line and the existing image stays.`,
		Example: `  agenthub image build codex
  agenthub image build codex --agent-version 0.160.0
  agenthub image build opencode --base-dockerfile ./Dockerfile.dev --project myapp
  agenthub image build pi -r --build-arg AGENTD_DEBIAN_IMAGE=mirror.example.com/debian:bookworm-slim`,
		Args: oneProfile("build"),
		RunE: func(cmd *cobra.Command, args []string) error {
			p, err := profileAndBase(cmd, args[0], baseFile, &req.Render)
			if err != nil {
				return err
			}
			if baseFile == "" && req.Project != "" && req.Project != imagebuild.ManagedProject {
				return usageError{fmt.Errorf("--project names the images of a --base-dockerfile; the managed base's project is %q", imagebuild.ManagedProject)}
			}
			req.Profile = p
			req.BuildArgs = map[string]string{}
			for _, kv := range buildArgs {
				k, v, ok := strings.Cut(kv, "=")
				if !ok || k == "" {
					return usageError{fmt.Errorf("--build-arg %q: want NAME=VALUE", kv)}
				}
				req.BuildArgs[k] = v
			}
			if !quiet {
				req.Progress = cmd.ErrOrStderr()
			}
			b, err := imagebuild.New(imagebuild.Options{Host: dockerHost})
			if err != nil {
				return err
			}
			defer b.Close()
			res, err := b.Build(cmd.Context(), req)
			if err != nil {
				if errors.Is(err, agentimage.ErrNothingToBuild) || errors.Is(err, agentimage.ErrImageRequired) {
					return usageError{err}
				}
				return err
			}
			if res.Built {
				fmt.Fprintf(cmd.ErrOrStderr(), "agenthub: built %s (%s): %s\n", strings.Join(res.Tags, ", "), imagebuild.ShortID(res.Image), res.Reason)
			} else {
				fmt.Fprintf(cmd.ErrOrStderr(), "agenthub: %s is up to date (content %s): nothing to build (-r builds anyway)\n", res.Tags[0], res.ContentID)
			}
			_, err = fmt.Fprintln(cmd.OutOrStdout(), res.Tags[0])
			return err
		},
	}
	f := cmd.Flags()
	f.BoolVarP(&req.Rebuild, "rebuild", "r", false, "build even when an image with the same content exists")
	renderFlags(f, &req.Render, &baseFile)
	f.StringVar(&req.Project, "project", "", "the images' project name, agentd/runner-PROJECT (required with --base-dockerfile)")
	f.StringArrayVar(&buildArgs, "build-arg", nil, "NAME=VALUE overriding an ARG of the Dockerfile (AGENTD_DEBIAN_IMAGE, …); repeatable")
	f.StringVar(&req.Network, "network", "", "the network of the build's RUN steps (default: the engine's; host, none)")
	f.StringVar(&dockerHost, "docker-host", "", "Docker engine (default: $DOCKER_HOST, else the local socket)")
	f.BoolVarP(&quiet, "quiet", "q", false, "do not show the engine's build output")
	return cmd
}

func newImagePruneCmd() *cobra.Command {
	var (
		dryRun, yes bool
		dockerHost  string
	)
	cmd := &cobra.Command{
		Use:   "prune [--dry-run] [--yes]",
		Short: "Remove runner images that are no -latest and that no sandbox uses",
		Long: `Remove the runner images agenthub built that no longer matter: each
project's newest image of an agent (its -latest) stays, and so does any image
a container (a sandbox) was made from. --dry-run lists what would go; without
--yes, prune asks first on a terminal and refuses otherwise.`,
		Example: `  agenthub image prune --dry-run
  agenthub image prune --yes`,
		Args: func(_ *cobra.Command, args []string) error {
			if len(args) > 0 {
				return usageError{fmt.Errorf("prune takes no arguments")}
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, _ []string) error {
			b, err := imagebuild.New(imagebuild.Options{Host: dockerHost})
			if err != nil {
				return err
			}
			defer b.Close()
			all, err := b.List(cmd.Context())
			if err != nil {
				return err
			}
			gone := imagebuild.Prunable(all)
			if len(gone) == 0 {
				fmt.Fprintln(cmd.ErrOrStderr(), "agenthub: no runner image to prune")
				return nil
			}
			var total int64
			for _, im := range gone {
				total += im.Size
				name := "<no name>"
				if len(im.Tags) > 0 {
					name = strings.Join(im.Tags, ", ")
				}
				fmt.Fprintf(cmd.OutOrStdout(), "%s\t%s\t%s\n", imagebuild.ShortID(im.ID), name, units.Bytes(im.Size))
			}
			if dryRun {
				fmt.Fprintf(cmd.ErrOrStderr(), "agenthub: would remove %s (%s); nothing removed (--dry-run)\n", images(len(gone)), units.Bytes(total))
				return nil
			}
			if !yes {
				ok, err := confirm(cmd, fmt.Sprintf("Remove %s (%s)? [y/N] ", images(len(gone)), units.Bytes(total)))
				if err != nil {
					return err
				}
				if !ok {
					fmt.Fprintln(cmd.ErrOrStderr(), "agenthub: nothing removed")
					return nil
				}
			}
			for _, im := range gone {
				if err := b.Remove(cmd.Context(), im); err != nil {
					return err
				}
			}
			fmt.Fprintf(cmd.ErrOrStderr(), "agenthub: removed %s (%s)\n", images(len(gone)), units.Bytes(total))
			return nil
		},
	}
	f := cmd.Flags()
	f.BoolVar(&dryRun, "dry-run", false, "list what would be removed, remove nothing")
	f.BoolVarP(&yes, "yes", "y", false, "remove without asking")
	f.StringVar(&dockerHost, "docker-host", "", "Docker engine (default: $DOCKER_HOST, else the local socket)")
	return cmd
}

// images is "1 image", "2 images".
func images(n int) string {
	if n == 1 {
		return "1 image"
	}
	return fmt.Sprintf("%d images", n)
}

// confirm asks a yes/no question on a terminal; without one it refuses
// rather than guess.
func confirm(cmd *cobra.Command, question string) (bool, error) {
	in, ok := cmd.InOrStdin().(*os.File)
	if !ok || !term.IsTerminal(int(in.Fd())) {
		return false, usageError{errors.New("not asking without a terminal: pass --yes to remove, or --dry-run to list")}
	}
	fmt.Fprint(cmd.ErrOrStderr(), question)
	line, err := bufio.NewReader(in).ReadString('\n')
	if err != nil && !errors.Is(err, io.EOF) {
		return false, err
	}
	answer := strings.ToLower(strings.TrimSpace(line))
	return answer == "y" || answer == "yes", nil
}
