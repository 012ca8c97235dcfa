package install

import (
	"bytes"
	"embed"
	"encoding/xml"
	"fmt"
	"path/filepath"
	"strings"
	"text/template"
)

//go:embed templates/*.tmpl
var templateFS embed.FS

// templates holds every service definition agentd writes; the files under
// packaging/systemd are rendered from the same ones (see TestPackagingUnits).
var templates = template.Must(template.ParseFS(templateFS, "templates/*.tmpl"))

// Kinds of service definition, one per service manager.
const (
	KindSystemdUser   = "systemd-user"   // ~/.config/systemd/user/agentd.service
	KindSystemdSystem = "systemd-system" // /etc/systemd/system/agentd.service with User=
	KindLaunchd       = "launchd"        // LaunchAgent (per user) or LaunchDaemon (--system)
	KindWindows       = "windows"        // Service Control Manager; no file, a description
)

// Env names the daemon reads its directories from.
const (
	EnvConfigDir = "AGENTD_CONFIG_DIR"
	EnvStateDir  = "AGENTD_STATE_DIR"
)

// Spec is what a service definition is rendered from. Zero fields are left
// out of the definition (the daemon then uses its defaults).
type Spec struct {
	Kind       string // one of the Kind constants
	Name       string // unit name without .service, launchd label, or Windows service name
	Executable string // absolute path of the agentd binary
	User       string // account the system service runs as; empty for a per-user service
	ConfigDir  string // AGENTD_CONFIG_DIR for the daemon, if set
	StateDir   string // AGENTD_STATE_DIR for the daemon, if set
	LogPath    string // launchd only: file for the daemon's stdout and stderr
}

type envVar struct{ Key, Value string }

func (s Spec) env() []envVar {
	var env []envVar
	if s.ConfigDir != "" {
		env = append(env, envVar{EnvConfigDir, s.ConfigDir})
	}
	if s.StateDir != "" {
		env = append(env, envVar{EnvStateDir, s.StateDir})
	}
	return env
}

func (s Spec) check() error {
	if s.Name == "" {
		return fmt.Errorf("service spec: no name")
	}
	if s.Kind != KindWindows && !strings.HasPrefix(s.Executable, "/") {
		return fmt.Errorf("service spec: executable %q is not an absolute path", s.Executable)
	}
	if s.Kind == KindWindows && !filepath.IsAbs(s.Executable) && !isWindowsAbs(s.Executable) {
		return fmt.Errorf("service spec: executable %q is not an absolute path", s.Executable)
	}
	if s.Kind == KindSystemdSystem && s.User == "" {
		return fmt.Errorf("service spec: a system unit needs a user")
	}
	for _, v := range []string{s.Name, s.Executable, s.User, s.ConfigDir, s.StateDir, s.LogPath} {
		if strings.ContainsAny(v, "\n\r\x00") || strings.Contains(v, "{{") {
			return fmt.Errorf("service spec: %q contains a newline, NUL or '{{'", v)
		}
	}
	if strings.ContainsAny(s.User, " \t\"'\\") {
		return fmt.Errorf("service spec: user %q is not a valid account name", s.User)
	}
	return nil
}

func isWindowsAbs(p string) bool {
	return len(p) >= 3 && p[1] == ':' && (p[2] == '\\' || p[2] == '/')
}

// Render returns the service definition for spec: a systemd unit, a launchd
// plist, or (Windows, where the service manager keeps no file) a plain-text
// description of the service it registers. It changes nothing.
func Render(spec Spec) ([]byte, error) {
	if err := spec.check(); err != nil {
		return nil, err
	}
	var (
		name string
		data any
	)
	switch spec.Kind {
	case KindSystemdUser, KindSystemdSystem:
		name = "agentd-user.service.tmpl"
		if spec.Kind == KindSystemdSystem {
			name = "agentd-system.service.tmpl"
		}
		var env []string
		for _, e := range spec.env() {
			env = append(env, systemdQuote(e.Key+"="+e.Value, false))
		}
		data = struct {
			ExecStart, User string
			Environment     []string
		}{systemdQuote(spec.Executable, true) + " run", spec.User, env}
	case KindLaunchd:
		name = "agentd.plist.tmpl"
		var env []envVar
		for _, e := range spec.env() {
			env = append(env, envVar{xmlEscape(e.Key), xmlEscape(e.Value)})
		}
		data = struct {
			Name, User, LogPath string
			Args                []string
			Env                 []envVar
		}{xmlEscape(spec.Name), xmlEscape(spec.User), xmlEscape(spec.LogPath),
			[]string{xmlEscape(spec.Executable), "run"}, env}
	case KindWindows:
		name = "windows-service.txt.tmpl"
		account := "LocalSystem"
		if spec.User != "" {
			account = spec.User
		}
		data = struct {
			Name, DisplayName, Description, Command, Account string
			Env                                              []envVar
		}{spec.Name, displayName, description, `"` + spec.Executable + `" run`, account, spec.env()}
	default:
		return nil, fmt.Errorf("service spec: unknown kind %q", spec.Kind)
	}
	var b bytes.Buffer
	if err := templates.ExecuteTemplate(&b, name, data); err != nil {
		return nil, fmt.Errorf("render %s: %w", name, err)
	}
	return b.Bytes(), nil
}

// systemdQuote quotes one word of a unit file setting (ExecStart argument,
// Environment assignment): double quotes when needed, with the specifiers
// (%) and, in a command line (exec), variables ($) systemd would otherwise
// expand escaped.
func systemdQuote(s string, exec bool) string {
	pairs := []string{`\`, `\\`, `"`, `\"`, `%`, `%%`}
	if exec {
		pairs = append(pairs, `$`, `$$`)
	}
	q := strings.NewReplacer(pairs...).Replace(s)
	if q == s && !strings.ContainsAny(s, " \t'") {
		return s
	}
	return `"` + q + `"`
}

func xmlEscape(s string) string {
	var b strings.Builder
	_ = xml.EscapeText(&b, []byte(s)) // writes to a strings.Builder never fail
	return b.String()
}
