package ctl

import (
	"context"
	"fmt"
	"os"
	"text/tabwriter"

	"github.com/spf13/cobra"
	"google.golang.org/protobuf/encoding/protojson"

	agentdv1 "github.com/devdepot-ai/agentd/proto/gen/agentd/v1"
)

func (a *app) inventoryCmd() *cobra.Command {
	var baseFile string
	var noVersions bool
	cmd := &cobra.Command{
		Use:   "inventory [--base FILE]",
		Short: "List the tools on PATH and the Python packages the target offers",
		Long: `List the command-line tools on the target's PATH (with versions where they are
cheap to ask) and its installed Python packages.

--base FILE subtracts a base inventory saved with 'agentctl --json inventory':
what remains is what this environment adds, for an agent's context.`,
		Example: `  agentctl inventory
  agentctl --json inventory > base.json      # on the base image
  agentctl inventory --base base.json        # on the derived one: what it adds`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			req := &agentdv1.InventoryRequest{NoVersions: noVersions}
			if baseFile != "" {
				b, err := os.ReadFile(baseFile)
				if err != nil {
					return fmt.Errorf("--base: %w", err)
				}
				req.Base = &agentdv1.InventoryResponse{}
				if err := (protojson.UnmarshalOptions{DiscardUnknown: true}).Unmarshal(b, req.Base); err != nil {
					return usagef("--base %s is not an inventory saved with 'agentctl --json inventory': %v", baseFile, err)
				}
			}
			return a.call(cmd, func(ctx context.Context, c *conn) error {
				inv, err := agentdv1.NewSystemServiceClient(c).Inventory(ctx, req)
				if err != nil {
					return err
				}
				if a.json {
					return a.printJSON(inv)
				}
				tw := tabwriter.NewWriter(a.io.Out, 0, 4, 2, ' ', 0)
				fmt.Fprintf(tw, "TOOLS (%d)\n", len(inv.GetTools()))
				for _, t := range inv.GetTools() {
					fmt.Fprintf(tw, "  %s\t%s\t%s\n", t.GetName(), t.GetVersion(), t.GetPath())
				}
				fmt.Fprintf(tw, "PYTHON PACKAGES (%d)\n", len(inv.GetPythonPackages()))
				for _, p := range inv.GetPythonPackages() {
					fmt.Fprintf(tw, "  %s\t%s\n", p.GetName(), p.GetVersion())
				}
				return tw.Flush()
			})
		},
	}
	cmd.Flags().StringVar(&baseFile, "base", "", "inventory JSON to subtract (from 'agentctl --json inventory')")
	cmd.Flags().BoolVar(&noVersions, "no-versions", false, "do not run tools to learn their versions (faster)")
	return cmd
}
