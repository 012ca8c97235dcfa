package wire

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
