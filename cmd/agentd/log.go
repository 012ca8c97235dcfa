package main

import (
	"encoding/json"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/devdepot-ai/agentd/internal/activity"
	"github.com/devdepot-ai/agentd/internal/config"
)

func newLogCmd() *cobra.Command {
	var (
		follow  bool
		asJSON  bool
		dirFlag string
	)
	cmd := &cobra.Command{
		Use:   "log [-f]",
		Short: "Print the local audit log: every operation agentd ran, newest last",
		Long: `Print the audit log agentd keeps of every operation it performs for an agent —
commands run, files written, edited, moved and removed — one line each: time,
sequence number, who asked, what, and the outcome. The log lives in the state
directory (audit.jsonl, rotated) and is readable only by you.`,
		Example: `  agentd log
  agentd log -f            # follow new operations as they happen
  agentd log --json | jq 'select(.kind == "process.exit")'`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			dir := dirFlag
			if dir == "" {
				var err error
				if dir, err = config.StateDir(); err != nil {
					return err
				}
			}
			out := cmd.OutOrStdout()
			return activity.Tail(cmd.Context(), dir, follow, 0, func(r activity.Record) error {
				if asJSON {
					b, err := json.Marshal(r)
					if err != nil {
						return err
					}
					_, err = fmt.Fprintf(out, "%s\n", b)
					return err
				}
				_, err := fmt.Fprintln(out, r.Line())
				return err
			})
		},
	}
	cmd.Flags().BoolVarP(&follow, "follow", "f", false, "keep printing new operations as they happen")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the raw records, one JSON object per line")
	cmd.Flags().StringVar(&dirFlag, "state-dir", "", "state directory (default: $AGENTD_STATE_DIR or ~/.local/state/agentd)")
	return cmd
}
