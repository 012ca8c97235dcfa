package hub_test

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protojson"

	"github.com/devdepot-ai/agentd/internal/agentimage"
	"github.com/devdepot-ai/agentd/internal/ctl"
	"github.com/devdepot-ai/agentd/internal/hub"
	"github.com/devdepot-ai/agentd/internal/hub/hubtest"
	"github.com/devdepot-ai/agentd/internal/hub/sandboxes"
	"github.com/devdepot-ai/agentd/internal/hub/store"
	"github.com/devdepot-ai/agentd/internal/sandbox/sandboxtest"
	"github.com/devdepot-ai/agentd/internal/wire"
	hubv1 "github.com/devdepot-ai/agentd/proto/gen/agentd/hub/v1"
	agentdv1 "github.com/devdepot-ai/agentd/proto/gen/agentd/v1"
)

// TestSecretSandboxForAdminsOnly: an admin's agent run holds a resolved
// secret. A member of the org who calls that sandbox by id, to print the
// variable or read the secrets file, is refused PERMISSION_DENIED saying
// why, and cannot remove it; the token that started the run and another
// admin still reach it. A sandbox without secrets (a conversation's) stays
// open to members.
func TestSecretSandboxForAdminsOnly(t *testing.T) {
	minimal := sandboxtest.MinimalImage(t)
	runner := "agentd/runner-managed:rolesfixture-latest"
	if out, err := exec.Command("docker", "tag", minimal, runner).CombinedOutput(); err != nil {
		t.Fatalf("docker tag: %v: %s", err, out)
	}
	t.Cleanup(func() { _ = exec.Command("docker", "rmi", runner).Run() })

	secretDir := t.TempDir()
	value := fmt.Sprintf("sk-roles-%d", time.Now().UnixNano())
	if err := os.MkdirAll(filepath.Join(secretDir, "team"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(secretDir, "team", "openai"), []byte(value+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	h := startSandboxHubWith(t, func(o *sandboxes.Options) {
		o.Agents = []agentimage.Profile{agentProfile(t, "rolesfixture", builderProfile)}
	}, hubtest.Options{Secrets: hub.DirSecrets{Dir: secretDir}})
	starter := h.agentctl()
	as := func(name string, role store.Role) (func(args ...string) (int, string, string), string) {
		secret, hash := store.NewToken()
		if _, err := h.Store.CreateToken(t.Context(), store.Token{OrgID: h.Org.ID, Name: name, Role: role, Hash: hash, CreatedAt: time.Now()}); err != nil {
			t.Fatal(err)
		}
		tf := filepath.Join(t.TempDir(), "token")
		if err := os.WriteFile(tf, []byte(secret), 0o600); err != nil {
			t.Fatal(err)
		}
		return func(args ...string) (int, string, string) {
			var out, errb bytes.Buffer
			code := ctl.Main(t.Context(), append([]string{"--hub", h.URL, "--token-file", tf}, args...),
				ctl.IO{In: strings.NewReader(""), Out: &out, Err: &errb})
			return code, out.String(), errb.String()
		}, secret
	}
	member, memberSecret := as("mallory", store.RoleMember)
	otherAdmin, _ := as("bob", store.RoleAdmin)

	code, out, errs := starter("agent", "run", "rolesfixture", "--secret", "OPENAI_API_KEY=ref:team/openai", "--", "-c", `echo "$OPENAI_API_KEY"`)
	if code != 0 || out != value+"\n" {
		t.Fatalf("agent run with a secret: %d %q %q", code, out, errs)
	}
	m := regexp.MustCompile(`sandbox (sb-[a-z0-9]+)`).FindStringSubmatch(errs)
	if m == nil {
		t.Fatalf("no sandbox id in %q", errs)
	}
	sb := m[1]
	// The value is in the environment of the sandbox's commands (the
	// secrets directory is agentd's memory, not a file to cat).
	printSecret := []string{"--machine", sb, "exec", "--", "sh", "-c", `echo "$OPENAI_API_KEY"`}

	// The member: refused, with the reason, and never the value.
	for _, args := range [][]string{
		printSecret,
		{"--machine", sb, "read", wire.SandboxSecretsDir + "/OPENAI_API_KEY"},
		{"sandbox", "rm", sb},
	} {
		code, out, errs := member(args...)
		if code == 0 || strings.Contains(out+errs, value) {
			t.Errorf("member %v: %d %q %q; want refused, never the value", args, code, out, errs)
		}
		if !strings.Contains(errs, "admin") {
			t.Errorf("member %v: the refusal should say who may: %q", args, errs)
		}
	}
	// Over gRPC the code is PERMISSION_DENIED and the message names the
	// sandbox and why.
	ctx := metadata.AppendToOutgoingContext(t.Context(), "authorization", "Bearer "+memberSecret, wire.MDMachine, sb)
	_, err := agentdv1.NewSystemServiceClient(h.cc).Info(ctx, &agentdv1.InfoRequest{})
	want := "sandbox " + sb + " holds secrets of an agent run started by another token; only admins or the starting token may call it"
	if status.Code(err) != codes.PermissionDenied || status.Convert(err).Message() != want {
		t.Errorf("member Info on %s: %v; want PermissionDenied %q", sb, err, want)
	}
	_, err = hubv1.NewEnvironmentServiceClient(h.cc).RemoveSandbox(metadata.AppendToOutgoingContext(t.Context(), "authorization", "Bearer "+memberSecret),
		&hubv1.RemoveSandboxRequest{Id: sb})
	if status.Code(err) != codes.PermissionDenied {
		t.Errorf("member RemoveSandbox: %v, want PermissionDenied", err)
	}
	if _, err := h.Store.Sandbox(t.Context(), sb); err != nil {
		t.Errorf("the refused removal removed the sandbox: %v", err)
	}
	// Each refused call is the hub's record, under the member's name.
	acts, err := h.Store.ListActivity(t.Context(), store.ActivityQuery{OrgID: h.Org.ID, MachineID: sb, Limit: store.MaxActivityLimit})
	if err != nil {
		t.Fatal(err)
	}
	refused := 0
	for _, a := range acts {
		var r agentdv1.ActivityRecord
		if err := protojson.Unmarshal(a.Record, &r); err != nil {
			t.Fatal(err)
		}
		if a.Source == store.SourceHub && r.GetKind() == wire.KindCallRefused && r.GetActor() == "mallory" {
			refused++
		}
	}
	if refused < 3 { // exec, read, Info
		t.Errorf("%d hub records of the member's refused calls to %s, want at least 3", refused, sb)
	}

	// The starter and another admin reach it.
	for name, run := range map[string]func(...string) (int, string, string){"the starting token": starter, "another admin": otherAdmin} {
		if code, out, errs := run(printSecret...); code != 0 || out != value+"\n" {
			t.Errorf("%s: %d %q %q; want the value", name, code, out, errs)
		}
	}

	// The rule is the store's: after a restart of the hub, with the
	// sandbox back, the member is still refused and the starter served.
	h.Stop()
	h.Serve(h.Addr)
	deadline := time.Now().Add(60 * time.Second)
	for {
		code, out, errs := starter(printSecret...)
		if code == 0 && out == value+"\n" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the starter after the restart: %d %q %q", code, out, errs)
		}
		time.Sleep(200 * time.Millisecond) // polling the sandbox's reconnection, no ordering relied on
	}
	if code, out, errs := member(printSecret...); code == 0 || strings.Contains(out+errs, value) || !strings.Contains(errs, "holds secrets of an agent run") {
		t.Errorf("member after the hub's restart: %d %q %q; want refused", code, out, errs)
	}

	// Another hub on the same store (a replica) refuses the member alike,
	// before any forwarding: what decides is stored with the sandbox.
	other := h.ReplicaWith(nil, func(o *hubtest.Options) { o.Sandboxes = sandboxes.Options{} })
	otherCC, err := grpc.NewClient(other.Addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { otherCC.Close() })
	if _, err := agentdv1.NewSystemServiceClient(otherCC).Info(ctx, &agentdv1.InfoRequest{}); status.Code(err) != codes.PermissionDenied {
		t.Errorf("member Info on %s through another hub on the store: %v, want PermissionDenied", sb, err)
	}

	// A conversation's sandbox holds no secrets: the member uses it.
	if code, out, errs := member("--env", "builtin", "--conversation", "roles-c1", "exec", "--", "echo", "ok"); code != 0 || out != "ok\n" {
		t.Errorf("member in a conversation's sandbox: %d %q %q", code, out, errs)
	}

	// An admin removes the run's sandbox.
	if code, _, errs := otherAdmin("sandbox", "rm", sb); code != 0 {
		t.Errorf("admin sandbox rm: %d %q", code, errs)
	}
}
