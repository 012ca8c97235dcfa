package main

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"

	"github.com/devdepot-ai/agentd/internal/activity"
	hubv1 "github.com/devdepot-ai/agentd/proto/gen/agentd/hub/v1"
	agentdv1 "github.com/devdepot-ai/agentd/proto/gen/agentd/v1"
)

// who is an audit record's actor and claim.
type who struct{ Actor, Claimed string }

// TestServeRecordsWhoConnected runs `agentd serve` as a real process, on a
// unix socket and on a token-protected TCP port, and calls it with a
// forged agentd-actor: the audit log names the caller's uid or the token's
// fingerprint as the actor, the forgery only as a claim, and `agentd log`
// shows it so.
func TestServeRecordsWhoConnected(t *testing.T) {
	t.Parallel()
	u, err := user.Current()
	if err != nil {
		t.Fatal(err)
	}
	const token = "s3cret-token-of-the-daemon"
	sum := sha256.Sum256([]byte(token))
	for _, tc := range []struct {
		name   string
		listen func(dir string) (flag, target string)
		args   []string
		kv     []string
		want   who
	}{
		{
			name: "unix socket",
			listen: func(dir string) (string, string) {
				sock := filepath.Join(dir, "agentd.sock")
				return "unix://" + sock, "unix://" + sock
			},
			want: who{"uid:" + u.Uid + "(" + u.Username + ")", "bob"},
		},
		{
			name: "token tcp",
			listen: func(string) (string, string) {
				addr := freePort(t)
				return "tcp://" + addr, addr
			},
			args: []string{"--token-file", "TOKEN"},
			kv:   []string{"authorization", "Bearer " + token},
			want: who{"token:" + hex.EncodeToString(sum[:4]), "bob"},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			state, ws, tokFile := filepath.Join(dir, "state"), filepath.Join(dir, "ws"), filepath.Join(dir, "token")
			if err := os.Mkdir(ws, 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(tokFile, []byte(token+"\n"), 0o600); err != nil {
				t.Fatal(err)
			}
			flag, target := tc.listen(dir)
			args := []string{"serve", "--listen", flag, "--workspace", ws, "--state-dir", state}
			for _, a := range tc.args {
				args = append(args, strings.ReplaceAll(a, "TOKEN", tokFile))
			}
			serve := exec.Command(agentdBin, args...)
			serve.Env = append(os.Environ(), "HOME="+dir, "SHELL=/bin/sh")
			var logs bytes.Buffer
			serve.Stdout, serve.Stderr = &logs, &logs
			if err := serve.Start(); err != nil {
				t.Fatal(err)
			}
			exited := make(chan error, 1)
			go func() { exited <- serve.Wait() }()
			defer func() {
				if serve.ProcessState == nil {
					_ = serve.Process.Kill()
					<-exited
				}
				if t.Failed() {
					t.Logf("agentd serve's log:\n%s", logs.String())
				}
			}()

			cc, err := grpc.NewClient(target, grpc.WithTransportCredentials(insecure.NewCredentials()))
			if err != nil {
				t.Fatal(err)
			}
			defer cc.Close()
			ctx := metadata.AppendToOutgoingContext(t.Context(), append(tc.kv, "agentd-actor", "bob")...)
			waitFor(t, 10*time.Second, "agentd serve to answer", func() bool {
				_, err := agentdv1.NewFileServiceClient(cc).Stat(ctx, &agentdv1.StatRequest{Path: "."})
				return err == nil
			})
			if err := serve.Process.Signal(syscall.SIGTERM); err != nil {
				t.Fatal(err)
			}
			if err := <-exited; err != nil {
				t.Fatalf("agentd serve: %v", err)
			}

			stat := auditRecord(t, state, "files.stat")
			if diff := cmp.Diff(who{stat.Actor, stat.ClaimedActor}, tc.want); diff != "" {
				t.Errorf("the audit log's stat: who asked (-got +want):\n%s", diff)
			}
			out, err := exec.Command(agentdBin, "log", "--state-dir", state).Output()
			if err != nil {
				t.Fatal(err)
			}
			if want := tc.want.Actor + " (claims: bob)  stat " + ws; !strings.Contains(string(out), want) {
				t.Errorf("agentd log printed\n%s\nwant a line with %q", out, want)
			}
			b, _ := os.ReadFile(filepath.Join(state, activity.FileName))
			if strings.Contains(string(b)+string(out), token) {
				t.Error("the audit log shows the token itself")
			}
		})
	}
}

// TestRunTrustsTheHubOnly runs `agentd run` as a real process paired with
// a real hub and calls it both ways with a forged agentd-actor: through
// the tunnel the actor is the hub's (the API token's name) and the
// forgery is gone; on the local socket of the same daemon the actor is
// the caller's uid and the forgery is a claim.
func TestRunTrustsTheHubOnly(t *testing.T) {
	t.Parallel()
	u, err := user.Current()
	if err != nil {
		t.Fatal(err)
	}
	hubAddr, token := startHub(t) // its token is named "tester"
	dir := t.TempDir()
	cfg, state, ws := filepath.Join(dir, "config"), filepath.Join(dir, "state"), filepath.Join(dir, "ws")
	if err := os.Mkdir(ws, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"via-hub", "local"} {
		if err := os.WriteFile(filepath.Join(ws, f), nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	env := append(os.Environ(), "HOME="+dir, "SHELL=/bin/sh", "AGENTD_CONFIG_DIR="+cfg, "AGENTD_STATE_DIR="+state)
	hub, err := grpc.NewClient(hubAddr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer hub.Close()
	adminCtx := metadata.AppendToOutgoingContext(t.Context(), "authorization", "Bearer "+token)
	code, err := hubv1.NewAdminServiceClient(hub).CreatePairingCode(adminCtx, &hubv1.CreatePairingCodeRequest{})
	if err != nil {
		t.Fatal(err)
	}
	pair := exec.Command(agentdBin, "pair", "--hub", "http://"+hubAddr, "--code", code.GetCode())
	pair.Env = env
	out, err := pair.Output()
	if err != nil {
		t.Fatalf("agentd pair: %v", err)
	}
	id := strings.TrimSpace(string(out))

	run := exec.Command(agentdBin, "run", "--workspace", ws)
	run.Env = env
	var logs bytes.Buffer
	run.Stdout, run.Stderr = &logs, &logs
	if err := run.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- run.Wait() }()
	defer func() {
		if run.ProcessState == nil {
			_ = run.Process.Kill()
			<-exited
		}
		if t.Failed() {
			t.Logf("agentd run's log:\n%s", logs.String())
		}
	}()

	viaHub := metadata.AppendToOutgoingContext(adminCtx, "agentd-machine", id, "agentd-actor", "bob")
	waitFor(t, 10*time.Second, "a call through the hub", func() bool {
		_, err := agentdv1.NewFileServiceClient(hub).Stat(viaHub, &agentdv1.StatRequest{Path: "via-hub"})
		return err == nil // UNAVAILABLE until the tunnel is up
	})
	local, err := grpc.NewClient("unix://"+filepath.Join(state, "agentd.sock"), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer local.Close()
	localCtx := metadata.AppendToOutgoingContext(t.Context(), "agentd-actor", "tester")
	waitFor(t, 10*time.Second, "a call on the local socket", func() bool {
		_, err := agentdv1.NewFileServiceClient(local).Stat(localCtx, &agentdv1.StatRequest{Path: "local"})
		return err == nil
	})
	if err := run.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if err := <-exited; err != nil {
		t.Fatalf("agentd run: %v", err)
	}

	for _, c := range []struct {
		summary string
		want    who
	}{
		{"stat " + filepath.Join(ws, "via-hub"), who{"tester", ""}},
		{"stat " + filepath.Join(ws, "local"), who{"uid:" + u.Uid + "(" + u.Username + ")", "tester"}},
	} {
		var got *who
		err := activity.Tail(t.Context(), state, false, 0, func(r activity.Record) error {
			if r.Kind == "files.stat" && r.Summary == c.summary {
				got = &who{r.Actor, r.ClaimedActor}
			}
			return nil
		})
		if err != nil || got == nil {
			t.Fatalf("no %q in the audit log (%v)", c.summary, err)
		}
		if diff := cmp.Diff(*got, c.want); diff != "" {
			t.Errorf("%s: who asked (-got +want):\n%s", c.summary, diff)
		}
	}
}

// auditRecord returns the first record of kind in the audit log in state.
func auditRecord(t *testing.T, state, kind string) activity.Record {
	t.Helper()
	var rec *activity.Record
	err := activity.Tail(t.Context(), state, false, 0, func(r activity.Record) error {
		if r.Kind == kind && rec == nil {
			rec = &r
		}
		return nil
	})
	if err != nil || rec == nil {
		t.Fatalf("no %s record in the audit log (%v)", kind, err)
	}
	return *rec
}

// freePort returns a loopback address nothing listens on, for a process
// to listen on.
func freePort(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}
