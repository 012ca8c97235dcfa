package conformance

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"strings"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"

	agentdv1 "github.com/devdepot-ai/agentd/proto/gen/agentd/v1"
)

func checkWrite(ctx context.Context, s *suite) error {
	const breaks = "the agent cannot create or change files"
	resp, err := s.write(ctx, s.p("write", "sub", "notes.txt"), []byte(fixtureText))
	if err != nil {
		return fail(breaks, "check the workspace's permissions and free disk", err)
	}
	sum := sha256.Sum256([]byte(fixtureText))
	if resp.GetSize() != int64(len(fixtureText)) || resp.GetSha256() != hex.EncodeToString(sum[:]) {
		return fail(breaks, "upgrade agentd", fmt.Sprintf("write reported size %d sha256 %s, want %d %x", resp.GetSize(), resp.GetSha256(), len(fixtureText), sum))
	}
	return nil
}

func checkRead(ctx context.Context, s *suite) error {
	const breaks = "the agent cannot read files back"
	p, err := s.fixture(ctx, "read")
	if err != nil {
		return err
	}
	got, err := s.read(ctx, p)
	if err != nil {
		return fail(breaks, "", err)
	}
	if string(got) != fixtureText {
		return fail(breaks, "upgrade agentd", fmt.Sprintf("read %q, wrote %q", got, fixtureText))
	}
	lines, err := s.files.ReadLines(ctx, &agentdv1.ReadLinesRequest{Path: p, FromLine: 2, Count: 1})
	if err != nil {
		return fail("the agent cannot read line ranges", "", err)
	}
	if len(lines.GetLines()) != 1 || lines.GetLines()[0] != "beta marker-7f3a" || lines.GetTotalLines() != 4 {
		return fail("the agent reads the wrong lines", "upgrade agentd", fmt.Sprintf("lines 2..2 = %q of %d", lines.GetLines(), lines.GetTotalLines()))
	}
	return nil
}

func checkEdit(ctx context.Context, s *suite) error {
	const breaks = "the agent cannot edit files in place"
	p, err := s.fixture(ctx, "edit")
	if err != nil {
		return err
	}
	resp, err := s.files.Edit(ctx, &agentdv1.EditRequest{Path: p,
		Edits: []*agentdv1.Replacement{{OldString: "gamma", NewString: "GAMMA"}}})
	if err != nil {
		return fail(breaks, "", err)
	}
	if resp.GetReplacements() != 1 || !strings.Contains(resp.GetDiff(), "+GAMMA") {
		return fail(breaks, "upgrade agentd", fmt.Sprintf("%d replacements, diff %q", resp.GetReplacements(), resp.GetDiff()))
	}
	_, err = s.files.Edit(ctx, &agentdv1.EditRequest{Path: p,
		Edits: []*agentdv1.Replacement{{OldString: "beta", NewString: "x"}}})
	if status.Code(err) != codes.FailedPrecondition {
		return fail("an ambiguous edit is not refused, so the agent may change the wrong place", "upgrade agentd",
			fmt.Sprintf("editing a string that occurs twice returned %v, want FAILED_PRECONDITION", err))
	}
	got, err := s.read(ctx, p)
	if err != nil || !strings.Contains(string(got), "GAMMA") || !strings.Contains(string(got), "beta\n") {
		return fail(breaks, "upgrade agentd", fmt.Sprintf("content after edits: %q (%v)", got, err))
	}
	return nil
}

func checkSearch(ctx context.Context, s *suite) error {
	const breaks = "the agent cannot search its code"
	p, err := s.fixture(ctx, "search")
	if err != nil {
		return err
	}
	st, err := s.files.Search(ctx, &agentdv1.SearchRequest{Pattern: `marker-[0-9a-f]{4}`, Path: s.p("search")})
	if err != nil {
		return fail(breaks, "", err)
	}
	var found []string
	for {
		m, err := st.Recv()
		if err == io.EOF {
			break
		}
		if err != nil {
			return fail(breaks, "", err)
		}
		if x := m.GetMatch(); x != nil {
			found = append(found, fmt.Sprintf("%s:%d", x.GetPath(), x.GetLineNumber()))
		}
	}
	if want := p + ":2"; len(found) != 1 || found[0] != want {
		return fail(breaks, "upgrade agentd", fmt.Sprintf("found %v, want [%s]", found, want))
	}
	return nil
}

func checkGlob(ctx context.Context, s *suite) error {
	const breaks = "the agent cannot find files by pattern"
	p, err := s.fixture(ctx, "glob")
	if err != nil {
		return err
	}
	resp, err := s.files.Glob(ctx, &agentdv1.GlobRequest{Pattern: "**/*.txt", Path: s.p("glob")})
	if err != nil {
		return fail(breaks, "", err)
	}
	if len(resp.GetPaths()) != 1 || resp.GetPaths()[0] != p {
		return fail(breaks, "upgrade agentd", fmt.Sprintf("**/*.txt matched %v, want [%s]", resp.GetPaths(), p))
	}
	return nil
}

func checkShell(ctx context.Context, s *suite) error {
	const breaks = "the agent cannot run commands"
	r, err := s.shell(ctx, `echo "hello $((40+2))" | tr a-z A-Z; pwd`)
	if err != nil {
		return fail(breaks, "check that the user's shell ("+s.info.GetShell()+") exists and runs", err)
	}
	if want := "HELLO 42\n" + s.dir + "\n"; r.stdout != want {
		return fail(breaks, "check the user's shell and PATH (echo, tr)", fmt.Sprintf("stdout %q, want %q (stderr %q)", r.stdout, want, r.stderr))
	}
	r, err = s.runProc(ctx, &agentdv1.StartRequest{Argv: []string{"echo", "direct"}})
	if err != nil {
		return fail("the agent cannot run programs directly (argv)", "check PATH", err)
	}
	if r.stdout != "direct\n" {
		return fail("the agent cannot run programs directly (argv)", "check PATH", fmt.Sprintf("echo direct wrote %q", r.stdout))
	}
	return nil
}

func checkExitCodes(ctx context.Context, s *suite) error {
	r, err := s.shell(ctx, "exit 3")
	if err != nil {
		return fail("the agent cannot tell whether a command failed", "", err)
	}
	if r.exited.GetExitCode() != 3 {
		return fail("the agent cannot tell whether a command failed", "upgrade agentd", fmt.Sprintf("exit 3 reported as %d", r.exited.GetExitCode()))
	}
	r, err = s.shell(ctx, "kill -KILL $$")
	if err != nil {
		return fail("the agent cannot tell that a command was killed", "", err)
	}
	if r.exited.GetSignal() != "KILL" {
		return fail("the agent cannot tell that a command was killed", "upgrade agentd", fmt.Sprintf("kill -KILL $$ reported %v", r.exited))
	}
	return nil
}

func checkStderr(ctx context.Context, s *suite) error {
	r, err := s.shell(ctx, "echo out; echo err >&2")
	if err != nil {
		return fail("the agent cannot see error output", "", err)
	}
	if r.stdout != "out\n" || r.stderr != "err\n" {
		return fail("the agent cannot tell error output from normal output", "upgrade agentd", fmt.Sprintf("stdout %q stderr %q", r.stdout, r.stderr))
	}
	return nil
}

func checkTimeout(ctx context.Context, s *suite) error {
	const breaks = "a hung command would block the agent or leave processes behind"
	pidfile := s.p("timeout.pid")
	start := time.Now()
	r, err := s.runProc(ctx, &agentdv1.StartRequest{
		Argv:      []string{"sh", "-c", fmt.Sprintf("sleep 300 & echo $! > %s; wait", shellQuote(pidfile))},
		Cwd:       s.dir,
		Timeout:   durationpb.New(time.Second),
		KillGrace: durationpb.New(500 * time.Millisecond),
	})
	if err != nil {
		return fail(breaks, "", err)
	}
	if !r.exited.GetTimedOut() {
		return fail(breaks, "upgrade agentd", fmt.Sprintf("a 1s timeout did not fire: exited %v after %s", r.exited, time.Since(start).Round(time.Millisecond)))
	}
	if r.exited.GetExitCode() == 124 {
		return fail("timeouts are reported as exit 124, which a command can also return", "upgrade agentd", "exit_code 124 invented")
	}
	// A killed orphan may linger a moment as a zombie until it is reaped:
	// that is dead. Give the kill up to 2 s to land.
	probe := fmt.Sprintf(`read p < %s || { echo no-pid; exit 0; }
if [ -r /proc/$p/status ]; then
  while read k v rest; do [ "$k" = State: ] && { echo "$v"; exit 0; }; done < /proc/$p/status
elif kill -0 "$p" 2>/dev/null; then ps -o stat= -p "$p" 2>/dev/null | cut -c1; exit 0
fi
echo gone`, shellQuote(pidfile))
	deadline := time.Now().Add(2 * time.Second)
	for {
		pr, err := s.sh(ctx, probe)
		if err != nil {
			return fail(breaks, "", err)
		}
		switch state := strings.TrimSpace(pr.stdout); state {
		case "no-pid":
			return fail(breaks, "", "the timed-out command never started its background child: "+strings.TrimSpace(pr.stderr))
		case "", "gone", "Z", "X":
			return nil
		}
		if time.Now().After(deadline) {
			return fail(breaks, "agentd must kill the whole process group on timeout; upgrade agentd",
				"the timed-out command's background child is still alive")
		}
		select {
		case <-ctx.Done():
			return fail(breaks, "", ctx.Err())
		case <-time.After(100 * time.Millisecond):
		}
	}
}

func checkPty(ctx context.Context, s *suite) error {
	const breaks = "interactive programs (prompts, pagers, REPLs) cannot run for the agent"
	r, err := s.runProc(ctx, &agentdv1.StartRequest{
		Argv: []string{"sh", "-c", "if [ -t 0 ] && [ -t 1 ]; then echo tty-yes; else echo tty-no; fi; exit 7"},
		Cwd:  s.dir,
		Pty:  &agentdv1.PtySize{Rows: 24, Cols: 80},
	})
	if err != nil {
		return fail(breaks, "check that /dev/pts is mounted and /dev/ptmx usable in the container", err)
	}
	if !strings.Contains(r.pty, "tty-yes") || r.stdout != "" || r.stderr != "" {
		return fail(breaks, "upgrade agentd", fmt.Sprintf("pty output %q, stdout %q, stderr %q; want tty-yes on the pty alone", r.pty, r.stdout, r.stderr))
	}
	if r.exited.GetExitCode() != 7 {
		return fail("the agent cannot tell whether an interactive program failed", "upgrade agentd", fmt.Sprintf("exit 7 in a pty reported %v", r.exited))
	}
	return nil
}

// pyFail phrases a failed Python call: a missing interpreter is a
// precondition the person who built the image or machine must fix.
func pyFail(err error) error {
	if status.Code(err) == codes.FailedPrecondition {
		return fail("every Python cell fails", "install python3 in the image or on the machine's PATH", err)
	}
	return fail("Python cells fail", "", err)
}

func checkPython(ctx context.Context, s *suite) error {
	res, out, err := s.py(ctx, "import sys\nprint('hi')\n6*7", "")
	if err != nil {
		return pyFail(err)
	}
	if res != "42" || out != "hi\n" {
		return fail("Python results come back wrong", "upgrade agentd", fmt.Sprintf("result %q output %q", res, out))
	}
	return nil
}

func checkPythonSession(ctx context.Context, s *suite) error {
	const breaks = "Python sessions forget their variables between turns"
	name := "conformance-" + randHex(4)
	defer func() {
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
		defer cancel()
		_, _ = s.python.CloseSession(cctx, &agentdv1.CloseSessionRequest{Session: name})
	}()
	if _, _, err := s.py(ctx, "x = 41", name); err != nil {
		return pyFail(err)
	}
	res, _, err := s.py(ctx, "x + 1", name)
	if err != nil {
		return fail(breaks, "", err)
	}
	if res != "42" {
		return fail(breaks, "upgrade agentd", fmt.Sprintf("x + 1 = %q, want 42", res))
	}
	return nil
}

func checkSnapshot(ctx context.Context, s *suite) error {
	const breaks = "the agent cannot checkpoint and roll back its work"
	p, err := s.fixture(ctx, "snapshot")
	if err != nil {
		return err
	}
	st, err := s.snaps.Create(ctx, &agentdv1.CreateRequest{Root: s.p("snapshot", "sub"), Label: "conformance check"})
	if err != nil {
		return fail(breaks, "", err)
	}
	var snap *agentdv1.Snapshot
	for {
		m, err := st.Recv()
		if err == io.EOF {
			break
		}
		if err != nil {
			return fail(breaks, "check free disk in agentd's state directory", err)
		}
		if x := m.GetSnapshot(); x != nil {
			snap = x
		}
	}
	if snap == nil {
		return fail(breaks, "upgrade agentd", "Create ended without a snapshot")
	}
	defer func() {
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
		defer cancel()
		_, _ = s.snaps.Delete(cctx, &agentdv1.DeleteRequest{Id: snap.GetId()})
	}()
	if _, err := s.write(ctx, p, []byte("clobbered\n")); err != nil {
		return fail(breaks, "", err)
	}
	rs, err := s.snaps.Restore(ctx, &agentdv1.RestoreRequest{Id: snap.GetId()})
	if err != nil {
		return fail(breaks, "", err)
	}
	for {
		if _, err := rs.Recv(); err == io.EOF {
			break
		} else if err != nil {
			return fail(breaks, "", err)
		}
	}
	after, err := s.read(ctx, p)
	if err != nil {
		return fail(breaks, "", err)
	}
	if !bytes.Equal(after, []byte(fixtureText)) {
		return fail(breaks, "upgrade agentd", fmt.Sprintf("after restore the file holds %q, want %q", after, fixtureText))
	}
	return nil
}
