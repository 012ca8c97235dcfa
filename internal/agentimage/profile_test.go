package agentimage

import (
	"errors"
	"os"
	"strings"
	"testing"
	"testing/fstest"
	"time"

	"github.com/google/go-cmp/cmp"
)

// TestEmbeddedProfiles: every profile built in decodes strictly and
// validates, the set is the issue's, and each strategy is the intended one.
func TestEmbeddedProfiles(t *testing.T) {
	t.Parallel()
	got := map[string]Strategy{}
	for _, p := range Profiles() {
		if err := p.Validate(); err != nil {
			t.Error(err)
		}
		got[p.Name] = p.Strategy
	}
	want := map[string]Strategy{
		"codex": StrategyBuilder, "claude-code": StrategyBuilder, "opencode": StrategyBuilder, "pi": StrategyBuilder,
		"aider": StrategyImage, "goose": StrategyImage, "commandcode": StrategyCustom,
	}
	if diff := cmp.Diff(got, want); diff != "" {
		t.Errorf("profiles and strategies (-got +want):\n%s", diff)
	}
}

// TestPins: versions.json decodes strictly, pins every builder profile and
// nothing else.
func TestPins(t *testing.T) {
	t.Parallel()
	pins := Pins()
	builders := map[string]bool{}
	for _, p := range Profiles() {
		if p.Strategy == StrategyBuilder {
			builders[p.Name] = true
			if pins.Agents[p.Name] == "" {
				t.Errorf("versions.json has no pin for the builder profile %s", p.Name)
			}
		}
	}
	for name := range pins.Agents {
		if !builders[name] {
			t.Errorf("versions.json pins %s, which is not a builder profile", name)
		}
	}
	if _, err := ParseVersions([]byte(`{"debian":"docker.io/library/debian:bookworm-slim","node":"22.0.0","docker":"28.0.0","agents":{"codex":"1"},"python":"3"}`)); err == nil || !strings.Contains(err.Error(), `unknown field "python"`) {
		t.Errorf("an unknown field in versions: %v, want an error naming it", err)
	}
}

func TestLookup(t *testing.T) {
	t.Parallel()
	p, err := Lookup("claude-code")
	if err != nil {
		t.Fatal(err)
	}
	if p.Executable != "claude" || p.Install.NPM != "@anthropic-ai/claude-code" || p.SelfUpdateEnv["DISABLE_AUTOUPDATER"] != "1" {
		t.Errorf("claude-code = %+v", p)
	}
	_, err = Lookup("copilot")
	if !errors.Is(err, ErrUnknownProfile) {
		t.Fatalf("Lookup(copilot) = %v, want ErrUnknownProfile", err)
	}
	want := `unknown agent profile "copilot" (known: aider, claude-code, codex, commandcode, goose, opencode, pi)`
	if err.Error() != want {
		t.Errorf("Lookup(copilot) error\n got %s\nwant %s", err, want)
	}
}

// TestProfileNames: each profile's name, the other names it is accepted
// as, and its executable are the contract's table (CONTRACT.md §6).
func TestProfileNames(t *testing.T) {
	t.Parallel()
	type names struct {
		Aliases    []string
		Executable string
	}
	got := map[string]names{}
	for _, p := range Profiles() {
		got[p.Name] = names{p.Aliases, p.Executable}
	}
	want := map[string]names{
		"codex":       {nil, "codex"},
		"claude-code": {[]string{"claude"}, "claude"},
		"opencode":    {nil, "opencode"},
		"pi":          {nil, "pi"},
		"aider":       {nil, "aider"},
		"goose":       {nil, "goose"},
		"commandcode": {nil, "commandcode"},
	}
	if diff := cmp.Diff(got, want); diff != "" {
		t.Errorf("profile names and executables (-got +want):\n%s", diff)
	}
}

// TestLookupAlias: a profile is found by its name or an alias, and what is
// returned always carries the canonical name.
func TestLookupAlias(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ name, want string }{
		{"claude-code", "claude-code"},
		{"claude", "claude-code"},
		{"codex", "codex"},
		{"commandcode", "commandcode"},
	} {
		p, err := Lookup(tc.name)
		if err != nil {
			t.Errorf("Lookup(%s): %v", tc.name, err)
			continue
		}
		if p.Name != tc.want {
			t.Errorf("Lookup(%s).Name = %s, want %s", tc.name, p.Name, tc.want)
		}
	}
	for _, name := range []string{"Claude", "claude ", "cmd", "claude-cod"} {
		if _, err := Lookup(name); !errors.Is(err, ErrUnknownProfile) {
			t.Errorf("Lookup(%q) = %v, want ErrUnknownProfile", name, err)
		}
	}
}

// TestLoadAliasClash: an alias that is another profile's name or alias,
// or its own name, is refused: a name must mean one profile.
func TestLoadAliasClash(t *testing.T) {
	t.Parallel()
	other := strings.NewReplacer(`"name": "demo", "slug": "demo"`, `"name": "other", "slug": "other"`)
	for _, tc := range []struct {
		name  string
		files fstest.MapFS
		want  string
	}{
		{"alias is another's name", fstest.MapFS{
			"demo.json":  {Data: []byte(strings.Replace(validProfile, `"slug": "demo"`, `"slug": "demo", "aliases": ["other"]`, 1))},
			"other.json": {Data: []byte(other.Replace(validProfile))},
		}, `"other" names both`},
		{"two aliases alike", fstest.MapFS{
			"demo.json":  {Data: []byte(strings.Replace(validProfile, `"slug": "demo"`, `"slug": "demo", "aliases": ["d"]`, 1))},
			"other.json": {Data: []byte(strings.Replace(other.Replace(validProfile), `"slug": "other"`, `"slug": "other", "aliases": ["d"]`, 1))},
		}, `"d" names both`},
		{"alias is its own name", fstest.MapFS{
			"demo.json": {Data: []byte(strings.Replace(validProfile, `"slug": "demo"`, `"slug": "demo", "aliases": ["demo"]`, 1))},
		}, `alias "demo" is the profile's name`},
		{"bad alias", fstest.MapFS{
			"demo.json": {Data: []byte(strings.Replace(validProfile, `"slug": "demo"`, `"slug": "demo", "aliases": ["De mo"]`, 1))},
		}, `alias "De mo": want lowercase letters`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			if _, err := Load(tc.files); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("Load: %v, want an error containing %q", err, tc.want)
			}
		})
	}
}

// validProfile is a profile that passes; tests break one field at a time.
const validProfile = `{
  "name": "demo", "slug": "demo", "display_name": "Demo", "executable": "demo",
  "strategy": "builder", "needs_node": true, "install": {"npm": "@demo/cli"},
  "limits": {"cpus": 1, "memory_mib": 1024, "pids": 256},
  "network": {"default": "none"}, "ttl": "1h", "sensitivity": "high",
  "risk_notes": ["runs commands"]
}`

func TestParseProfile(t *testing.T) {
	t.Parallel()
	p, err := ParseProfile([]byte(validProfile))
	if err != nil {
		t.Fatal(err)
	}
	if p.TTL.Duration != time.Hour || p.Limits.MemoryMiB != 1024 || p.Install.NPM != "@demo/cli" {
		t.Errorf("decoded %+v", p)
	}
	for _, tc := range []struct{ name, old, new, want string }{
		{"unknown field", `"slug": "demo"`, `"slug": "demo", "api_key": "sk-1"`, `unknown field "api_key"`},
		{"unknown nested field", `"pids": 256`, `"pids": 256, "swap_mib": 1`, `unknown field "swap_mib"`},
		{"bad name", `"name": "demo"`, `"name": "Demo"`, `name "Demo"`},
		{"bad strategy", `"strategy": "builder"`, `"strategy": "build"`, `strategy "build"`},
		{"npm without node", `"needs_node": true, `, ``, `needs_node`},
		{"no install", `"install": {"npm": "@demo/cli"},`, ``, `install is missing`},
		{"npm and script", `{"npm": "@demo/cli"}`, `{"npm": "@demo/cli", "script": ["true"]}`, `both npm and script`},
		{"image with install", `"strategy": "builder"`, `"strategy": "image", "image": "docker.io/demo/demo"`, `install or needs_node is set`},
		{"custom with install", `"strategy": "builder"`, `"strategy": "custom"`, `the strategy is custom`},
		{"memory", `"memory_mib": 1024`, `"memory_mib": 1`, `memory_mib 1`},
		{"cpus", `"cpus": 1`, `"cpus": 0`, `cpus 0`},
		{"pids", `"pids": 256`, `"pids": 5`, `pids 5`},
		{"allow without hosts", `{"default": "none"}`, `{"default": "allow"}`, `allow is empty`},
		{"none with hosts", `{"default": "none"}`, `{"default": "none", "allow": ["a.example"]}`, `allow is set`},
		{"bad host", `{"default": "none"}`, `{"default": "allow", "allow": ["https://a.example"]}`, `network: allow: invalid allow-list entry "https://a.example": want a host name (api.example.com), not a URL`},
		{"ip address", `{"default": "none"}`, `{"default": "allow", "allow": ["169.254.169.254:80"]}`, `not an IP address`},
		{"bad port", `{"default": "none"}`, `{"default": "allow", "allow": ["a.example.com:99999"]}`, `1 to 65535`},
		{"wide wildcard", `{"default": "none"}`, `{"default": "allow", "allow": ["*.com"]}`, `two labels or more`},
		{"public suffix wildcard", `{"default": "none"}`, `{"default": "allow", "allow": ["*.co.uk"]}`, `public suffix`},
		{"public suffix", `{"default": "none"}`, `{"default": "allow", "allow": ["co.uk"]}`, `public suffix`},
		{"image path traversal", `"strategy": "builder", "needs_node": true, "install": {"npm": "@demo/cli"},`, `"strategy": "image", "image": "ghcr.io/../../etc/passwd:1",`, `repository path component ".."`},
		{"ttl", `"ttl": "1h"`, `"ttl": "48h"`, `ttl 48h0m0s`},
		{"ttl not a string", `"ttl": "1h"`, `"ttl": 3600`, `duration string`},
		{"sensitivity", `"sensitivity": "high"`, `"sensitivity": "extreme"`, `sensitivity "extreme"`},
		{"no risk notes", `"risk_notes": ["runs commands"]`, `"risk_notes": []`, `risk_notes is empty`},
		{"credential env", `"ttl": "1h"`, `"ttl": "1h", "self_update_env": {"OPENAI_API_KEY": "x"}`, `looks like a credential`},
		{"bad env value", `"ttl": "1h"`, `"ttl": "1h", "self_update_env": {"NO_UPDATE": "a b"}`, `want a plain value`},
		{"isolation", `"ttl": "1h"`, `"ttl": "1h", "isolation": "kata"`, `isolation "kata": want runc or gvisor`},
		{"trailing data", `"risk_notes": ["runs commands"]
}`, `"risk_notes": ["runs commands"]
} {}`, `data after the JSON object`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			if !strings.Contains(validProfile, tc.old) {
				t.Fatalf("the valid profile has no %q", tc.old)
			}
			_, err := ParseProfile([]byte(strings.Replace(validProfile, tc.old, tc.new, 1)))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("got %v, want an error containing %q", err, tc.want)
			}
		})
	}
}

func TestLoad(t *testing.T) {
	t.Parallel()
	ps, err := Load(os.DirFS("testdata/profiles"))
	if err != nil || len(ps) != 1 || ps[0].Name != "fixture-static" || ps[0].NeedsNode {
		t.Fatalf("Load(testdata/profiles) = %+v, %v", ps, err)
	}
	_, err = Load(fstest.MapFS{"other.json": {Data: []byte(validProfile)}})
	if err == nil || !strings.Contains(err.Error(), "the file must be demo.json") {
		t.Errorf("a profile in the wrong file: %v", err)
	}
}
