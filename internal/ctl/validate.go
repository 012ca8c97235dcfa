package ctl

import (
	"encoding/json"
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/devdepot-ai/agentd/internal/conformance"
)

// checkResult is a check's outcome, as printed.
type checkResult struct {
	Name   string `json:"name"`
	Passed bool   `json:"passed"`
	Detail string `json:"detail,omitempty"`
}

// printed turns a conformance result into what validate prints: on a
// failure what breaks, what was seen and the fix; on a pass how long it took.
func printed(r conformance.Result) checkResult {
	if r.OK {
		return checkResult{Name: r.Name, Passed: true, Detail: fmt.Sprintf("(%s)", r.Duration.Round(time.Millisecond))}
	}
	d := r.Breaks + ": " + r.Detail
	if r.Fix != "" {
		d += "; " + r.Fix
	}
	return checkResult{Name: r.Name, Detail: d}
}

func (a *app) validateCmd() *cobra.Command {
	var keep bool
	cmd := &cobra.Command{
		Use:   "validate",
		Short: "Run the conformance suite: every capability an agent depends on",
		Long: `Check that the target gives an agent everything it depends on: write, read,
edit, search, glob, shell, exit codes, stderr, timeouts that kill the whole
process group, pty, Python (one-off and sessions), snapshot round trip,
system info — and, in sandbox mode, the container's shape (uid 1000,
read-only root, /workspace, writable workspace, /tmp and home, programs
runnable from /tmp). The hub validates custom sandbox images with the
same suite.

One line per check: PASS, or FAIL with what breaks for the agent and how to
fix it. Exit 0 only when every check passes. The checks work in a scratch
directory inside the workspace, removed afterwards.`,
		Example: `  agentctl validate
  agentctl --hub https://hub.example.com --machine m-123 validate
  agentctl --json validate`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := a.dial()
			if err != nil {
				return err
			}
			defer c.Close()
			var results []checkResult
			conformance.Run(c.ctx(cmd.Context()), c, conformance.Options{
				Keep: keep,
				Progress: func(r conformance.Result) {
					p := printed(r)
					results = append(results, p)
					if a.json {
						return
					}
					verdict := "FAIL"
					if p.Passed {
						verdict = "PASS"
					}
					fmt.Fprintf(a.io.Out, "%s  %-18s %s\n", verdict, p.Name, p.Detail)
				},
			})
			failed := 0
			for _, r := range results {
				if !r.Passed {
					failed++
				}
			}
			if a.json {
				b, err := json.Marshal(struct {
					Passed bool          `json:"passed"`
					Checks []checkResult `json:"checks"`
				}{failed == 0, results})
				if err != nil {
					return err
				}
				fmt.Fprintf(a.io.Out, "%s\n", b)
			} else {
				fmt.Fprintf(a.io.Out, "\n%d passed, %d failed\n", len(results)-failed, failed)
			}
			if failed > 0 {
				return &exitError{code: ExitError}
			}
			return nil
		},
	}
	cmd.Flags().BoolVar(&keep, "keep", false, "keep the scratch directory for inspection")
	return cmd
}
