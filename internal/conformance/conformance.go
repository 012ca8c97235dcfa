package conformance

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"path"
	"slices"
	"strings"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	agentdv1 "github.com/devdepot-ai/agentd/proto/gen/agentd/v1"
)

// Check IDs, in the order the checks run. They are stable: reports are
// stored and callers may match on them.
const (
	IDInfo    = "system.info"       // SystemService.Info answers; always runs
	IDScratch = "workspace.scratch" // a scratch directory can be made; always runs

	IDWrite  = "files.write"
	IDRead   = "files.read"
	IDEdit   = "files.edit"
	IDSearch = "files.search"
	IDGlob   = "files.glob"

	IDShell     = "process.shell"
	IDExitCodes = "process.exit-codes"
	IDStderr    = "process.stderr"
	IDTimeout   = "process.timeout"
	IDPty       = "process.pty"

	IDPython        = "python.run"
	IDPythonSession = "python.session"

	IDSnapshot = "snapshot.round-trip"

	// Container checks: only in sandbox mode (or with Options.Sandbox).
	IDSandboxUID        = "sandbox.uid"
	IDReadOnlyRoot      = "sandbox.read-only-root"
	IDWorkspacePath     = "sandbox.workspace-path"
	IDWritableWorkspace = "sandbox.workspace-writable"
	IDWritableTmp       = "sandbox.tmp"
	IDWritableHome      = "sandbox.home"
)

// Result is the outcome of one check.
type Result struct {
	// ID is the check's stable id, one of the ID constants.
	ID string
	// Name is the check's short name, as `agentctl validate` prints it.
	Name string
	// OK is true when the check passed.
	OK bool
	// Breaks says, when the check failed, what breaks for the agent
	// ("every Python cell fails").
	Breaks string
	// Detail is, when the check failed, what the check saw: the error or
	// the wrong answer.
	Detail string
	// Fix says, when the check failed, what to do about it ("install
	// python3 in the image"); empty when Detail says it all.
	Fix string
	// Duration is how long the check took.
	Duration time.Duration
}

// Options configure Run. The zero value runs every check that applies to
// the target, one minute at most each, and removes its scratch directory.
type Options struct {
	// Sandbox runs the container checks whatever mode the target reports.
	// Default: only when SystemService.Info says mode "sandbox".
	Sandbox bool
	// Only, when set, runs just the checks with these IDs, plus IDInfo and
	// IDScratch, which every other check needs. Default: every check.
	Only []string
	// ScratchPrefix names the scratch directory made in the target's
	// workspace: the prefix, then random hex. Default ".agentd-validate-".
	ScratchPrefix string
	// Keep leaves the scratch directory in place for inspection.
	Keep bool
	// CheckTimeout bounds each check. Default: one minute.
	CheckTimeout time.Duration
	// Progress, when set, is called with each result as soon as its check
	// finishes, before the next starts.
	Progress func(Result)
}

// check is one check of the suite.
type check struct {
	id, name string
	sandbox  bool // a container check
	run      func(ctx context.Context, s *suite) error
}

// checks are the checks after IDInfo and IDScratch, in the order they run.
// Each works in its own subdirectory of the scratch directory, so any
// subset can run alone.
var checks = []check{
	{IDWrite, "write", false, checkWrite},
	{IDRead, "read", false, checkRead},
	{IDEdit, "edit", false, checkEdit},
	{IDSearch, "search", false, checkSearch},
	{IDGlob, "glob", false, checkGlob},
	{IDShell, "shell", false, checkShell},
	{IDExitCodes, "exit codes", false, checkExitCodes},
	{IDStderr, "stderr", false, checkStderr},
	{IDTimeout, "timeout", false, checkTimeout},
	{IDPty, "pty", false, checkPty},
	{IDPython, "python", false, checkPython},
	{IDPythonSession, "python session", false, checkPythonSession},
	{IDSnapshot, "snapshot", false, checkSnapshot},
	{IDSandboxUID, "sandbox uid", true, checkSandboxUID},
	{IDReadOnlyRoot, "read-only root", true, checkReadOnlyRoot},
	{IDWorkspacePath, "workspace path", true, checkWorkspacePath},
	{IDWritableWorkspace, "writable workspace", true, checkWritableWorkspace},
	{IDWritableTmp, "writable /tmp", true, checkWritableTmp},
	{IDWritableHome, "writable home", true, checkWritableHome},
}

// suite holds the clients and what one Run learned along the way.
type suite struct {
	opts   Options
	files  agentdv1.FileServiceClient
	procs  agentdv1.ProcessServiceClient
	python agentdv1.PythonServiceClient
	snaps  agentdv1.SnapshotServiceClient
	sys    agentdv1.SystemServiceClient
	info   *agentdv1.InfoResponse // set by IDInfo
	dir    string                 // scratch directory, absolute; set by IDScratch
}

// Run runs the suite against the agentd behind cc and returns one Result
// per check that ran, in order. Calls carry ctx, so credentials can ride
// in its outgoing metadata (metadata.NewOutgoingContext). When Info or the
// scratch directory fails nothing else can work, and Run stops there; it
// also stops early once ctx is done.
func Run(ctx context.Context, cc grpc.ClientConnInterface, opts Options) []Result {
	if opts.ScratchPrefix == "" {
		opts.ScratchPrefix = ".agentd-validate-"
	}
	if opts.CheckTimeout <= 0 {
		opts.CheckTimeout = time.Minute
	}
	s := &suite{
		opts:   opts,
		files:  agentdv1.NewFileServiceClient(cc),
		procs:  agentdv1.NewProcessServiceClient(cc),
		python: agentdv1.NewPythonServiceClient(cc),
		snaps:  agentdv1.NewSnapshotServiceClient(cc),
		sys:    agentdv1.NewSystemServiceClient(cc),
	}
	var results []Result
	do := func(c check) bool {
		r := s.do(ctx, c)
		results = append(results, r)
		if opts.Progress != nil {
			opts.Progress(r)
		}
		return r.OK
	}
	if !do(check{id: IDInfo, name: "info", run: checkInfo}) {
		return results
	}
	if !do(check{id: IDScratch, name: "scratch dir", run: checkScratch}) {
		return results
	}
	if !opts.Keep {
		defer s.removeScratch(ctx)
	}
	sandbox := opts.Sandbox || s.info.GetMode() == "sandbox"
	for _, c := range checks {
		if ctx.Err() != nil {
			break
		}
		if (c.sandbox && !sandbox) || (len(opts.Only) > 0 && !slices.Contains(opts.Only, c.id)) {
			continue
		}
		do(c)
	}
	return results
}

// do runs one check within the check timeout.
func (s *suite) do(ctx context.Context, c check) Result {
	cctx, cancel := context.WithTimeout(ctx, s.opts.CheckTimeout)
	defer cancel()
	start := time.Now()
	err := c.run(cctx, s)
	r := Result{ID: c.id, Name: c.name, OK: err == nil, Duration: time.Since(start)}
	if err != nil {
		var f *failure
		if !errors.As(err, &f) {
			f = &failure{breaks: "the check could not run", detail: err.Error()}
		}
		r.Breaks, r.Detail, r.Fix = f.breaks, f.detail, f.fix
	}
	return r
}

// removeScratch removes the scratch directory, even when ctx is done.
func (s *suite) removeScratch(ctx context.Context) {
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
	defer cancel()
	_, _ = s.files.Remove(cctx, &agentdv1.RemoveRequest{Path: s.dir, Recursive: true})
}

// failure is a failed check, phrased for the person who has to fix it.
type failure struct{ breaks, detail, fix string }

func (f *failure) Error() string { return f.breaks + ": " + f.detail }

// fail makes a failure: what breaks, how to fix it, and the cause (an
// error, or what was seen instead of what was expected). An error that
// says the target lacks the call or went away gets the fix for that.
func fail(breaks, fix string, cause any) error {
	var detail string
	switch c := cause.(type) {
	case error:
		detail = Describe(c)
		switch status.Code(c) {
		case codes.Unimplemented:
			fix = "upgrade agentd on the target: this version does not implement it"
		case codes.Unavailable:
			fix = "the target went away mid-check; check that it is running and reachable"
		}
	default:
		detail = fmt.Sprint(c)
	}
	return &failure{breaks: breaks, detail: detail, fix: fix}
}

// Describe says what went wrong with a call in one line for a person,
// without gRPC's framing. An error about the call itself (who may make it,
// whether the target answered, in time) reads as the status code in words
// and the message: "permission denied: token t is a member token; …",
// "unavailable: machine m-1 is offline …". An error about what the call
// asked for (not found, invalid argument, failed precondition, …) is its
// message alone, which says what is wrong by itself ("/x does not exist;
// use Write to create it"). The words are left out too when the message
// already says them. An error that wraps a status keeps its context
// ("dial hub: unavailable: …"). agentctl prints every error this way.
func Describe(err error) string {
	var se interface{ GRPCStatus() *status.Status }
	if !errors.As(err, &se) || se.GRPCStatus() == nil {
		return err.Error()
	}
	text := describeStatus(se.GRPCStatus())
	if inner, ok := se.(error); ok && inner != err {
		return strings.Replace(err.Error(), inner.Error(), text, 1)
	}
	return text
}

func describeStatus(st *status.Status) string {
	msg := st.Message()
	if st.Code() == codes.Unavailable {
		// grpc-go's words for a failed dial.
		if m, ok := strings.CutPrefix(msg, `connection error: desc = "`); ok {
			msg = strings.TrimPrefix(strings.TrimSuffix(m, `"`), "transport: Error while dialing: ")
		}
	}
	if msg == "" {
		return spaced(st.Code())
	}
	words := codeWords(st.Code())
	if words == "" || strings.Contains(strings.ToLower(msg), words) {
		return msg
	}
	return words + ": " + msg
}

// codeWords is how Describe names a status code: in words, as a person
// writes it ("permission denied"), for the codes about the call itself;
// "" for the codes whose message is the whole story.
func codeWords(c codes.Code) string {
	switch c {
	case codes.OK, codes.Unknown, codes.InvalidArgument, codes.NotFound, codes.AlreadyExists,
		codes.FailedPrecondition, codes.OutOfRange:
		return ""
	}
	return spaced(c)
}

// spaced is a code's name in lower-case words: "permission denied".
func spaced(c codes.Code) string {
	name := c.String() // "PermissionDenied"; "Code(42)" for a code gRPC does not know
	var b strings.Builder
	for i, r := range name {
		if i > 0 && r >= 'A' && r <= 'Z' {
			b.WriteByte(' ')
		}
		b.WriteRune(r)
	}
	return strings.ToLower(b.String())
}

func checkInfo(ctx context.Context, s *suite) error {
	info, err := s.sys.Info(ctx, &agentdv1.InfoRequest{})
	if err != nil {
		return fail("the agent cannot reach this environment at all", "check the target address, token and that agentd is running", err)
	}
	if info.GetWorkspace() == "" || info.GetVersion() == "" {
		return fail("the agent cannot tell where its files live", "upgrade agentd", "Info has no workspace or version")
	}
	s.info = info
	return nil
}

func checkScratch(ctx context.Context, s *suite) error {
	dir := path.Join(s.info.GetWorkspace(), s.opts.ScratchPrefix+randHex(4))
	if _, err := s.files.MakeDir(ctx, &agentdv1.MakeDirRequest{Path: dir, Parents: true}); err != nil {
		return fail("the agent cannot create files in its workspace "+s.info.GetWorkspace(),
			"make the workspace writable by the user agentd runs as", err)
	}
	s.dir = dir
	return nil
}

// p returns a path in the scratch directory.
func (s *suite) p(elem ...string) string { return path.Join(append([]string{s.dir}, elem...)...) }

func shellQuote(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }

func randHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}
