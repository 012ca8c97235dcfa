package ctl

import (
	"context"
	"fmt"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/devdepot-ai/agentd/internal/units"
	agentdv1 "github.com/devdepot-ai/agentd/proto/gen/agentd/v1"
)

func (a *app) infoCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "info",
		Short: "Describe the target: version, mode, OS, user, workspace, resources",
		Example: `  agentctl info
  agentctl --json info`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return a.call(cmd, func(ctx context.Context, c *conn) error {
				i, err := agentdv1.NewSystemServiceClient(c).Info(ctx, &agentdv1.InfoRequest{})
				if err != nil {
					return err
				}
				if a.json {
					return a.printJSON(i)
				}
				tw := tabwriter.NewWriter(a.io.Out, 0, 4, 1, ' ', 0)
				row := func(k, v string) { fmt.Fprintf(tw, "%s:\t%s\n", k, v) }
				row("version", i.GetVersion())
				row("mode", i.GetMode())
				if iso := i.GetIsolation(); iso != "" {
					if p := i.GetPlatform(); p != "" {
						iso += " (platform " + p + ")"
					}
					row("isolation", iso)
				}
				row("hostname", i.GetHostname())
				row("os", fmt.Sprintf("%s/%s %s", i.GetOs(), i.GetArch(), i.GetOsVersion()))
				row("user", fmt.Sprintf("%s (uid %d)", i.GetUser(), i.GetUid()))
				row("home", i.GetHome())
				row("workspace", i.GetWorkspace())
				row("shell", i.GetShell())
				row("cpus", fmt.Sprint(i.GetCpus()))
				row("memory", fmt.Sprintf("%s (%s available)", units.Bytes(i.GetMemoryBytes()), units.Bytes(i.GetMemoryAvailableBytes())))
				row("disk free", units.Bytes(i.GetDiskFreeBytes()))
				py := i.GetPythonVersion()
				if py == "" {
					py = "(none found)"
				}
				row("python", py)
				row("capabilities", strings.Join(i.GetCapabilities(), ", "))
				return tw.Flush()
			})
		},
	}
}
