package ctl

import (
	"fmt"
	"io"
	"net"
	"os"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/spf13/cobra"

	"github.com/devdepot-ai/agentd/internal/mcpserver"
	"github.com/devdepot-ai/agentd/internal/version"
)

func (a *app) mcpCmd() *cobra.Command {
	var (
		httpAddr, httpTokenFile string
		tools                   []string
		readOnly                bool
	)
	cmd := &cobra.Command{
		Use:   "mcp [--http ADDR [--http-token-file FILE]] [--tools a,b] [--read-only]",
		Short: "Serve agentd's tools to an MCP client (Claude Code, Claude Desktop, Cursor, …)",
		Long: `Serve the Model Context Protocol: an MCP client starts 'agentctl mcp' (stdio, the default)
or connects to it (--http), and its model gets agentd's tools on the target agentctl's global
flags name — the local daemon, --addr, or a machine or a conversation's sandbox through --hub:

  exec, sh           run a command; the result has the output's first and last 16 KiB (the cut
                     marked), the exit code and the process id; live output as progress
                     notifications; still running after wait_seconds (default 50): its id
  attach, kill       follow or signal a command by id
  read_file (line ranges), write_file, edit_file, list_dir, grep, glob
  python             code in a persistent interpreter session
  snapshot_create, snapshot_restore, snapshot_diff
  info               the machine: OS, user, workspace, …

A failed call is a tool result with isError and the daemon's message. A command the client
cancels is killed. Every call carries agentd-client "agentctl-mcp/VERSION (CLIENT VERSION)",
which activity records beside the actor.

--read-only offers only attach, read_file, list_dir, grep, glob, snapshot_diff and info.
--http serves streamable HTTP at http://ADDR/ (any path), on a loopback address only unless
--http-token-file names a file whose token clients must send as "Authorization: Bearer TOKEN".
The protocol is on stdout; agentctl's own messages go to stderr.`,
		Example: `  claude mcp add agentd -- agentctl mcp --hub https://hub.example.com --env py --conversation c-42
  agentctl mcp --addr unix:///tmp/agentd.sock --read-only
  agentctl mcp --tools read_file,grep,glob,info
  agentctl mcp --http 127.0.0.1:8765
  agentctl mcp --http 0.0.0.0:8765 --http-token-file ~/.config/agentd/mcp-token`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			var names []string
			for _, t := range tools {
				names = append(names, strings.Split(t, ",")...)
			}
			if cmd.Flags().Changed("tools") && len(strings.Join(names, "")) == 0 {
				return usagef("--tools: name at least one of %s", strings.Join(mcpserver.AllTools, ", "))
			}
			var token string
			if httpTokenFile != "" {
				if httpAddr == "" {
					return usagef("--http-token-file guards --http: give --http ADDR too")
				}
				b, err := os.ReadFile(httpTokenFile)
				if err != nil {
					return fmt.Errorf("--http-token-file: %w", err)
				}
				if token = strings.TrimSpace(string(b)); token == "" {
					return fmt.Errorf("--http-token-file %s is empty", httpTokenFile)
				}
			}
			if httpAddr != "" {
				if err := mcpserver.CheckHTTPAddr(httpAddr, token != ""); err != nil {
					return usagef("%v", err)
				}
			}
			// Refuse bad --tools before dialling.
			if err := mcpserver.CheckTools(names, readOnly); err != nil {
				return usagef("--tools: %v", err)
			}
			c, err := a.dial()
			if err != nil {
				return err
			}
			defer c.Close()
			srv, err := mcpserver.New(mcpserver.Options{Conn: c.ClientConn, MD: c.md, Version: version.Version, Tools: names, ReadOnly: readOnly})
			if err != nil {
				return err
			}
			ctx := cmd.Context()
			if httpAddr == "" {
				return srv.Run(ctx, &mcp.IOTransport{Reader: io.NopCloser(a.io.In), Writer: nopWriteCloser{a.io.Out}})
			}
			lis, err := net.Listen("tcp", httpAddr)
			if err != nil {
				return err
			}
			fmt.Fprintf(a.io.Err, "agentctl mcp: serving MCP (streamable HTTP) on http://%s/\n", lis.Addr())
			return srv.ServeHTTP(ctx, lis, token)
		},
	}
	f := cmd.Flags()
	f.StringVar(&httpAddr, "http", "", "serve streamable HTTP on this address, e.g. 127.0.0.1:8765, instead of stdio")
	f.StringVar(&httpTokenFile, "http-token-file", "", "with --http: a file holding the bearer token HTTP clients must send; needed for a non-loopback address")
	f.StringSliceVar(&tools, "tools", nil, "offer only these tools, comma-separated: "+strings.Join(mcpserver.AllTools, ","))
	f.BoolVar(&readOnly, "read-only", false, "offer only the tools that change nothing: "+strings.Join(mcpserver.ReadOnlyTools, ","))
	return cmd
}

// nopWriteCloser is stdout for the stdio transport: agentctl closes it,
// not the transport.
type nopWriteCloser struct{ io.Writer }

func (nopWriteCloser) Close() error { return nil }
