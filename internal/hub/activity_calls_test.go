package hub_test

import (
	"io"
	"strings"
	"testing"

	"google.golang.org/grpc/metadata"

	"github.com/devdepot-ai/agentd/internal/wire"
	hubv1 "github.com/devdepot-ai/agentd/proto/gen/agentd/hub/v1"
	agentdv1 "github.com/devdepot-ai/agentd/proto/gen/agentd/v1"
)

// The hub records each call it routes itself: the actor from the caller's
// token (and the client program it names), the command, its exit code and
// output read from the proxied stream; the daemon's records of the same
// work are its account, with no actor.
func TestActivityHubRecordsRoutedCalls(t *testing.T) {
	t.Parallel()
	h := startHub(t)
	m := h.startMachine(h.owner)

	code, out, errs := h.agentctl(h.owner, m.id, "sh", "echo routed-out; echo routed-err >&2; exit 3")
	if code != 3 || out != "routed-out\n" {
		t.Fatalf("sh through the hub = %d %q %q", code, out, errs)
	}
	// A client that names itself (an MCP server in agentctl does).
	ctx := metadata.AppendToOutgoingContext(authCtx(t.Context(), h.owner, m.id), wire.MDClient, "agentctl-mcp/1.2 (claude-code 2.0.1)")
	st, err := agentdv1.NewProcessServiceClient(h.conn()).Start(ctx, &agentdv1.StartRequest{Argv: []string{"sh", "-c", "echo via-mcp; kill -TERM $$"}})
	if err != nil {
		t.Fatal(err)
	}
	for {
		if _, err := st.Recv(); err == io.EOF {
			break
		} else if err != nil {
			t.Fatal(err)
		}
	}
	// A call that fails on the machine is recorded with its status.
	if _, err := agentdv1.NewFileServiceClient(h.conn()).Stat(authCtx(t.Context(), h.owner, m.id), &agentdv1.StatRequest{Path: "/nonexistent/x"}); err == nil {
		t.Fatal("Stat of a missing path succeeded")
	}

	isCall := func(cmd string) func(*hubv1.WatchResponse) bool {
		return func(r *hubv1.WatchResponse) bool {
			return r.GetSource() == "hub" && r.GetRecord().GetKind() == wire.KindCall && strings.Contains(r.GetRecord().GetCommand(), cmd)
		}
	}
	got := hubRecords(t, h, m.id, func(rs []*hubv1.WatchResponse) bool {
		return find(rs, isCall("routed-out")) != nil && find(rs, isCall("via-mcp")) != nil &&
			find(rs, func(r *hubv1.WatchResponse) bool {
				return r.GetSource() == "daemon" && r.GetRecord().GetKind() == wire.KindProcessExit && strings.Contains(r.GetRecord().GetCommand(), "via-mcp")
			}) != nil &&
			find(rs, func(r *hubv1.WatchResponse) bool {
				return strings.Contains(r.GetRecord().GetSummary(), "FileService/Stat")
			}) != nil
	})
	sh := find(got, isCall("routed-out")).GetRecord()
	if sh.GetActor() != "tester" || sh.GetExitCode() != 3 || !strings.Contains(string(sh.GetOutput()), "routed-out\n") ||
		!strings.Contains(string(sh.GetOutput()), "routed-err\n") || sh.GetObjectId() == "" || !strings.Contains(sh.GetSummary(), "exit 3") {
		t.Errorf("the hub's record of sh = actor %q exit %d output %q process %q summary %q; want actor tester, exit 3, both outputs",
			sh.GetActor(), sh.GetExitCode(), sh.GetOutput(), sh.GetObjectId(), sh.GetSummary())
	}
	mcp := find(got, isCall("via-mcp")).GetRecord()
	if mcp.GetClient() != "agentctl-mcp/1.2 (claude-code 2.0.1)" || !strings.Contains(mcp.GetSummary(), "killed by") || mcp.GetActor() != "tester" {
		t.Errorf("the hub's record of the MCP client's call = client %q actor %q summary %q; want its client and 'killed by'", mcp.GetClient(), mcp.GetActor(), mcp.GetSummary())
	}
	stat := find(got, func(r *hubv1.WatchResponse) bool {
		return strings.Contains(r.GetRecord().GetSummary(), "FileService/Stat")
	}).GetRecord()
	if stat.GetOutcome() != agentdv1.Outcome_OUTCOME_ERROR || !strings.Contains(stat.GetError(), "NotFound") {
		t.Errorf("the hub's record of a failed Stat = %v %q", stat.GetOutcome(), stat.GetError())
	}
	for _, r := range got {
		if r.GetSource() == "daemon" && r.GetRecord().GetActor() != "" {
			t.Errorf("the daemon's account carries actor %q: %s", r.GetRecord().GetActor(), r.GetRecord().GetSummary())
		}
	}

	// agentctl activity shows whose record is whose.
	_, text, _ := h.agentctl(h.owner, m.id, "activity", "--tail", "100")
	if !strings.Contains(text, "tester via agentctl-mcp/1.2 (claude-code 2.0.1)") || !strings.Contains(text, "reported by the daemon (claims: tester)") {
		t.Errorf("agentctl activity does not tell the hub's records from the daemon's account:\n%s", text)
	}
}
