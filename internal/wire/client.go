package wire

// MDClient is the metadata key naming the client program behind a call
// ("agentctl-mcp/1.2 (claude-code 2.0.1)"), recorded beside the actor.
const MDClient = "agentd-client"
