package wire

import (
	"regexp"
	"strings"
)

// The environment variables a hub sets for a sandbox's agentd (its
// credential among them). Like every AGENTD_* variable they never reach the
// commands the agent runs.
const (
	EnvSandboxHub   = "AGENTD_SANDBOX_HUB"
	EnvSandboxID    = "AGENTD_SANDBOX_ID"
	EnvSandboxOrg   = "AGENTD_SANDBOX_ORG"
	EnvSandboxKey   = "AGENTD_SANDBOX_KEY" // the Ed25519 seed, base64 (standard, padded)
	EnvSandboxEnv   = "AGENTD_SANDBOX_ENVIRONMENT"
	EnvSandboxImage = "AGENTD_SANDBOX_IMAGE"
	// EnvSandboxEgress is the loopback address where a sandbox with an
	// allow list serves its egress proxy (SandboxEgressProxy); unset: none.
	EnvSandboxEgress = "AGENTD_SANDBOX_EGRESS"
)

// SandboxEgressProxy is where, on its own loopback, a sandbox with an
// allow list reaches the egress proxy its agentd serves.
const SandboxEgressProxy = "127.0.0.1:3128"

// SandboxProxyEnv is the environment a hub gives a sandbox with an allow
// list, so that what runs there (curl, git, pip, npm, Node with
// NODE_USE_ENV_PROXY, Python's requests, Go, Rust's reqwest …) uses the
// egress proxy: the sandbox has no other way out. Every process of the
// container gets it, agentd's own commands and docker exec alike.
func SandboxProxyEnv() []string {
	u := "http://" + SandboxEgressProxy
	env := []string{"NO_PROXY=localhost,127.0.0.1,::1", "no_proxy=localhost,127.0.0.1,::1", "NODE_USE_ENV_PROXY=1"}
	for _, k := range []string{"HTTPS_PROXY", "HTTP_PROXY", "ALL_PROXY"} {
		env = append(env, k+"="+u, strings.ToLower(k)+"="+u)
	}
	return env
}

// SandboxSecretsDir is where a sandbox's agentd reads the variables its hub
// delivers (an agent run's secrets): on /tmp, the sandbox's tmpfs, so they
// never reach the image, the workspace volume or the container's
// configuration, and go with the container.
const SandboxSecretsDir = "/tmp/.agentd-secrets"

// MaxSecretBytes bounds one delivered secret's value: the hub refuses a
// longer one and agentd reads no longer one.
const MaxSecretBytes = 64 << 10

var secretNameRE = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]{0,127}$`)

// ValidSecretName reports whether name may carry a delivered secret: a
// variable name, not one of the daemon's own AGENTD_* names.
func ValidSecretName(name string) bool {
	return secretNameRE.MatchString(name) && !strings.HasPrefix(name, "AGENTD_")
}
