package agentimage

import (
	"bytes"
	"embed"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"path"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/devdepot-ai/agentd/internal/allowlist"
	"github.com/devdepot-ai/agentd/internal/imageref"
)

// Strategy says where an agent's image comes from.
type Strategy string

// The strategies.
const (
	StrategyBuilder Strategy = "builder" // built by Render's Dockerfile from pinned parts
	StrategyImage   Strategy = "image"   // a published image (Profile.Image), used as is
	StrategyCustom  Strategy = "custom"  // no known image: the user gives one with --image
)

// Sensitivity says how much a run of the agent can expose or change without
// a person in the loop.
type Sensitivity string

// The sensitivities.
const (
	// SensitivityHigh: the agent runs commands it chooses without asking
	// (by default or in the mode agentd runs it in).
	SensitivityHigh Sensitivity = "high"
	// SensitivityMedium: the agent edits files on its own but asks before
	// it runs commands.
	SensitivityMedium Sensitivity = "medium"
	// SensitivityLow: the agent only reads and suggests.
	SensitivityLow Sensitivity = "low"
)

// Network modes of a profile's default network.
const (
	NetworkNone  = "none"  // no network at all
	NetworkAllow = "allow" // only the hosts in Network.Allow
)

// Errors of Lookup and Render, matched with errors.Is.
var (
	// ErrUnknownProfile: no profile has that name.
	ErrUnknownProfile = errors.New("unknown agent profile")
	// ErrNothingToBuild: the profile's image is a published one.
	ErrNothingToBuild = errors.New("nothing to build")
	// ErrImageRequired: the profile has no image agentd can build or pull.
	ErrImageRequired = errors.New("an image is required")
)

// Profile is what agentd knows about running one coding agent in a sandbox.
// It is decoded from profiles/NAME.json; see Validate for the rules.
type Profile struct {
	// Name is what commands take ("claude-code"): lowercase letters, digits
	// and single dashes; the file is profiles/NAME.json.
	Name string `json:"name"`
	// Aliases are other names commands accept for it ("claude", what
	// people type for claude-code), in the same alphabet; listings and
	// records use Name.
	Aliases []string `json:"aliases,omitempty"`
	// Slug names the agent in image names (agentd/runner-SLUG); the same
	// alphabet as Name.
	Slug string `json:"slug"`
	// DisplayName is for people ("Claude Code").
	DisplayName string `json:"display_name"`
	// Executable is the agent's command, found on PATH in its image.
	Executable string `json:"executable"`
	// Strategy says where the image comes from.
	Strategy Strategy `json:"strategy"`
	// Image is the published image of a StrategyImage profile, with its
	// registry host ("docker.io/paulgauthier/aider"); empty otherwise.
	Image string `json:"image,omitempty"`
	// NeedsNode is true when the agent runs on Node.js: the builder then
	// installs the pinned Node in a stage of its own.
	NeedsNode bool `json:"needs_node,omitempty"`
	// Install says how a StrategyBuilder profile is installed; nil otherwise.
	Install *Install `json:"install,omitempty"`
	// Limits are the sandbox's default resource limits.
	Limits Limits `json:"limits"`
	// Network is the sandbox's default network.
	Network Network `json:"network"`
	// Isolation is what separates the agent's sandbox from the host:
	// "runc" (the default when empty) or "gvisor" (gVisor's user-space
	// kernel; the hub's engine needs make sandbox-runtime).
	Isolation string `json:"isolation,omitempty"`
	// TTL is how long a run may last by default (1m to 24h).
	TTL Duration `json:"ttl"`
	// Sensitivity says how much a run can do unattended.
	Sensitivity Sensitivity `json:"sensitivity"`
	// RiskNotes say what the agent can do that a user should know (at least
	// one).
	RiskNotes []string `json:"risk_notes"`
	// SelfUpdateEnv is the environment that turns the agent's self-update
	// off, as far as it is known (Notes say where it is not). Never
	// credentials: names that look like one are refused.
	SelfUpdateEnv map[string]string `json:"self_update_env,omitempty"`
	// Brokered are the agent's key variables the hub brokers when a run
	// names them as secrets (brokered.go).
	Brokered []Brokered `json:"brokered,omitempty"`
	// Notes are everything else: sources, what is unsure.
	Notes []string `json:"notes,omitempty"`
}

// Install is how the builder installs an agent, in its own stage under
// /opt/agentd-tools/agents/NAME (PREFIX). Exactly one field is set.
type Install struct {
	// NPM is an npm package, installed as NPM@VERSION with the pinned Node
	// (the profile must need Node); its executable must be in PREFIX/bin.
	NPM string `json:"npm,omitempty"`
	// Script is shell lines run in order under "set -eu" on the tool base
	// (Debian slim with curl, ca-certificates and tar), with PREFIX, VERSION
	// and ARCH (dpkg's name: amd64, arm64) set; it must leave the executable
	// in PREFIX/bin.
	Script []string `json:"script,omitempty"`
}

// Limits are a sandbox's resource limits.
type Limits struct {
	CPUs      float64 `json:"cpus"`       // as docker run --cpus; 0.1 to 64
	MemoryMiB int64   `json:"memory_mib"` // 256 to 262144
	Pids      int64   `json:"pids"`       // 64 to 65536
}

// Network is a sandbox's network: none, or only an allow list of hosts.
type Network struct {
	// Default is NetworkNone or NetworkAllow.
	Default string `json:"default"`
	// Allow are the destinations reachable under NetworkAllow (at least
	// one), through the hub's egress proxy: HOST or *.DOMAIN, each with an
	// optional :PORT (default 443); see package allowlist.
	Allow []string `json:"allow,omitempty"`
}

// Duration is a time.Duration written as a string in JSON ("2h").
type Duration struct{ time.Duration }

// MarshalJSON writes the duration as a string.
func (d Duration) MarshalJSON() ([]byte, error) { return json.Marshal(d.String()) }

// UnmarshalJSON reads a string that time.ParseDuration accepts.
func (d *Duration) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return fmt.Errorf("want a duration string such as \"2h\"")
	}
	v, err := time.ParseDuration(s)
	if err != nil {
		return err
	}
	d.Duration = v
	return nil
}

var (
	nameRE    = regexp.MustCompile(`^[a-z0-9]+(-[a-z0-9]+)*$`)
	execRE    = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]*$`)
	npmRE     = regexp.MustCompile(`^(@[a-z0-9][a-z0-9._-]*/)?[a-z0-9][a-z0-9._-]*$`)
	envNameRE = regexp.MustCompile(`^[A-Z_][A-Z0-9_]*$`)
	envValRE  = regexp.MustCompile(`^[A-Za-z0-9._:/,-]*$`)
	// Names a credential would have: a profile never carries one.
	credentialRE = regexp.MustCompile(`KEY|TOKEN|SECRET|PASSWORD|PASSWD|CREDENTIAL|AUTH`)
)

// Validate reports the first thing wrong with the profile, naming the field.
func (p *Profile) Validate() error {
	if err := p.validate(); err != nil {
		if p.Name != "" {
			return fmt.Errorf("profile %s: %w", p.Name, err)
		}
		return fmt.Errorf("profile: %w", err)
	}
	return nil
}

func (p *Profile) validate() error {
	switch {
	case !nameRE.MatchString(p.Name):
		return fmt.Errorf("name %q: want lowercase letters, digits and single dashes", p.Name)
	case !nameRE.MatchString(p.Slug):
		return fmt.Errorf("slug %q: want lowercase letters, digits and single dashes", p.Slug)
	case strings.TrimSpace(p.DisplayName) == "":
		return errors.New("display_name is empty")
	case !execRE.MatchString(p.Executable):
		return fmt.Errorf("executable %q: want a command name (letters, digits, '.', '_', '-')", p.Executable)
	}
	for _, a := range p.Aliases {
		switch {
		case !nameRE.MatchString(a):
			return fmt.Errorf("alias %q: want lowercase letters, digits and single dashes", a)
		case a == p.Name:
			return fmt.Errorf("alias %q is the profile's name", a)
		}
	}
	if err := p.validateStrategy(); err != nil {
		return err
	}
	if err := p.Limits.validate(); err != nil {
		return fmt.Errorf("limits: %w", err)
	}
	if err := p.Network.validate(); err != nil {
		return fmt.Errorf("network: %w", err)
	}
	if p.Isolation != "" && p.Isolation != "runc" && p.Isolation != "gvisor" {
		return fmt.Errorf("isolation %q: want runc or gvisor", p.Isolation)
	}
	if p.TTL.Duration < time.Minute || p.TTL.Duration > 24*time.Hour {
		return fmt.Errorf("ttl %s: want 1m to 24h", p.TTL.Duration)
	}
	switch p.Sensitivity {
	case SensitivityHigh, SensitivityMedium, SensitivityLow:
	default:
		return fmt.Errorf("sensitivity %q: want high, medium or low", p.Sensitivity)
	}
	if len(p.RiskNotes) == 0 {
		return errors.New("risk_notes is empty: say what the agent can do unattended")
	}
	for _, n := range slices.Concat(p.RiskNotes, p.Notes) {
		if strings.TrimSpace(n) == "" {
			return errors.New("an empty note")
		}
	}
	for _, b := range p.Brokered {
		if err := b.validate(); err != nil {
			return err
		}
	}
	for k, v := range p.SelfUpdateEnv {
		switch {
		case !envNameRE.MatchString(k):
			return fmt.Errorf("self_update_env %q: want an environment variable name (A-Z, 0-9, _)", k)
		case credentialRE.MatchString(k):
			return fmt.Errorf("self_update_env %q looks like a credential: profiles never carry credentials", k)
		case !envValRE.MatchString(v):
			return fmt.Errorf("self_update_env %s=%q: want a plain value (letters, digits, . _ : / , -)", k, v)
		}
	}
	return nil
}

func (p *Profile) validateStrategy() error {
	switch p.Strategy {
	case StrategyBuilder:
		if p.Image != "" {
			return errors.New("image is set, but the strategy is builder (it is built, not pulled)")
		}
		if p.Install == nil {
			return errors.New("install is missing: a builder profile says how the agent is installed (npm or script)")
		}
		return p.Install.validate(p.NeedsNode)
	case StrategyImage:
		if p.Install != nil || p.NeedsNode {
			return errors.New("install or needs_node is set, but the strategy is image (nothing is built)")
		}
		return validImageRef(p.Image)
	case StrategyCustom:
		if p.Install != nil || p.NeedsNode || p.Image != "" {
			return errors.New("image, install or needs_node is set, but the strategy is custom (the user gives the image)")
		}
		return nil
	default:
		return fmt.Errorf("strategy %q: want builder, image or custom", p.Strategy)
	}
}

// validImageRef accepts a reference with an explicit registry host.
func validImageRef(ref string) error {
	if err := imageref.CheckReference(ref); err != nil {
		return fmt.Errorf("image: %w", err)
	}
	if host, _, ok := strings.Cut(ref, "/"); !ok || (!strings.ContainsAny(host, ".:") && host != "localhost") {
		return fmt.Errorf("image %q: name the registry host (docker.io/…, ghcr.io/…)", ref)
	}
	return nil
}

func (in *Install) validate(needsNode bool) error {
	switch {
	case in.NPM != "" && len(in.Script) > 0:
		return errors.New("install: both npm and script are set; give one")
	case in.NPM != "":
		if !npmRE.MatchString(in.NPM) {
			return fmt.Errorf("install.npm %q: want an npm package name", in.NPM)
		}
		if !needsNode {
			return errors.New("install.npm needs Node: set needs_node")
		}
	case len(in.Script) > 0:
		for _, l := range in.Script {
			if strings.TrimSpace(l) == "" || strings.ContainsAny(l, "\n\r") {
				return fmt.Errorf("install.script line %q: want one non-empty line", l)
			}
		}
	default:
		return errors.New("install: neither npm nor script is set")
	}
	return nil
}

func (l Limits) validate() error {
	switch {
	case l.CPUs < 0.1 || l.CPUs > 64:
		return fmt.Errorf("cpus %g: want 0.1 to 64", l.CPUs)
	case l.MemoryMiB < 256 || l.MemoryMiB > 256<<10:
		return fmt.Errorf("memory_mib %d: want 256 to 262144", l.MemoryMiB)
	case l.Pids < 64 || l.Pids > 65536:
		return fmt.Errorf("pids %d: want 64 to 65536", l.Pids)
	}
	return nil
}

func (n Network) validate() error {
	switch n.Default {
	case NetworkNone:
		if len(n.Allow) > 0 {
			return errors.New("allow is set, but the default is none")
		}
	case NetworkAllow:
		if len(n.Allow) == 0 {
			return errors.New("the default is allow, but allow is empty (say none for no network)")
		}
		for _, h := range n.Allow {
			if _, err := allowlist.Parse(h); err != nil {
				return fmt.Errorf("allow: %w", err)
			}
		}
	default:
		return fmt.Errorf("default %q: want none or allow", n.Default)
	}
	return nil
}

// ParseProfile decodes one profile strictly (unknown fields and trailing
// data are errors) and validates it.
func ParseProfile(data []byte) (Profile, error) {
	var p Profile
	if err := decodeStrict(data, &p); err != nil {
		return Profile{}, fmt.Errorf("profile: %w", err)
	}
	if err := p.Validate(); err != nil {
		return Profile{}, err
	}
	return p, nil
}

func decodeStrict(data []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return err
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return errors.New("data after the JSON object")
	}
	return nil
}

// Load reads every *.json file in fsys as a profile, each named after its
// file (NAME.json), and returns them sorted by name.
func Load(fsys fs.FS) ([]Profile, error) {
	files, err := fs.Glob(fsys, "*.json")
	if err != nil {
		return nil, err
	}
	ps := make([]Profile, 0, len(files))
	for _, f := range files {
		data, err := fs.ReadFile(fsys, f)
		if err != nil {
			return nil, err
		}
		p, err := ParseProfile(data)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", f, err)
		}
		if want := strings.TrimSuffix(path.Base(f), ".json"); p.Name != want {
			return nil, fmt.Errorf("%s: the profile is named %q; the file must be %s.json", f, p.Name, p.Name)
		}
		ps = append(ps, p)
	}
	if len(ps) == 0 {
		return nil, errors.New("no profiles (*.json)")
	}
	// A name or alias means one profile.
	owner := map[string]string{}
	for _, p := range ps {
		for _, n := range append([]string{p.Name}, p.Aliases...) {
			if o, ok := owner[n]; ok && o != p.Name {
				return nil, fmt.Errorf("%q names both profile %s and profile %s", n, o, p.Name)
			}
			owner[n] = p.Name
		}
	}
	return ps, nil
}

// Named reports whether name is the profile's name or one of its aliases.
func (p *Profile) Named(name string) bool {
	return name == p.Name || slices.Contains(p.Aliases, name)
}

//go:embed profiles/*.json
var profileFiles embed.FS

// Profiles returns the profiles built into agentd, sorted by name. Each call
// decodes them afresh, so callers may change what they get. The embedded
// files are checked by the package's tests; Profiles panics if they are
// invalid.
func Profiles() []Profile {
	sub, err := fs.Sub(profileFiles, "profiles")
	if err != nil {
		panic(err)
	}
	ps, err := Load(sub)
	if err != nil {
		panic(fmt.Sprintf("agentimage: embedded profiles: %v", err))
	}
	return ps
}

// Lookup returns the built-in profile with that name or alias; the error
// for an unknown one lists the known names (errors.Is ErrUnknownProfile).
func Lookup(name string) (Profile, error) {
	ps := Profiles()
	names := make([]string, len(ps))
	for i, p := range ps {
		if p.Named(name) {
			return p, nil
		}
		names[i] = p.Name
	}
	return Profile{}, fmt.Errorf("%w %q (known: %s)", ErrUnknownProfile, name, strings.Join(names, ", "))
}
