package replica_test

import (
	"context"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"

	"github.com/johannesboyne/gofakes3"
	"github.com/johannesboyne/gofakes3/backend/s3mem"

	"github.com/devdepot-ai/agentd/internal/hub/archive"
	"github.com/devdepot-ai/agentd/internal/hub/sandboxes"
	"github.com/devdepot-ai/agentd/internal/hub/store"
	hubv1 "github.com/devdepot-ai/agentd/proto/gen/agentd/hub/v1"
	agentdv1 "github.com/devdepot-ai/agentd/proto/gen/agentd/v1"
)

// s3URL starts an S3 server on loopback (gofakes3, a Go S3 server made for
// tests) with a bucket "archives", and returns the s3:// URL of it.
func s3URL(t *testing.T) (string, *s3mem.Backend) {
	t.Helper()
	backend := s3mem.New()
	if err := backend.CreateBucket("archives"); err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(gofakes3.New(backend).Server())
	t.Cleanup(srv.Close)
	q := url.Values{"endpoint": {srv.URL}, "region": {"us-east-1"}, "use_path_style": {"true"}, "disable_https": {"true"}, "anonymous": {"true"}}
	return "s3://archives?" + q.Encode(), backend
}

// describe lists every entry of /workspace (type, mode, owner, mtime to
// the second — what the engine's archive API keeps —, symlink target) and
// every file's sha256.
const describe = `cd /workspace && find . -mindepth 1 -printf '%p %y %m %U:%G %T@ %l\n' | sed 's/\.[0-9]* / /' | sort && find . -type f -exec sha256sum {} + | sort`

// Two replicas on one database and one archive store over S3 (on
// loopback): replica A archives a conversation's sandbox (its manifest and
// blobs are in the S3 server), and the conversation's next call on
// replica B restores it there — same sandbox id, the same workspace byte
// for byte, now B's — while neither replica touches the other's
// containers. A process the archive on A ended is answered for on B
// (Wait: killed by TERM, "sandbox archived by …").
func TestArchivedSandboxRestoredByAnotherReplica(t *testing.T) {
	raw, backend := s3URL(t)
	a, b := sandboxReplicas(t, func(_ int, o *sandboxes.Options) {
		st, err := archive.Open(t.Context(), raw, archive.Options{})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { st.Close() })
		o.Archive = st
	})
	a.mustSh("c-arch", `set -e; mkdir -p /workspace/d; echo hello > /workspace/d/f; chmod 640 /workspace/d/f
head -c 1500000 /dev/urandom > /workspace/blob; ln -s d/f /workspace/l`)
	want, id := a.mustSh("c-arch", describe)
	// A process the archive ends: its record is in the database, so B,
	// which restores the sandbox, answers for it.
	sctx, stopStart := context.WithCancel(a.conv("c-arch"))
	st, err := agentdv1.NewProcessServiceClient(a.cc).Start(sctx, &agentdv1.StartRequest{Argv: []string{"sleep", "600"}})
	if err != nil {
		t.Fatal(err)
	}
	ev, err := st.Recv()
	pid := ev.GetEvent().GetStarted().GetId()
	if err != nil || pid == "" {
		t.Fatalf("start on A: %v %v", ev, err)
	}
	stopStart()
	if _, err := a.envs().ChangeSandboxState(a.admin(), &hubv1.ChangeSandboxStateRequest{Id: id, Action: "archive"}); err != nil {
		t.Fatalf("archive on A: %v", err)
	}
	sb, _ := a.row(id)
	if sb.State != store.SandboxArchived || sb.Hub != a.hubID {
		t.Fatalf("row after the archive: %s on %s, want archived on %s", sb.State, sb.Hub, a.hubID)
	}
	if objs, err := backend.ListBucket("archives", nil, gofakes3.ListBucketPage{}); err != nil || len(objs.Contents) < 3 {
		t.Errorf("the S3 server holds %v (%v), want the archive's manifest and blobs", objs, err)
	} else {
		var manifests int
		for _, o := range objs.Contents {
			if strings.Contains(o.Key, "/manifests/") {
				manifests++
			}
		}
		if manifests != 1 {
			t.Errorf("manifests in the S3 server: %d, want 1", manifests)
		}
	}

	got, on := b.mustSh("c-arch", describe)
	if on != id {
		t.Errorf("the conversation on B reached %s, want %s", on, id)
	}
	if got != want {
		t.Errorf("the workspace B restored differs:\n got %s\nwant %s", got, want)
	}
	if sb, _ := b.row(id); sb.State != store.SandboxRunning || sb.Hub != b.hubID || sb.ArchiveID != "" {
		t.Errorf("row after B restored it: %s on %s (archive %q), want running on %s", sb.State, sb.Hub, sb.ArchiveID, b.hubID)
	}
	w, err := agentdv1.NewProcessServiceClient(b.cc).Wait(b.conv("c-arch"), &agentdv1.WaitRequest{Id: pid})
	if x := w.GetProcess().GetExited(); err != nil || !strings.HasPrefix(x.GetReason(), "sandbox archived by ") || x.GetSignal() != "TERM" {
		t.Errorf("wait on B for %s, which the archive on A ended: %v %v; want killed by TERM, \"sandbox archived by …\"", pid, w, err)
	}
	if got, _ := a.mustSh("c-arch", "cat /workspace/d/f"); got != "hello\n" {
		t.Errorf("the conversation through A after B restored it: %q", got)
	}
}
