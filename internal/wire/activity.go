package wire

// KindStop is the kind of the activity record a daemon adds when it starts
// to shut down; the hub, reading the machine's activity, takes it as
// "offline from now on".
const KindStop = "agentd.stop"

// Kinds of the hub's records of a sandbox's egress through its proxy: a
// connection opened (or, allowed, that failed to open), and one refused.
const (
	KindEgressAllow = "egress.allow"
	KindEgressDeny  = "egress.deny"
)
