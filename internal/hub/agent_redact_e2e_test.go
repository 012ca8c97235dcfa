package hub_test

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/encoding/protojson"

	"github.com/devdepot-ai/agentd/internal/agentimage"
	"github.com/devdepot-ai/agentd/internal/hub"
	"github.com/devdepot-ai/agentd/internal/hub/hubtest"
	"github.com/devdepot-ai/agentd/internal/hub/sandboxes"
	"github.com/devdepot-ai/agentd/internal/hub/store"
	"github.com/devdepot-ai/agentd/internal/sandbox/sandboxtest"
	agentdv1 "github.com/devdepot-ai/agentd/proto/gen/agentd/v1"
)

// A secret an agent run's command prints is stored in activity as
// "[secret NAME]": in the hub's own record of the call and in the
// sandbox's account of it, output and command line alike.
func TestAgentRunSecretRedacted(t *testing.T) {
	minimal := sandboxtest.MinimalImage(t)
	runner := "agentd/runner-managed:redactfixture-latest"
	if out, err := exec.Command("docker", "tag", minimal, runner).CombinedOutput(); err != nil {
		t.Fatalf("docker tag: %v: %s", err, out)
	}
	t.Cleanup(func() { _ = exec.Command("docker", "rmi", runner).Run() })

	secretDir := t.TempDir()
	value := fmt.Sprintf("sk-redact-%d", time.Now().UnixNano())
	if err := os.MkdirAll(filepath.Join(secretDir, "team"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(secretDir, "team", "openai"), []byte(value+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	h := startSandboxHubWith(t, func(o *sandboxes.Options) {
		o.Agents = []agentimage.Profile{agentProfile(t, "redactfixture", builderProfile)}
	}, hubtest.Options{Secrets: hub.DirSecrets{Dir: secretDir}})
	run := h.agentctl()

	code, out, errs := run("agent", "run", "redactfixture", "--secret", "OPENAI_API_KEY=ref:team/openai", "--",
		"-c", `echo "key=$OPENAI_API_KEY"`)
	if code != 0 || out != "key="+value+"\n" {
		t.Fatalf("the secret in the agent's command: %d %q %q; want %q", code, out, errs, value)
	}
	id := regexp.MustCompile(`sandbox (sb-[a-z0-9]+)`).FindStringSubmatch(errs)
	if id == nil {
		t.Fatalf("no sandbox id in %q", errs)
	}
	// The value on a command line too.
	if code, _, errs := run("--machine", id[1], "exec", "--", "echo", value); code != 0 {
		t.Fatalf("exec echo: %d %s", code, errs)
	}

	const mark = "[secret OPENAI_API_KEY]"
	var hubOut, daemonOut, hubCmd bool
	var leaks []string
	for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline) && !(hubOut && daemonOut && hubCmd); time.Sleep(50 * time.Millisecond) {
		recs, err := h.Store.ListActivity(t.Context(), store.ActivityQuery{OrgID: h.Org.ID, Limit: store.MaxActivityLimit})
		if err != nil {
			t.Fatal(err)
		}
		leaks = leaks[:0]
		for _, a := range recs {
			r := &agentdv1.ActivityRecord{}
			if err := protojson.Unmarshal(a.Record, r); err != nil {
				t.Fatal(err)
			}
			// The record as a person reads it: output decoded from base64.
			text, _ := json.Marshal(map[string]string{"output": string(r.GetOutput()), "summary": r.GetSummary(), "command": r.GetCommand(), "error": r.GetError()})
			if strings.Contains(string(text), value) || strings.Contains(string(a.Record), value) {
				leaks = append(leaks, fmt.Sprintf("%s %s: %s", a.Source, r.GetKind(), text))
			}
			out := string(r.GetOutput())
			switch {
			case a.Source == store.SourceHub && a.Subject == id[1] && strings.Contains(out, "key="+mark):
				hubOut = true
			case a.Source == store.SourceDaemon && a.Subject == id[1] && strings.Contains(out, "key="+mark):
				daemonOut = true
			}
			if a.Source == store.SourceHub && r.GetCommand() == "echo "+mark {
				hubCmd = true
			}
		}
	}
	if len(leaks) > 0 {
		t.Errorf("the secret's value is stored in activity:\n%s", strings.Join(leaks, "\n"))
	}
	if !hubOut || !daemonOut || !hubCmd {
		t.Errorf("redacted output in the hub's record %v, in the sandbox's account %v; redacted command line %v: want all", hubOut, daemonOut, hubCmd)
	}
}
