package main

import (
	"fmt"
	"io"
	"os"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/devdepot-ai/agentd/internal/agentimage"
)

func newImageCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "image COMMAND",
		Short: "The coding agents' runner images: their profiles and Dockerfiles",
		Long: `The runner images of the coding-agent profiles (agentctl agent run PROFILE).
Codex, Claude Code, OpenCode and Pi are built by agenthub from pinned parts;
Aider and Goose use their official images; Command Code needs --image.

  dockerfile PROFILE   print the exact Dockerfile of a profile's runner image
  ls                   list the profiles and where each one's image comes from

Neither needs Docker. Building the images (image build) and removing old
ones (image prune) come later.`,
		Example: `  agenthub image ls
  agenthub image dockerfile codex > Dockerfile && docker build -t runner-codex - < Dockerfile`,
		Args: func(_ *cobra.Command, args []string) error {
			if len(args) > 0 {
				return usageError{fmt.Errorf("image %s: not a subcommand (dockerfile and ls exist; build and prune come later)", args[0])}
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, _ []string) error { return cmd.Help() },
	}
	cmd.AddCommand(newImageDockerfileCmd(), newImageLsCmd())
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
  agenthub image dockerfile codex --agent-version 0.150.0 --docker
  agenthub image dockerfile opencode --base-dockerfile ./Dockerfile.dev`,
		Args: func(_ *cobra.Command, args []string) error {
			if len(args) != 1 {
				return usageError{fmt.Errorf("dockerfile takes one profile, got %d arguments (see agenthub image ls)", len(args))}
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			p, err := agentimage.Lookup(args[0])
			if err != nil {
				return usageError{err}
			}
			if baseFile != "" {
				b, err := readBaseFile(baseFile, cmd.InOrStdin())
				if err != nil {
					return fmt.Errorf("--base-dockerfile: %w", err)
				}
				opts.CustomBase = string(b)
			}
			text, err := agentimage.Render(p, opts)
			if err != nil {
				return usageError{err}
			}
			_, err = io.WriteString(cmd.OutOrStdout(), text)
			return err
		},
	}
	f := cmd.Flags()
	f.StringVar(&opts.AgentVersion, "agent-version", "", "the agent's version (default: its pin in versions.json)")
	f.BoolVar(&opts.Docker, "docker", false, "add Docker (dockerd, containerd, runc, the CLI) and a docker group")
	f.StringVar(&baseFile, "base-dockerfile", "", "your Dockerfile, whose last stage is the base (- for stdin; default: the managed base)")
	f.IntVar(&opts.UID, "uid", 1000, "the agent user's uid")
	f.IntVar(&opts.GID, "gid", 1000, "the agent user's group's gid (the next free one if taken)")
	return cmd
}

// readBaseFile reads the --base-dockerfile, "-" being stdin.
func readBaseFile(name string, stdin io.Reader) ([]byte, error) {
	if name == "-" {
		return io.ReadAll(stdin)
	}
	return os.ReadFile(name)
}

func newImageLsCmd() *cobra.Command {
	return &cobra.Command{
		Use:     "ls",
		Short:   "List the agent profiles and where each one's image comes from (no Docker needed)",
		Example: `  agenthub image ls`,
		Args: func(_ *cobra.Command, args []string) error {
			if len(args) > 0 {
				return usageError{fmt.Errorf("ls takes no arguments")}
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, _ []string) error {
			pins := agentimage.Pins()
			tw := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "PROFILE\tAGENT\tSTRATEGY\tIMAGE\tNETWORK\tTTL")
			for _, p := range agentimage.Profiles() {
				var image string
				switch p.Strategy {
				case agentimage.StrategyBuilder:
					image = "built: " + installSource(p) + "@" + pins.Agents[p.Name]
				case agentimage.StrategyImage:
					image = p.Image
				case agentimage.StrategyCustom:
					image = "--image required"
				}
				network := p.Network.Default
				if len(p.Network.Allow) > 0 {
					network = strings.Join(p.Network.Allow, ",")
				}
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", p.Name, p.DisplayName, p.Strategy, image, network, p.TTL.Duration)
			}
			return tw.Flush()
		},
	}
}

func installSource(p agentimage.Profile) string {
	if p.Install.NPM != "" {
		return "npm " + p.Install.NPM
	}
	return "script"
}
