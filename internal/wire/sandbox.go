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
)

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
