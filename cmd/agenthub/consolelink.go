package main

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/devdepot-ai/agentd/internal/hub/console"
	"github.com/devdepot-ai/agentd/internal/hub/store"
)

// consoleLink stores a one-time console link for the hub's owner and
// returns its URL under base.
func consoleLink(ctx context.Context, st store.Store, base string) (string, error) {
	orgs, err := st.ListOrgs(ctx)
	if err != nil {
		return "", err
	}
	if len(orgs) == 0 {
		return "", errors.New("this hub has no org yet: run agenthub init first")
	}
	code, err := console.CreateLink(ctx, st, orgs[0].ID, time.Now())
	if err != nil {
		return "", err
	}
	return strings.TrimSuffix(base, "/") + console.Prefix + "link?code=" + url.QueryEscape(code), nil
}

func newConsoleLinkCmd() *cobra.Command {
	var db, base string
	cmd := &cobra.Command{
		Use:   "console-link [--db PATH] [--url URL]",
		Short: "Print a one-time link that signs the hub's owner in to the web console",
		Long: `Print a link to the hub's web console that signs its owner in (an admin of
the hub's first org) without an API token. It works once, within ` + console.LinkTTL.String() + `,
and the session it starts lasts ` + console.LinkSessionTTL.String() + `. Run it where the hub's store is.`,
		Example: `  agenthub console-link --url https://hub.example.com`,
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			u, err := url.Parse(base)
			if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
				return usageError{fmt.Errorf("--url %q: want the hub's URL, https://host[:port]", base)}
			}
			st, err := openStore(cmd.Context(), db)
			if err != nil {
				return err
			}
			defer st.Close()
			link, err := consoleLink(cmd.Context(), st, base)
			if err != nil {
				return err
			}
			fmt.Fprintf(cmd.ErrOrStderr(), "One-time sign-in link for the hub's owner (works once, within %s):\n", console.LinkTTL)
			fmt.Fprintln(cmd.OutOrStdout(), link)
			return nil
		},
	}
	cmd.Flags().StringVar(&db, "db", defaultDB(), "SQLite file, or postgres://… ($AGENTHUB_DB)")
	cmd.Flags().StringVar(&base, "url", "https://localhost:8443", "the hub's URL as the browser reaches it")
	return cmd
}
