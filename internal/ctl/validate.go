package ctl

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"path"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"

	agentdv1 "github.com/devdepot-ai/agentd/proto/gen/agentd/v1"
)

// check is one conformance check: what an agent depends on, and how to fix
// it when it breaks.
type check struct {
	name string
	run  func(ctx context.Context, v *validator) error
}

// checkResult is a check's outcome, as printed.
type checkResult struct {
	Name   string `json:"name"`
	Passed bool   `json:"passed"`
	Detail string `json:"detail,omitempty"`
}

// fixError is a failure phrased for the person who has to fix it: what
// breaks for the agent, and what to do.
type fixError struct{ impact, cause, fix string }

func (e *fixError) Error() string {
	s := e.impact + ": " + e.cause
	if e.fix != "" {
		s += "; " + e.fix
	}
	return s
}

func fail(impact, fix string, cause any) error {
	var msg string
	switch c := cause.(type) {
	case error:
		msg = describe(c)
		switch status.Code(c) {
		case codes.Unimplemented:
			fix = "upgrade agentd on the target: this version does not implement it"
		case codes.Unavailable:
			fix = "the target went away mid-check; check that it is running and reachable"
		}
	default:
		msg = fmt.Sprint(c)
	}
	return &fixError{impact: impact, cause: msg, fix: fix}
}

// validator holds the clients and the scratch directory of one run.
type validator struct {
	files  agentdv1.FileServiceClient
	procs  agentdv1.ProcessServiceClient
	python agentdv1.PythonServiceClient
	snaps  agentdv1.SnapshotServiceClient
	sys    agentdv1.SystemServiceClient
	info   *agentdv1.InfoResponse
	dir    string // scratch directory, absolute
}

func (a *app) validateCmd() *cobra.Command {
	var keep bool
	cmd := &cobra.Command{
		Use:   "validate",
		Short: "Run the conformance suite: every capability an agent depends on",
		Long: `Check that the target gives an agent everything it depends on: write, read,
edit, search, glob, shell, exit codes, stderr, timeouts that kill the whole
process group, Python (one-off and sessions), snapshot round trip, system
info — and, in sandbox mode, the container's shape (uid 1000, read-only root,
writable workspace and /tmp).

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
			ctx := c.ctx(cmd.Context())
			v := &validator{
				files:  agentdv1.NewFileServiceClient(c),
				procs:  agentdv1.NewProcessServiceClient(c),
				python: agentdv1.NewPythonServiceClient(c),
				snaps:  agentdv1.NewSnapshotServiceClient(c),
				sys:    agentdv1.NewSystemServiceClient(c),
			}
			results := v.run(ctx, keep, func(r checkResult) {
				if a.json {
					return
				}
				if r.Passed {
					fmt.Fprintf(a.io.Out, "PASS  %-18s %s\n", r.Name, r.Detail)
				} else {
					fmt.Fprintf(a.io.Out, "FAIL  %-18s %s\n", r.Name, r.Detail)
				}
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

// run runs every check in order, calling report after each.
func (v *validator) run(ctx context.Context, keep bool, report func(checkResult)) []checkResult {
	var results []checkResult
	do := func(c check) {
		cctx, cancel := context.WithTimeout(ctx, 60*time.Second)
		defer cancel()
		start := time.Now()
		err := c.run(cctx, v)
		r := checkResult{Name: c.name, Passed: err == nil}
		if err != nil {
			r.Detail = err.Error()
		} else {
			r.Detail = fmt.Sprintf("(%s)", time.Since(start).Round(time.Millisecond))
		}
		results = append(results, r)
		report(r)
	}
	do(check{"info", checkInfo})
	if v.info == nil {
		return results // nothing else can work
	}
	do(check{"scratch dir", checkScratch})
	if v.dir == "" {
		return results
	}
	if !keep {
		defer func() {
			cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
			defer cancel()
			_, _ = v.files.Remove(cctx, &agentdv1.RemoveRequest{Path: v.dir, Recursive: true})
		}()
	}
	for _, c := range []check{
		{"write", checkWrite}, {"read", checkRead}, {"edit", checkEdit}, {"search", checkSearch},
		{"glob", checkGlob}, {"shell", checkShell}, {"exit codes", checkExitCodes}, {"stderr", checkStderr},
		{"timeout", checkTimeout}, {"python", checkPython}, {"python session", checkPythonSession},
		{"snapshot", checkSnapshot},
	} {
		do(c)
	}
	if v.info.GetMode() == "sandbox" {
		for _, c := range []check{{"sandbox uid", checkSandboxUID}, {"read-only root", checkReadOnlyRoot},
			{"writable workspace", checkWritableWorkspace}, {"writable /tmp", checkWritableTmp}} {
			do(c)
		}
	}
	return results
}

func checkInfo(ctx context.Context, v *validator) error {
	info, err := v.sys.Info(ctx, &agentdv1.InfoRequest{})
	if err != nil {
		return fail("the agent cannot reach this environment at all", "check the target address, token and that agentd is running", err)
	}
	if info.GetWorkspace() == "" || info.GetVersion() == "" {
		return fail("the agent cannot tell where its files live", "upgrade agentd", "Info has no workspace or version")
	}
	v.info = info
	return nil
}

func checkScratch(ctx context.Context, v *validator) error {
	dir := path.Join(v.info.GetWorkspace(), ".agentd-validate-"+randHex(4))
	if _, err := v.files.MakeDir(ctx, &agentdv1.MakeDirRequest{Path: dir, Parents: true}); err != nil {
		return fail("the agent cannot create files in its workspace "+v.info.GetWorkspace(),
			"make the workspace writable by the user agentd runs as", err)
	}
	v.dir = dir
	return nil
}

const validateText = "alpha\nbeta marker-7f3a\ngamma\nbeta\n"

func (v *validator) p(name string) string { return path.Join(v.dir, name) }

func (v *validator) write(ctx context.Context, p string, data []byte) (*agentdv1.WriteResponse, error) {
	st, err := v.files.Write(ctx)
	if err != nil {
		return nil, err
	}
	if err := st.Send(&agentdv1.WriteRequest{Msg: &agentdv1.WriteRequest_Header{Header: &agentdv1.WriteHeader{Path: p, CreateParents: true}}}); err != nil {
		_, err = st.CloseAndRecv()
		return nil, err
	}
	if err := st.Send(&agentdv1.WriteRequest{Msg: &agentdv1.WriteRequest_Data{Data: data}}); err != nil {
		_, err = st.CloseAndRecv()
		return nil, err
	}
	return st.CloseAndRecv()
}

func (v *validator) read(ctx context.Context, p string) ([]byte, error) {
	st, err := v.files.Read(ctx, &agentdv1.ReadRequest{Path: p})
	if err != nil {
		return nil, err
	}
	var buf bytes.Buffer
	for {
		m, err := st.Recv()
		if err == io.EOF {
			return buf.Bytes(), nil
		}
		if err != nil {
			return nil, err
		}
		buf.Write(m.GetData())
	}
}

func checkWrite(ctx context.Context, v *validator) error {
	const impact = "the agent cannot create or change files"
	resp, err := v.write(ctx, v.p("sub/notes.txt"), []byte(validateText))
	if err != nil {
		return fail(impact, "check the workspace's permissions and free disk", err)
	}
	sum := sha256.Sum256([]byte(validateText))
	if resp.GetSize() != int64(len(validateText)) || resp.GetSha256() != hex.EncodeToString(sum[:]) {
		return fail(impact, "upgrade agentd", fmt.Sprintf("write reported size %d sha256 %s, want %d %x", resp.GetSize(), resp.GetSha256(), len(validateText), sum))
	}
	return nil
}

func checkRead(ctx context.Context, v *validator) error {
	const impact = "the agent cannot read files back"
	got, err := v.read(ctx, v.p("sub/notes.txt"))
	if err != nil {
		return fail(impact, "", err)
	}
	if string(got) != validateText {
		return fail(impact, "upgrade agentd", fmt.Sprintf("read %q, wrote %q", got, validateText))
	}
	lines, err := v.files.ReadLines(ctx, &agentdv1.ReadLinesRequest{Path: v.p("sub/notes.txt"), FromLine: 2, Count: 1})
	if err != nil {
		return fail("the agent cannot read line ranges", "", err)
	}
	if len(lines.GetLines()) != 1 || lines.GetLines()[0] != "beta marker-7f3a" || lines.GetTotalLines() != 4 {
		return fail("the agent reads the wrong lines", "upgrade agentd", fmt.Sprintf("lines 2..2 = %q of %d", lines.GetLines(), lines.GetTotalLines()))
	}
	return nil
}

func checkEdit(ctx context.Context, v *validator) error {
	const impact = "the agent cannot edit files in place"
	resp, err := v.files.Edit(ctx, &agentdv1.EditRequest{Path: v.p("sub/notes.txt"),
		Edits: []*agentdv1.Replacement{{OldString: "gamma", NewString: "GAMMA"}}})
	if err != nil {
		return fail(impact, "", err)
	}
	if resp.GetReplacements() != 1 || !strings.Contains(resp.GetDiff(), "+GAMMA") {
		return fail(impact, "upgrade agentd", fmt.Sprintf("%d replacements, diff %q", resp.GetReplacements(), resp.GetDiff()))
	}
	_, err = v.files.Edit(ctx, &agentdv1.EditRequest{Path: v.p("sub/notes.txt"),
		Edits: []*agentdv1.Replacement{{OldString: "beta", NewString: "x"}}})
	if status.Code(err) != codes.FailedPrecondition {
		return fail("an ambiguous edit is not refused, so the agent may change the wrong place", "upgrade agentd",
			fmt.Sprintf("editing a string that occurs twice returned %v, want FAILED_PRECONDITION", err))
	}
	got, err := v.read(ctx, v.p("sub/notes.txt"))
	if err != nil || !strings.Contains(string(got), "GAMMA") || !strings.Contains(string(got), "beta\n") {
		return fail(impact, "upgrade agentd", fmt.Sprintf("content after edits: %q (%v)", got, err))
	}
	return nil
}

func checkSearch(ctx context.Context, v *validator) error {
	const impact = "the agent cannot search its code"
	st, err := v.files.Search(ctx, &agentdv1.SearchRequest{Pattern: `marker-[0-9a-f]{4}`, Path: v.dir})
	if err != nil {
		return fail(impact, "", err)
	}
	var found []string
	for {
		m, err := st.Recv()
		if err == io.EOF {
			break
		}
		if err != nil {
			return fail(impact, "", err)
		}
		if x := m.GetMatch(); x != nil {
			found = append(found, fmt.Sprintf("%s:%d", x.GetPath(), x.GetLineNumber()))
		}
	}
	if want := v.p("sub/notes.txt") + ":2"; len(found) != 1 || found[0] != want {
		return fail(impact, "upgrade agentd", fmt.Sprintf("found %v, want [%s]", found, want))
	}
	return nil
}

func checkGlob(ctx context.Context, v *validator) error {
	const impact = "the agent cannot find files by pattern"
	resp, err := v.files.Glob(ctx, &agentdv1.GlobRequest{Pattern: "**/*.txt", Path: v.dir})
	if err != nil {
		return fail(impact, "", err)
	}
	if len(resp.GetPaths()) != 1 || resp.GetPaths()[0] != v.p("sub/notes.txt") {
		return fail(impact, "upgrade agentd", fmt.Sprintf("**/*.txt matched %v", resp.GetPaths()))
	}
	return nil
}

// procResult is a finished process as the checks see it.
type procResult struct {
	stdout, stderr string
	exited         *agentdv1.Exited
}

func (v *validator) runProc(ctx context.Context, req *agentdv1.StartRequest) (*procResult, error) {
	st, err := v.procs.Start(ctx, req)
	if err != nil {
		return nil, err
	}
	var r procResult
	var out, errb strings.Builder
	for {
		m, err := st.Recv()
		if err == io.EOF {
			return nil, errors.New("the event stream ended without an exit event")
		}
		if err != nil {
			return nil, err
		}
		ev := m.GetEvent()
		if o := ev.GetOutput(); o != nil {
			if o.GetStream() == agentdv1.OutputStream_OUTPUT_STREAM_STDERR {
				errb.Write(o.GetData())
			} else {
				out.Write(o.GetData())
			}
		}
		if x := ev.GetExited(); x != nil {
			r.stdout, r.stderr, r.exited = out.String(), errb.String(), x
			return &r, nil
		}
	}
}

func (v *validator) sh(ctx context.Context, command string) (*procResult, error) {
	return v.runProc(ctx, &agentdv1.StartRequest{Command: command, Cwd: v.dir})
}

func checkShell(ctx context.Context, v *validator) error {
	const impact = "the agent cannot run commands"
	r, err := v.sh(ctx, `echo "hello $((40+2))" | tr a-z A-Z; pwd`)
	if err != nil {
		return fail(impact, "check that the user's shell ("+v.info.GetShell()+") exists and runs", err)
	}
	if want := "HELLO 42\n" + v.dir + "\n"; r.stdout != want {
		return fail(impact, "check the user's shell and PATH (echo, tr)", fmt.Sprintf("stdout %q, want %q", r.stdout, want))
	}
	r, err = v.runProc(ctx, &agentdv1.StartRequest{Argv: []string{"echo", "direct"}})
	if err != nil || r.stdout != "direct\n" {
		return fail("the agent cannot run programs directly (argv)", "check PATH", fmt.Sprintf("%v %v", r, err))
	}
	return nil
}

func checkExitCodes(ctx context.Context, v *validator) error {
	r, err := v.sh(ctx, "exit 3")
	if err != nil {
		return fail("the agent cannot tell whether a command failed", "", err)
	}
	if r.exited.GetExitCode() != 3 {
		return fail("the agent cannot tell whether a command failed", "upgrade agentd", fmt.Sprintf("exit 3 reported as %d", r.exited.GetExitCode()))
	}
	r, err = v.sh(ctx, "kill -KILL $$")
	if err != nil || r.exited.GetSignal() != "KILL" {
		return fail("the agent cannot tell that a command was killed", "upgrade agentd", fmt.Sprintf("kill -KILL $$ reported %v (%v)", r.GetExited(), err))
	}
	return nil
}

func (r *procResult) GetExited() *agentdv1.Exited {
	if r == nil {
		return nil
	}
	return r.exited
}

func checkStderr(ctx context.Context, v *validator) error {
	r, err := v.sh(ctx, "echo out; echo err >&2")
	if err != nil {
		return fail("the agent cannot see error output", "", err)
	}
	if r.stdout != "out\n" || r.stderr != "err\n" {
		return fail("the agent cannot tell error output from normal output", "upgrade agentd", fmt.Sprintf("stdout %q stderr %q", r.stdout, r.stderr))
	}
	return nil
}

func checkTimeout(ctx context.Context, v *validator) error {
	const impact = "a hung command would block the agent or leave processes behind"
	pidfile := v.p("grandchild.pid")
	start := time.Now()
	r, err := v.runProc(ctx, &agentdv1.StartRequest{
		Command:   fmt.Sprintf("sleep 300 & echo $! > %s; wait", shellQuote(pidfile)),
		Cwd:       v.dir,
		Timeout:   durationpb.New(time.Second),
		KillGrace: durationpb.New(500 * time.Millisecond),
	})
	if err != nil {
		return fail(impact, "", err)
	}
	if !r.exited.GetTimedOut() {
		return fail(impact, "upgrade agentd", fmt.Sprintf("a 1s timeout did not fire: exited %v after %s", r.exited, time.Since(start).Round(time.Millisecond)))
	}
	if r.exited.GetExitCode() == 124 {
		return fail("timeouts are reported as exit 124, which a command can also return", "upgrade agentd", "exit_code 124 invented")
	}
	// A killed orphan may linger a moment as a zombie until init reaps it:
	// that is dead. Give the kill up to 2 s to land.
	chk, err := v.sh(ctx, fmt.Sprintf(`p=$(cat %s); i=0
while :; do
  if [ -d /proc/$p ]; then s=$(sed -n 's/^State:[[:space:]]*\(.\).*/\1/p' /proc/$p/status 2>/dev/null)
  elif kill -0 "$p" 2>/dev/null; then s=$(ps -o stat= -p "$p" 2>/dev/null | cut -c1); [ -n "$s" ] || s=R
  else s=; fi
  case "$s" in ""|Z|X) echo dead; break;; esac
  i=$((i+1)); [ $i -ge 20 ] && { echo alive; break; }
  sleep 0.1
done`, shellQuote(pidfile)))
	if err != nil {
		return fail(impact, "", err)
	}
	if strings.TrimSpace(chk.stdout) != "dead" {
		return fail(impact, "agentd must kill the whole process group on timeout; upgrade agentd",
			"the timed-out command's background child is still alive")
	}
	return nil
}

func shellQuote(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }

func (v *validator) py(ctx context.Context, code, session string) (result string, out string, err error) {
	st, err := v.python.Run(ctx, &agentdv1.RunRequest{Code: code, Session: session, Timeout: durationpb.New(30 * time.Second)})
	if err != nil {
		return "", "", err
	}
	var sb strings.Builder
	for {
		m, err := st.Recv()
		if err == io.EOF {
			return result, sb.String(), nil
		}
		if err != nil {
			return "", "", err
		}
		switch {
		case m.GetOutput() != nil:
			sb.Write(m.GetOutput().GetData())
		case m.GetResult() != nil:
			result = m.GetResult().GetRepr()
		case m.GetError() != nil:
			e := m.GetError()
			return "", "", fmt.Errorf("%s: %s", e.GetName(), e.GetValue())
		}
	}
}

func pyFix(err error) error {
	if status.Code(err) == codes.FailedPrecondition {
		return fail("Python snippets fail on every turn", "install python3 in the image or on the machine's PATH", err)
	}
	return fail("Python snippets fail", "", err)
}

func checkPython(ctx context.Context, v *validator) error {
	res, out, err := v.py(ctx, "import sys\nprint('hi')\n6*7", "")
	if err != nil {
		return pyFix(err)
	}
	if res != "42" || out != "hi\n" {
		return fail("Python results come back wrong", "upgrade agentd", fmt.Sprintf("result %q output %q", res, out))
	}
	return nil
}

func checkPythonSession(ctx context.Context, v *validator) error {
	name := "validate-" + randHex(4)
	defer func() {
		_, _ = v.python.CloseSession(context.WithoutCancel(ctx), &agentdv1.CloseSessionRequest{Session: name})
	}()
	if _, _, err := v.py(ctx, "x = 41", name); err != nil {
		return pyFix(err)
	}
	res, _, err := v.py(ctx, "x + 1", name)
	if err != nil {
		return fail("Python sessions forget their variables between turns", "", err)
	}
	if res != "42" {
		return fail("Python sessions forget their variables between turns", "upgrade agentd", fmt.Sprintf("x + 1 = %q, want 42", res))
	}
	return nil
}

func checkSnapshot(ctx context.Context, v *validator) error {
	const impact = "the agent cannot checkpoint and roll back its work"
	st, err := v.snaps.Create(ctx, &agentdv1.CreateRequest{Root: v.p("sub"), Label: "agentctl validate"})
	if err != nil {
		return fail(impact, "", err)
	}
	var snap *agentdv1.Snapshot
	for {
		m, err := st.Recv()
		if err == io.EOF {
			break
		}
		if err != nil {
			return fail(impact, "check free disk in agentd's state directory", err)
		}
		if s := m.GetSnapshot(); s != nil {
			snap = s
		}
	}
	if snap == nil {
		return fail(impact, "upgrade agentd", "Create ended without a snapshot")
	}
	defer func() { _, _ = v.snaps.Delete(context.WithoutCancel(ctx), &agentdv1.DeleteRequest{Id: snap.GetId()}) }()
	before, err := v.read(ctx, v.p("sub/notes.txt"))
	if err != nil {
		return fail(impact, "", err)
	}
	if _, err := v.write(ctx, v.p("sub/notes.txt"), []byte("clobbered\n")); err != nil {
		return fail(impact, "", err)
	}
	rs, err := v.snaps.Restore(ctx, &agentdv1.RestoreRequest{Id: snap.GetId()})
	if err != nil {
		return fail(impact, "", err)
	}
	for {
		if _, err := rs.Recv(); err == io.EOF {
			break
		} else if err != nil {
			return fail(impact, "", err)
		}
	}
	after, err := v.read(ctx, v.p("sub/notes.txt"))
	if err != nil || !bytes.Equal(before, after) {
		return fail(impact, "upgrade agentd", fmt.Sprintf("after restore the file holds %q, want %q (%v)", after, before, err))
	}
	return nil
}

func checkSandboxUID(ctx context.Context, v *validator) error {
	if v.info.GetUid() != 1000 {
		return fail("the sandbox does not run as the unprivileged user", "run the container as uid 1000 (USER 1000)", fmt.Sprintf("uid is %d", v.info.GetUid()))
	}
	return nil
}

func checkReadOnlyRoot(ctx context.Context, v *validator) error {
	r, err := v.sh(ctx, "f=/.agentd-validate-$$; if touch $f 2>/dev/null; then rm -f $f; echo writable; else echo read-only; fi")
	if err != nil {
		return fail("cannot check the root file system", "", err)
	}
	if strings.TrimSpace(r.stdout) != "read-only" {
		return fail("the agent can change the sandbox image itself", "start the container with a read-only root (--read-only)", "/ is writable")
	}
	return nil
}

func (v *validator) writable(ctx context.Context, dir, fix string) error {
	r, err := v.sh(ctx, fmt.Sprintf("f=%s/.agentd-validate-$$ && echo ok > $f && cat $f && rm $f", shellQuote(dir)))
	if err != nil {
		return fail("cannot check "+dir, "", err)
	}
	if strings.TrimSpace(r.stdout) != "ok" {
		return fail("the agent cannot write to "+dir, fix, strings.TrimSpace(r.stderr))
	}
	return nil
}

func checkWritableWorkspace(ctx context.Context, v *validator) error {
	return v.writable(ctx, v.info.GetWorkspace(), "mount a writable volume at "+v.info.GetWorkspace()+" owned by uid 1000")
}

func checkWritableTmp(ctx context.Context, v *validator) error {
	return v.writable(ctx, "/tmp", "mount a tmpfs at /tmp (--tmpfs /tmp)")
}

func randHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}
