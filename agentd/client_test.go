package agentd

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/grpc/metadata"

	"github.com/devdepot-ai/agentd/internal/activity"
	"github.com/devdepot-ai/agentd/internal/wire"
	agentdv1 "github.com/devdepot-ai/agentd/proto/gen/agentd/v1"
)

// TestActivityRecordsClient: the client program a caller names in
// agentd-client (agentctl mcp sends "agentctl-mcp/V (CLIENT V)") is kept
// in the daemon's own activity log beside the actor, cleaned like a claim,
// and shown on `agentd log`'s line.
func TestActivityRecordsClient(t *testing.T) {
	t.Parallel()
	s := newTestServer(t, Options{})
	files := agentdv1.NewFileServiceClient(s.Conn)
	for _, c := range []struct {
		path, client, want string
	}{
		{"none", "", ""},
		{"mcp", "agentctl-mcp/1.2 (claude-code 2.0.1)", "agentctl-mcp/1.2 (claude-code 2.0.1)"},
		{"long", strings.Repeat("c", 500), strings.Repeat("c", maxClaim) + "…"},
	} {
		ctx := t.Context()
		if c.client != "" {
			ctx = metadata.AppendToOutgoingContext(ctx, wire.MDClient, c.client)
		}
		_, _ = files.Stat(ctx, &agentdv1.StatRequest{Path: c.path})
		var got *activity.Record
		err := s.activity.Watch(t.Context(), 0, false, func(r activity.Record) error {
			if r.Kind == "files.stat" && (r.Summary == "stat "+c.path || strings.HasSuffix(r.Summary, "/"+c.path)) {
				got = &r
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		if got == nil {
			t.Fatalf("%s: no files.stat record", c.path)
		}
		if diff := cmp.Diff(got.Client, c.want); diff != "" {
			t.Errorf("%s: recorded client (-got +want):\n%s", c.path, diff)
		}
		if line := got.LineOn(""); c.want != "" && !strings.Contains(line, "via "+c.want) {
			t.Errorf("%s: line %q does not name the client", c.path, line)
		}
	}
}
