package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/spf13/cobra"
	"go.uber.org/zap"
	"golang.org/x/term"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/protobuf/proto"

	"github.com/devdepot-ai/agentd/internal/activityproto"
	"github.com/devdepot-ai/agentd/internal/hub"
	"github.com/devdepot-ai/agentd/internal/wire"
	hubv1 "github.com/devdepot-ai/agentd/proto/gen/agentd/hub/v1"
	agentdv1 "github.com/devdepot-ai/agentd/proto/gen/agentd/v1"
)

func newDemoCmd() *cobra.Command {
	var exit bool
	var addr string
	cmd := &cobra.Command{
		Use:   "demo [--exit]",
		Short: "Everything on loopback: a hub, a paired agentd and a scripted chat session",
		Long: `Start a hub on loopback with a fresh store, pair a real agentd to it through
the real pairing flow (code, key pair, tunnel), then drive a scripted chat
session through the hub — write, edit, grep, a streaming command, Python, a
snapshot — showing who asked, what ran, the live output and the outcome, as
a chat would. Then it stays up and prints the agentctl commands to try.

agentd and agentctl run as child processes, the real binaries: they are
looked up next to agenthub, then on $PATH ('make build' puts all three in
bin/).`,
		Example: `  agenthub demo          # stays up afterwards; Ctrl-C stops it
  agenthub demo --exit   # stop after the script`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runDemo(cmd.Context(), addr, exit, cmd.OutOrStdout(), cmd.ErrOrStderr())
		},
	}
	cmd.Flags().BoolVar(&exit, "exit", false, "stop after the scripted session")
	cmd.Flags().StringVar(&addr, "listen", "127.0.0.1:0", "loopback address for the hub")
	return cmd
}

// styles for the transcript; plain when stdout is not a terminal.
type styles struct{ bold, dim, cyan, green, red, off string }

func newStyles(w io.Writer) styles {
	if f, ok := w.(*os.File); ok && term.IsTerminal(int(f.Fd())) {
		return styles{"\033[1m", "\033[2m", "\033[36m", "\033[32m", "\033[31m", "\033[0m"}
	}
	return styles{}
}

// demoMachine is the name the demo's agentd pairs as.
const demoMachine = "demo-laptop"

func runDemo(ctx context.Context, addr string, exit bool, out, errw io.Writer) error {
	tools, err := findDemoTools(exeDir())
	if err != nil {
		return err
	}
	st := newStyles(out)
	tmp, err := os.MkdirTemp("", "agenthub-demo-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	step := func(format string, args ...any) {
		fmt.Fprintf(out, "%s▸ %s%s\n", st.dim, fmt.Sprintf(format, args...), st.off)
	}

	// 1. The hub, with a fresh store and its owner token.
	store, err := openStore(ctx, filepath.Join(tmp, "hub.db"))
	if err != nil {
		return err
	}
	defer store.Close()
	owner, err := initHub(ctx, store, "demo")
	if err != nil {
		return err
	}
	// Sandboxes too, when a Docker engine answers and the built-in image
	// is there; otherwise sbWhy says what the sandbox half needs.
	sbo, closeSandboxes, sbWhy := demoSandboxes(ctx, tmp, tools.agentd)
	defer closeSandboxes()
	h, err := hub.New(ctx, hub.Options{Store: store, Logger: zap.NewNop(), Sandboxes: sbo})
	if err != nil {
		return err
	}
	defer h.Close() // Serve closes it too; this is for a listen that fails
	lis, err := net.Listen("tcp", addr)
	if err != nil {
		return err
	}
	hubURL := "http://" + lis.Addr().String()
	hubCtx, stopHub := context.WithCancel(context.WithoutCancel(ctx))
	hubDone := make(chan error, 1)
	go func() { hubDone <- h.Serve(hubCtx, lis, nil) }()
	defer func() { stopHub(); <-hubDone }()
	step("hub listening on %s (store %s)", hubURL, filepath.Join(tmp, "hub.db"))
	if sbWhy == "" {
		step("sandboxes on: the built-in environment, network none, on the local Docker engine")
		defer func() {
			// Before the hub stops: no container, volume or loop
			// device outlives the demo.
			if err := removeDemoSandboxes(ctx, hubURL, owner); err != nil {
				fmt.Fprintf(errw, "agenthub demo: %v\n", err)
			}
		}()
	} else {
		step("no sandboxes: %s", sbWhy)
	}
	link, err := consoleLink(ctx, store, hubURL)
	if err != nil {
		return err
	}
	step("web console: %s/console/ — sign in once with %s", hubURL, link)

	// admin runs agentctl with the owner's token and returns what it printed.
	admin := func(what string, args ...string) (string, error) {
		var o, e strings.Builder
		if code := tools.ctl(ctx, "", &o, &e, append([]string{"--hub", hubURL, "--token-file", tokenFile(tmp, owner)}, args...)...); code != 0 {
			return "", fmt.Errorf("%s failed (agentctl exit %d): %s", what, code, strings.TrimSpace(e.String()))
		}
		return strings.TrimSpace(o.String()), nil
	}

	// 2. An admin makes a pairing code and a token for the chat back end.
	pairCode, err := admin("creating a pairing code", "admin", "pair-code", "create")
	if err != nil {
		return err
	}
	step("admin: agentctl admin pair-code create  →  %s", pairCode)
	chatToken, err := admin("creating a token", "admin", "token", "create", "--name", "chat-assistant")
	if err != nil {
		return err
	}
	step("admin: agentctl admin token create --name chat-assistant  →  agt_…")

	// 3. The real agentd, a child process, pairs (key pair made there, public
	// key sent) and dials out.
	cfgDir, stateDir, ws := filepath.Join(tmp, "agentd-config"), filepath.Join(tmp, "agentd-state"), filepath.Join(tmp, "workspace")
	if err := os.MkdirAll(ws, 0o755); err != nil {
		return err
	}
	machineID, err := tools.pair(ctx, hubURL, pairCode, demoMachine, cfgDir)
	if err != nil {
		return err
	}
	step("machine: agentd pair --hub %s --code %s  →  %s", hubURL, pairCode, machineID)
	dlog, err := os.Create(filepath.Join(tmp, "agentd.log"))
	if err != nil {
		return err
	}
	defer dlog.Close()
	d, err := tools.runDaemon(dlog, "--workspace", ws, "--state-dir", stateDir, "--config-dir", cfgDir,
		"--socket", filepath.Join(stateDir, "agentd.sock"), "--log-level", "warn")
	if err != nil {
		return err
	}
	defer d.stop(5 * time.Second)
	if err := waitOnline(ctx, hubURL, owner, machineID, d.done); err != nil {
		return fmt.Errorf("%w; agentd's log:\n%s", err, logTail(filepath.Join(tmp, "agentd.log")))
	}
	step("machine: agentd run  →  tunnel up; the hub reaches it without any inbound port")

	// 4. The chat's view of the machine's activity: each step shows the
	// records it caused under its own output, once the one that ends it
	// (ok, error, exit) has come.
	since, err := newestActivity(ctx, hubURL, owner)
	if err != nil {
		return err
	}
	var outMu sync.Mutex
	actCtx, stopAct := context.WithCancel(ctx)
	acts := make(chan *hubv1.WatchResponse, 64)
	actDone := make(chan struct{})
	go func() {
		defer close(actDone)
		followActivity(actCtx, hubURL, owner, since, acts)
	}()
	defer func() { stopAct(); <-actDone }()
	showActivity := func() {
		wait := time.NewTimer(5 * time.Second) // a record lost on the way must not stall the demo
		defer wait.Stop()
		for {
			select {
			case r := <-acts:
				if r.GetSource() == wire.SourceHub {
					// The hub's own record of each call says less than
					// the machine's account of it, which the chat shows.
					continue
				}
				outMu.Lock()
				fmt.Fprintf(out, "%s  ⤷ activity: %s%s\n", st.dim, activityproto.Line(r), st.off)
				outMu.Unlock()
				if o := r.GetRecord().GetOutcome(); o == agentdv1.Outcome_OUTCOME_OK || o == agentdv1.Outcome_OUTCOME_ERROR {
					return
				}
			case <-wait.C:
				return
			case <-ctx.Done():
				return
			}
		}
	}

	// 5. The scripted chat session, through the hub.
	fmt.Fprintf(out, "\n%s── chat session (the assistant works on %s through the hub) ──%s\n", st.bold, demoMachine, st.off)
	say := func(who, text string) {
		outMu.Lock()
		defer outMu.Unlock()
		fmt.Fprintf(out, "\n%s%s:%s %s\n", st.bold, who, st.off, text)
	}
	machine := []string{"--machine", machineID}
	target := machine
	run := func(stdin string, args ...string) int {
		outMu.Lock()
		fmt.Fprintf(out, "%s%s%s\n", st.cyan, commandLine(args, stdin), st.off)
		outMu.Unlock()
		w := &lockedWriter{mu: &outMu, w: out}
		code := tools.ctl(ctx, stdin, w, w, append(append([]string{"--hub", hubURL, "--token-file", tokenFile(tmp, chatToken)}, target...), args...)...)
		color := st.green
		if code != 0 {
			color = st.red
		}
		outMu.Lock()
		fmt.Fprintf(out, "%s  exit %d%s\n", color, code, st.off)
		outMu.Unlock()
		showActivity()
		return code
	}
	failures, steps := 0, 0
	check := func(code int) {
		steps++
		if code != 0 {
			failures++
		}
	}
	say("user", "Set up a tiny Python project and show me it works.")
	say("assistant", "Writing the file.")
	check(run("def greet(name):\n    return \"Hello, \" + name\n\nif __name__ == \"__main__\":\n    print(greet(\"world\"))\n", "write", "-p", "hello/app.py"))
	say("assistant", "Making the greeting friendlier with an exact edit.")
	check(run("", "edit", "hello/app.py", "--old", `"Hello, " + name`, "--new", `f"Hello, {name}!"`))
	say("assistant", "Checking where greet is used.")
	check(run("", "grep", "greet", "hello"))
	say("assistant", "Running it; the output streams line by line.")
	check(run("", "sh", "--cwd", "hello", `for i in 1 2 3; do echo "step $i"; sleep 0.4; done; python3 app.py`))
	say("assistant", "Computing something in a Python session.")
	check(run("", "python", "--session", "demo", "-c", "import statistics\ndata = [3, 1, 4, 1, 5, 9, 2, 6]\nstatistics.mean(data)"))
	say("assistant", "Taking a snapshot before anything risky.")
	check(run("", "snapshot", "create", "hello", "--label", "before refactor"))
	say("assistant", "And a command that hangs is stopped, with its whole process group, at the timeout.")
	steps++
	if code := run("", "sh", "--timeout", "1s", "--grace", "200ms", "sleep 60 & sleep 60"); code != 124 {
		failures++
	}
	laptop := fmt.Sprintf("%s: %d of %d steps as expected", demoMachine, steps-failures, steps)

	// 6. The same chat in a sandbox: the conversation's first call makes
	// it, the rest reuse it.
	sandboxLine := "sandbox: skipped — " + sbWhy
	if sbWhy == "" {
		fmt.Fprintf(out, "\n%s── the same chat in a sandbox (environment builtin, conversation %s) ──%s\n", st.bold, demoConversation, st.off)
		target = []string{"--env", "builtin", "--conversation", demoConversation}
		before, failed := steps, failures
		say("user", "Now try it where it can't touch my laptop.")
		say("assistant", "Writing the file in a sandbox of my own; the first call starts it.")
		check(run("def greet(name):\n    return f\"Hello, {name}!\"\n\nif __name__ == \"__main__\":\n    print(greet(\"sandbox\"))\n", "write", "-p", "hello/app.py"))
		say("assistant", "Running it, and showing where it runs.")
		check(run("", "sh", "--cwd", "hello", `python3 app.py; echo "uid $(id -u) in $(pwd)"; touch /etc/x 2>/dev/null || echo "the root file system is read-only"`))
		say("assistant", "The same Python session API.")
		check(run("", "python", "--session", "demo", "-c", "sum(range(10))"))
		sandboxLine = fmt.Sprintf("sandbox (conversation %s): %d of %d steps as expected", demoConversation, steps-before-(failures-failed), steps-before)
	}
	stopAct()
	<-actDone

	fmt.Fprintf(out, "\n%s── end of the scripted session ──%s\n", st.bold, st.off)
	fmt.Fprintf(out, "  %s\n  %s\n", laptop, sandboxLine)
	if failures > 0 {
		fmt.Fprintf(out, "%s%d step(s) did not succeed.%s\n", st.red, failures, st.off)
	}
	if exit {
		if failures > 0 {
			return fmt.Errorf("%d demo step(s) failed", failures)
		}
		return nil
	}
	fmt.Fprintf(out, `
The hub and the machine stay up. Watch it in the web console: open
%s (a one-time link; agenthub console-link makes
another, or sign in with the token below). In another terminal, try:

  export AGENTD_HUB=%s AGENTD_TOKEN=%s AGENTD_MACHINE=%s
  agentctl machines
  agentctl sh 'ls -la hello && cat hello/app.py'
  agentctl exec -t -- bash                # interactive, in a pty
  agentctl activity -f                    # follow what happens
  agentctl validate                       # the conformance suite, through the hub
%s
Ctrl-C stops the demo and removes %s.
`, link, hubURL, chatToken, machineID, demoSandboxHint(sbWhy), tmp)
	<-ctx.Done()
	return nil
}

// logTail is the end of the log file at path (the demo's temp dir, where
// it lives, is removed when the demo ends).
func logTail(path string) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return err.Error()
	}
	if len(b) > 2048 {
		b = b[len(b)-2048:]
	}
	return strings.TrimSpace(string(b))
}

// tokenFile writes a token to a file in dir (0600) and returns its path, so
// the demo never puts a token in the process environment or argv.
func tokenFile(dir, token string) string {
	p := filepath.Join(dir, "token-"+token[len(token)-8:])
	if _, err := os.Stat(p); err != nil {
		_ = os.WriteFile(p, []byte(token+"\n"), 0o600)
	}
	return p
}

type lockedWriter struct {
	mu *sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

// commandLine is how the transcript shows a step, as a shell would take
// it: an argument of several lines is quoted across those lines, and stdin
// follows as a here-document, so code reads as code.
func commandLine(args []string, stdin string) string {
	line := "$ agentctl " + strings.Join(quoteArgs(args), " ")
	if stdin == "" {
		return line
	}
	if !strings.HasSuffix(stdin, "\n") {
		stdin += "\n"
	}
	return line + " <<'EOF'\n" + stdin + "EOF"
}

func quoteArgs(args []string) []string {
	q := make([]string, len(args))
	for i, a := range args {
		if a == "" || strings.ContainsAny(a, " \t\n'\"$;&|<>()*{}") {
			a = "'" + strings.ReplaceAll(a, "'", `'\''`) + "'"
		}
		q[i] = a
	}
	return q
}

func hubConn(hubURL string) (*grpc.ClientConn, error) {
	return grpc.NewClient(strings.TrimPrefix(hubURL, "http://"), grpc.WithTransportCredentials(insecure.NewCredentials()))
}

// waitOnline waits until the hub lists the machine as online; exited
// closing first (the daemon ended) is an error.
func waitOnline(ctx context.Context, hubURL, token, id string, exited <-chan struct{}) error {
	cc, err := hubConn(hubURL)
	if err != nil {
		return err
	}
	defer cc.Close()
	ctx = metadata.AppendToOutgoingContext(ctx, wire.MDAuthorization, wire.BearerPrefix+token)
	deadline := time.Now().Add(15 * time.Second)
	for time.Now().Before(deadline) {
		resp, err := hubv1.NewAdminServiceClient(cc).ListMachines(ctx, &hubv1.ListMachinesRequest{})
		if err == nil {
			for _, m := range resp.GetMachines() {
				if m.GetId() == id && m.GetStatus() == hubv1.MachineStatus_MACHINE_STATUS_ONLINE {
					return nil
				}
			}
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-exited:
			return errors.New("agentd run exited before it came online")
		case <-time.After(50 * time.Millisecond):
		}
	}
	return errors.New("the paired agentd did not come online within 15s")
}

// newestActivity is the id of the newest activity record the hub has
// stored (0: none), so that the demo shows only what its script causes.
func newestActivity(ctx context.Context, hubURL, token string) (int64, error) {
	cc, err := hubConn(hubURL)
	if err != nil {
		return 0, err
	}
	defer cc.Close()
	ctx = metadata.AppendToOutgoingContext(ctx, wire.MDAuthorization, wire.BearerPrefix+token)
	st, err := hubv1.NewActivityServiceClient(cc).Watch(ctx, &hubv1.WatchRequest{Newest: proto.Uint32(1), NoFollow: true})
	if err != nil {
		return 0, err
	}
	var id int64
	for {
		m, err := st.Recv()
		if errors.Is(err, io.EOF) {
			return id, nil
		}
		if err != nil {
			return 0, fmt.Errorf("read the hub's activity: %w", err)
		}
		id = m.GetId()
	}
}

// followActivity sends to acts every activity record stored after id since
// (with since 0, every record), until ctx ends.
func followActivity(ctx context.Context, hubURL, token string, since int64, acts chan<- *hubv1.WatchResponse) {
	cc, err := hubConn(hubURL)
	if err != nil {
		return
	}
	defer cc.Close()
	ctx = metadata.AppendToOutgoingContext(ctx, wire.MDAuthorization, wire.BearerPrefix+token)
	st, err := hubv1.NewActivityServiceClient(cc).Watch(ctx, &hubv1.WatchRequest{SinceId: since})
	if err != nil {
		return
	}
	for {
		m, err := st.Recv()
		if err != nil {
			return
		}
		select {
		case acts <- m:
		case <-ctx.Done():
			return
		}
	}
}

// demoSandboxHint is what the demo's closing text says about sandboxes.
func demoSandboxHint(why string) string {
	if why != "" {
		return "\nNo sandboxes in this demo: " + why + ".\n"
	}
	return `  agentctl --env builtin --conversation ` + demoConversation + ` sh 'cat hello/app.py'   # the sandbox
  agentctl sandbox ls

From Python (sdk/python): agentd.Hub(os.environ["AGENTD_HUB"], token=…)
  .sandbox(env="builtin", conversation="` + demoConversation + `") works on this hub too.
`
}
