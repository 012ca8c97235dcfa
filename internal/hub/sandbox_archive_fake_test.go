package hub_test

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/devdepot-ai/agentd/internal/ctl"
	"github.com/devdepot-ai/agentd/internal/hub/sandboxes"
	"github.com/devdepot-ai/agentd/internal/hub/store"
	hubv1 "github.com/devdepot-ai/agentd/proto/gen/agentd/hub/v1"
)

// --org-max-sandboxes does not count archived sandboxes: with a cap of 1,
// archiving the one running lets a second conversation start; restoring
// the archived one (by request or by its call) is then refused with
// RESOURCE_EXHAUSTED naming the flag, and it stays archived; once the
// other is stopped, it is restored. The fake driver: the caps are the
// point, not the engine.
func TestSandboxQuotaSkipsArchived(t *testing.T) {
	st, _ := openArchive(t)
	f := startFakeSandboxHub(t, func(o *sandboxes.Options) { o.OrgMaxSandboxes, o.Archive = 1, st })
	envs := hubv1.NewEnvironmentServiceClient(f.cc)
	change := func(id, action string) error {
		_, err := envs.ChangeSandboxState(f.call(""), &hubv1.ChangeSandboxStateRequest{Id: id, Action: action})
		return err
	}
	sb1, err := f.info("c-1")
	if err != nil {
		t.Fatal(err)
	}
	if err := change(sb1, sandboxes.ActionArchive); err != nil {
		t.Fatalf("archive: %v", err)
	}
	sb2, err := f.info("c-2")
	if err != nil {
		t.Fatalf("a second conversation with the first archived: %v", err)
	}
	refused := func(what string, err error) {
		t.Helper()
		if status.Code(err) != codes.ResourceExhausted || !strings.Contains(err.Error(), "--org-max-sandboxes 1") {
			t.Errorf("%s: %v; want RESOURCE_EXHAUSTED naming --org-max-sandboxes 1", what, err)
		}
	}
	refused("restore with one running", change(sb1, sandboxes.ActionRestore))
	_, err = f.info("c-1")
	refused("a call for the archived sandbox with one running", err)
	if sb, err := f.h.Store.Sandbox(t.Context(), sb1); err != nil || sb.State != store.SandboxArchived || sb.ArchiveID == "" {
		t.Errorf("the refused sandbox: %+v %v; want archived still", sb, err)
	}
	if err := change(sb2, sandboxes.ActionStop); err != nil {
		t.Fatalf("stop: %v", err)
	}
	if again, err := f.info("c-1"); err != nil || again != sb1 {
		t.Errorf("c-1 once there is room: %q %v; want its sandbox %s back", again, err, sb1)
	}
	if ids, _ := st.List(t.Context(), f.h.Org.ID); len(ids) != 0 {
		t.Errorf("archives once restored: %v, want none", ids)
	}
}

// env set --archive-after sets an environment's own archive step (env
// show says it); a bad value changes nothing; a hub without an archive
// store says archive after never and refuses sandbox archive, saying which
// flag it lacks.
func TestEnvSetArchiveAfter(t *testing.T) {
	st, _ := openArchive(t)
	for _, withStore := range []bool{true, false} {
		f := startFakeSandboxHub(t, func(o *sandboxes.Options) {
			if withStore {
				o.Archive = st
			}
		})
		tf := filepath.Join(t.TempDir(), "token")
		if err := os.WriteFile(tf, []byte(f.h.Token), 0o600); err != nil {
			t.Fatal(err)
		}
		agentctl := func(args ...string) (int, string, string) {
			var out, errb bytes.Buffer
			code := ctl.Main(t.Context(), append([]string{"--hub", f.h.URL, "--token-file", tf}, args...),
				ctl.IO{In: strings.NewReader(""), Out: &out, Err: &errb})
			return code, out.String(), errb.String()
		}
		if !withStore {
			if code, out, _ := agentctl("env", "show", "builtin"); code != 0 || !strings.Contains(out, "archive after never") {
				t.Errorf("env show without an archive store: exit %d %q", code, out)
			}
			id, err := f.info("c-1")
			if err != nil {
				t.Fatal(err)
			}
			if code, _, errOut := agentctl("sandbox", "archive", id); code == 0 || !strings.Contains(errOut, "--archive-url") {
				t.Errorf("sandbox archive without an archive store: exit %d %q; want refused naming --archive-url", code, errOut)
			}
			continue
		}
		if code, out, _ := agentctl("env", "show", "builtin"); code != 0 || !strings.Contains(out, "archive after 7d") {
			t.Errorf("env show with the hub's default: exit %d %q", code, out)
		}
		if code, _, errOut := agentctl("env", "set", "builtin", "--archive-after", "1s"); code == 0 || !strings.Contains(errOut, "archive after") {
			t.Errorf("env set --archive-after 1s: exit %d %q; want refused", code, errOut)
		}
		code, out, errOut := agentctl("env", "set", "builtin", "--archive-after", "2d")
		if code != 0 || !strings.Contains(out, "archive after 2d") {
			t.Errorf("env set --archive-after 2d: exit %d %q %q", code, out, errOut)
		}
		if p, err := f.h.Store.SandboxPolicy(t.Context(), f.h.Org.ID, "builtin"); err != nil || p.ArchiveAfter != 48*60*60*1e9 {
			t.Errorf("stored policy: %+v %v", p, err)
		}
	}
}

// A call that comes while its sandbox is being archived waits for the
// archive, then restores it: it never fails for a container the archive
// removed. (The archive is held at its first step until the call waits.)
func TestSandboxCallDuringArchive(t *testing.T) {
	st, _ := openArchive(t)
	reached, release := make(chan struct{}), make(chan struct{})
	var once sync.Once
	f := startFakeSandboxHub(t, func(o *sandboxes.Options) {
		o.Archive = st
		o.ArchiveHook = func(point string) {
			if point == sandboxes.HookBeforeUpload {
				once.Do(func() { close(reached); <-release })
			}
		}
	})
	envs := hubv1.NewEnvironmentServiceClient(f.cc)
	id, err := f.info("c-1")
	if err != nil {
		t.Fatal(err)
	}
	archived := make(chan error, 1)
	go func() {
		_, err := envs.ChangeSandboxState(f.call(""), &hubv1.ChangeSandboxStateRequest{Id: id, Action: sandboxes.ActionArchive})
		archived <- err
	}()
	<-reached // stopped, about to upload, holding the sandbox's lock
	type result struct {
		id  string
		err error
	}
	called := make(chan result, 1)
	go func() {
		got, err := f.info("c-1")
		called <- result{got, err}
	}()
	time.Sleep(500 * time.Millisecond) // the call reaches the sandbox's lock (it can only wait there)
	close(release)
	if err := <-archived; err != nil {
		t.Fatalf("archive: %v", err)
	}
	r := <-called
	if r.err != nil || r.id != id {
		t.Fatalf("the call during the archive: %q %v; want its sandbox %s, restored", r.id, r.err, id)
	}
	if sb, err := f.h.Store.Sandbox(t.Context(), id); err != nil || sb.State != store.SandboxRunning {
		t.Errorf("after the call: %+v %v; want running", sb, err)
	}
}
