// Package mcpserver is `agentctl mcp`: a Model Context Protocol server
// whose tools (exec, sh, read_file, …) are agentd's RPCs, so that any MCP
// client — Claude Code, Claude Desktop, Cursor — runs commands and edits
// files on a daemon, directly or through the hub. It knows nothing of how
// the connection was made: agentctl dials the target and hands over the
// connection and the metadata every call carries.
//
// Tools answer with text a model can read (a command's output cut to a
// head and a tail, with its exit code and process id) and a structured
// result; a failed RPC is a tool result with isError and the daemon's
// message, never a protocol error, so the model sees it and can correct.
package mcpserver

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"

	"github.com/devdepot-ai/agentd/internal/conformance"
	"github.com/devdepot-ai/agentd/internal/wire"
)

// Name is how the server introduces itself to MCP clients, and the start
// of the agentd-client metadata it sends.
const Name = "agentctl-mcp"

// Options configure a Server. Conn is required.
type Options struct {
	// Conn is the connection to the target: an agentd, or the hub that
	// routes to one.
	Conn grpc.ClientConnInterface
	// MD is the metadata every call carries (authorization, the hub's
	// routing keys); the client's name is added per call.
	MD metadata.MD
	// Version is agentctl's version, sent to the client and in
	// agentd-client. Empty: "dev".
	Version string
	// Tools limits the tools offered to these names; empty: all.
	Tools []string
	// ReadOnly offers only the tools that change nothing (ReadOnlyTools).
	ReadOnly bool
}

// ErrUnknownTool is returned by New for a name in Options.Tools that is not
// a tool.
var ErrUnknownTool = errors.New("unknown tool")

// AllTools are the tools' names in the order tools/list gives them.
var AllTools = []string{"exec", "sh", "attach", "kill", "read_file", "write_file", "edit_file", "list_dir",
	"grep", "glob", "python", "snapshot_create", "snapshot_restore", "snapshot_diff", "info"}

// ReadOnlyTools are the tools --read-only offers: they change no file and
// start or signal no process. attach is one: it only reads a running or
// finished command's output.
var ReadOnlyTools = []string{"attach", "read_file", "list_dir", "grep", "glob", "snapshot_diff", "info"}

// Server is an MCP server over one agentd connection.
type Server struct {
	mcp     *mcp.Server
	conn    grpc.ClientConnInterface
	md      metadata.MD
	version string
}

// New builds the server and its tools. A name in Tools that is not a tool
// is refused (ErrUnknownTool); with ReadOnly, so is a tool that writes.
func New(o Options) (*Server, error) {
	if o.Conn == nil {
		return nil, errors.New("mcpserver: no connection")
	}
	if o.Version == "" {
		o.Version = "dev"
	}
	offer, err := selectTools(o.Tools, o.ReadOnly)
	if err != nil {
		return nil, err
	}
	s := &Server{conn: o.Conn, md: o.MD.Copy(), version: o.Version}
	s.mcp = mcp.NewServer(&mcp.Implementation{Name: Name, Title: "agentd", Version: o.Version}, &mcp.ServerOptions{
		Instructions: instructions,
		Capabilities: &mcp.ServerCapabilities{Tools: &mcp.ToolCapabilities{}},
	})
	for _, name := range offer {
		s.addTool(name)
	}
	return s, nil
}

const instructions = `Tools of an agentd: a machine or sandbox where you run commands and read and edit files.
Relative paths are relative to the daemon's workspace (see info). exec and sh return the output's head and tail
with the exit code and the process id; a command still running when wait_seconds is up keeps running: follow it
with attach, stop it with kill.`

// CheckTools says whether New would take names and readOnly, without a
// connection: a command line is checked before anything is dialled.
func CheckTools(names []string, readOnly bool) error {
	_, err := selectTools(names, readOnly)
	return err
}

// selectTools returns the tools to offer, in AllTools' order.
func selectTools(names []string, readOnly bool) ([]string, error) {
	allowed := AllTools
	if readOnly {
		allowed = ReadOnlyTools
	}
	if len(names) == 0 {
		return slices.Clone(allowed), nil
	}
	want := map[string]bool{}
	for _, n := range names {
		n = strings.TrimSpace(n)
		switch {
		case n == "":
			continue
		case !slices.Contains(AllTools, n):
			return nil, fmt.Errorf("%w %q: the tools are %s", ErrUnknownTool, n, strings.Join(AllTools, ", "))
		case !slices.Contains(allowed, n):
			return nil, fmt.Errorf("tool %q changes things and --read-only offers only %s", n, strings.Join(ReadOnlyTools, ", "))
		}
		want[n] = true
	}
	if len(want) == 0 {
		return nil, fmt.Errorf("no tool named: the tools are %s", strings.Join(AllTools, ", "))
	}
	var out []string
	for _, n := range allowed {
		if want[n] {
			out = append(out, n)
		}
	}
	return out, nil
}

// MCP is the go-sdk server, for a transport to run.
func (s *Server) MCP() *mcp.Server { return s.mcp }

// Run serves one client over t (stdio) until it disconnects or ctx ends.
func (s *Server) Run(ctx context.Context, t mcp.Transport) error {
	err := s.mcp.Run(ctx, t)
	if ctx.Err() != nil && errors.Is(err, ctx.Err()) {
		return nil
	}
	return err
}

// callCtx is ctx with the target's metadata and the client's name
// (agentd-client: "agentctl-mcp/V (CLIENT V)"), which agentd and the hub
// record beside the actor.
func (s *Server) callCtx(ctx context.Context, req *mcp.CallToolRequest) context.Context {
	md := s.md.Copy()
	if md == nil {
		md = metadata.MD{}
	}
	md.Set(wire.MDClient, s.clientName(req))
	return metadata.NewOutgoingContext(ctx, md)
}

// clientName is the agentd-client value for a call.
func (s *Server) clientName(req *mcp.CallToolRequest) string {
	name := Name + "/" + s.version
	if req == nil {
		return name
	}
	if ci := req.ClientInfo(); ci != nil && ci.Name != "" {
		who := ci.Name
		if ci.Version != "" {
			who += " " + ci.Version
		}
		name += " (" + printable(who) + ")"
	}
	return name
}

// printable keeps what gRPC metadata can carry: printable ASCII.
func printable(s string) string {
	return strings.Map(func(r rune) rune {
		if r < 0x20 || r > 0x7e {
			return '?'
		}
		return r
	}, s)
}

// errText is the one line a failed call reports to the model: the status
// code in words and the daemon's message ("not found: …").
func errText(err error) string { return conformance.Describe(err) }

// text is a tool result of one text block.
func text(s string) *mcp.CallToolResult {
	return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: s}}}
}

// handler adapts a typed tool function: an error becomes an isError
// result with the daemon's message, not a protocol error.
func handler[In, Out any](s *Server, f func(ctx context.Context, req *mcp.CallToolRequest, in In) (*mcp.CallToolResult, Out, error)) mcp.ToolHandlerFor[In, Out] {
	return func(ctx context.Context, req *mcp.CallToolRequest, in In) (*mcp.CallToolResult, Out, error) {
		res, out, err := f(s.callCtx(ctx, req), req, in)
		if err != nil {
			// The go-sdk makes a plain error an isError result whose
			// text is the error's, without structured content.
			var zero Out
			return nil, zero, errors.New(errText(err))
		}
		return res, out, nil
	}
}

// readOnly, destructive and openWorld annotate tools for clients that ask
// before running what changes things.
func annotations(readOnly bool, title string) *mcp.ToolAnnotations {
	a := &mcp.ToolAnnotations{Title: title, ReadOnlyHint: readOnly}
	if !readOnly {
		t := true
		a.DestructiveHint = &t
	}
	return a
}

func (s *Server) addTool(name string) {
	switch name {
	case "exec":
		mcp.AddTool(s.mcp, &mcp.Tool{Name: name, Description: execDoc, Annotations: annotations(false, "Run a program")}, handler(s, s.exec))
	case "sh":
		mcp.AddTool(s.mcp, &mcp.Tool{Name: name, Description: shDoc, Annotations: annotations(false, "Run a shell command")}, handler(s, s.sh))
	case "attach":
		mcp.AddTool(s.mcp, &mcp.Tool{Name: name, Description: attachDoc, Annotations: annotations(true, "Follow a command")}, handler(s, s.attach))
	case "kill":
		mcp.AddTool(s.mcp, &mcp.Tool{Name: name, Description: killDoc, Annotations: annotations(false, "Signal a command")}, handler(s, s.kill))
	case "read_file":
		mcp.AddTool(s.mcp, &mcp.Tool{Name: name, Description: readDoc, Annotations: annotations(true, "Read a file")}, handler(s, s.readFile))
	case "write_file":
		mcp.AddTool(s.mcp, &mcp.Tool{Name: name, Description: writeDoc, Annotations: annotations(false, "Write a file")}, handler(s, s.writeFile))
	case "edit_file":
		mcp.AddTool(s.mcp, &mcp.Tool{Name: name, Description: editDoc, Annotations: annotations(false, "Edit a file")}, handler(s, s.editFile))
	case "list_dir":
		mcp.AddTool(s.mcp, &mcp.Tool{Name: name, Description: listDoc, Annotations: annotations(true, "List a directory")}, handler(s, s.listDir))
	case "grep":
		mcp.AddTool(s.mcp, &mcp.Tool{Name: name, Description: grepDoc, Annotations: annotations(true, "Search file contents")}, handler(s, s.grep))
	case "glob":
		mcp.AddTool(s.mcp, &mcp.Tool{Name: name, Description: globDoc, Annotations: annotations(true, "Find files by name")}, handler(s, s.glob))
	case "python":
		mcp.AddTool(s.mcp, &mcp.Tool{Name: name, Description: pythonDoc, Annotations: annotations(false, "Run Python")}, handler(s, s.python))
	case "snapshot_create":
		mcp.AddTool(s.mcp, &mcp.Tool{Name: name, Description: snapCreateDoc, Annotations: annotations(false, "Snapshot a directory")}, handler(s, s.snapshotCreate))
	case "snapshot_restore":
		mcp.AddTool(s.mcp, &mcp.Tool{Name: name, Description: snapRestoreDoc, Annotations: annotations(false, "Restore a snapshot")}, handler(s, s.snapshotRestore))
	case "snapshot_diff":
		mcp.AddTool(s.mcp, &mcp.Tool{Name: name, Description: snapDiffDoc, Annotations: annotations(true, "Compare snapshots")}, handler(s, s.snapshotDiff))
	case "info":
		mcp.AddTool(s.mcp, &mcp.Tool{Name: name, Description: infoDoc, Annotations: annotations(true, "Describe the machine")}, handler(s, s.info))
	}
}
