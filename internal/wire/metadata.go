package wire

// gRPC metadata keys. agentctl sends MDMachine, MDEnvironment and
// MDConversation to the hub, which routes on them; the hub forwards
// MDActor (the API token's name) and MDConversation to the agentd it
// routes to, which records them in its activity log.
const (
	// MDMachine names the machine or sandbox a call routed through the
	// hub is for.
	MDMachine = "agentd-machine"
	// MDEnvironment names the environment whose sandbox a call routed
	// through the hub is for (instead of MDMachine).
	MDEnvironment = "agentd-environment"
	// MDConversation identifies the caller's conversation: the hub picks
	// an environment's sandbox by it, and agentd records it.
	MDConversation = "agentd-conversation"
	// MDActor is who asked, as the hub tells agentd.
	MDActor = "agentd-actor"
)

// Bearer token authentication: the token travels in the MDAuthorization
// metadata as BearerPrefix + token, to agentd (its --token-file) and to
// the hub (an API token).
const (
	MDAuthorization = "authorization"
	BearerPrefix    = "Bearer "
)
