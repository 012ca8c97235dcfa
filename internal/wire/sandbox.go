package wire

import (
	"regexp"
	"strings"
)

// The environment variables a hub sets for a sandbox's agentd (its
// credential among them). Like every AGENTD_* variable they never reach the
// commands the agent runs.
const (
	EnvSandboxHub = "AGENTD_SANDBOX_HUB"
	EnvSandboxID  = "AGENTD_SANDBOX_ID"
	EnvSandboxOrg = "AGENTD_SANDBOX_ORG"
	EnvSandboxKey = "AGENTD_SANDBOX_KEY" // the Ed25519 seed, base64 (standard, padded); older hubs
	// EnvSandboxKeyFile names the file holding the seed (base64, as
	// EnvSandboxKey), in the sandbox's own key mount: agentd reads it and
	// removes it, so that the workload finds the key nowhere.
	EnvSandboxKeyFile = "AGENTD_SANDBOX_KEY_FILE"
	// EnvSandboxCAFile names the PEM file of the CA that issued the
	// certificate of the hub's sandbox listener, for a sandbox that dials
	// it over TCP (EnvSandboxHub wss://…): the only root agentd trusts
	// for it. Unset with a unix:// hub.
	EnvSandboxCAFile = "AGENTD_SANDBOX_CA_FILE"
	EnvSandboxEnv    = "AGENTD_SANDBOX_ENVIRONMENT"
	EnvSandboxImage  = "AGENTD_SANDBOX_IMAGE"
	// EnvSandboxPlatform is gVisor's platform (ptrace, kvm, systrap) as the
	// engine's runtime runs it, for Info; unset under runc.
	EnvSandboxPlatform = "AGENTD_SANDBOX_PLATFORM"
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

// SandboxSecretsDir is where the hub delivers a sandbox's variables (an
// agent run's secrets) with FileService.Write. The directory is the
// daemon's, not the filesystem's: agentd keeps what is written there in its
// memory and writes nothing to disk, so that what the workload writes on
// disk (same uid) never becomes a variable of later commands, and the
// values are in no file the workload can read.
const SandboxSecretsDir = "/tmp/.agentd-secrets"

// MaxSecretBytes bounds one delivered secret's value: the hub refuses a
// longer one and agentd reads no longer one.
const MaxSecretBytes = 64 << 10

var secretNameRE = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]{0,127}$`)

// reservedSecretPrefixes and reservedSecretNames are variables that change
// what a program runs or loads rather than carry a value (the dynamic
// loader's, shells' start-up files, interpreters' module paths and
// options, the egress proxy's): no secret may set them, whatever its value.
var (
	reservedSecretPrefixes = []string{"AGENTD_", "LD_", "DYLD_", "BASH_FUNC_", "PYTHON", "PERL", "RUBY", "NODE_", "GCONV_", "GIT_"}
	reservedSecretNames    = map[string]bool{
		"PATH": true, "HOME": true, "SHELL": true, "USER": true, "LOGNAME": true, "PWD": true, "TMPDIR": true,
		"IFS": true, "ENV": true, "BASH_ENV": true, "PS4": true, "PROMPT_COMMAND": true, "CDPATH": true,
		"HOSTALIASES": true, "LOCPATH": true, "NLSPATH": true, "MALLOC_CHECK_": true, "TZDIR": true,
		"HTTP_PROXY": true, "HTTPS_PROXY": true, "ALL_PROXY": true, "NO_PROXY": true,
		"http_proxy": true, "https_proxy": true, "all_proxy": true, "no_proxy": true,
		"SSL_CERT_FILE": true, "SSL_CERT_DIR": true, "REQUESTS_CA_BUNDLE": true, "CURL_CA_BUNDLE": true,
	}
)

// ValidSecretName reports whether name may carry a delivered secret: a
// variable name, none of the daemon's own AGENTD_* names, and none that
// changes what programs run or load (LD_PRELOAD, PATH, PYTHONPATH, …).
func ValidSecretName(name string) bool {
	if !secretNameRE.MatchString(name) || reservedSecretNames[name] {
		return false
	}
	for _, p := range reservedSecretPrefixes {
		if strings.HasPrefix(strings.ToUpper(name), p) {
			return false
		}
	}
	return true
}
