package wire

// Kinds of activity record that more than one program acts on.
const (
	// KindStop is the kind of the activity record a daemon adds when it
	// starts to shut down; the hub, reading the machine's activity, takes
	// it as "offline from now on".
	KindStop = "agentd.stop"
	// KindProcessStart is a command's start (outcome started, or error
	// when it could not be started).
	KindProcessStart = "process.start"
	// KindProcessExit is a command's end: the one kind whose exit code
	// means something (outcome ok with the code, or error when it was
	// killed by a signal or timed out).
	KindProcessExit = "process.exit"
)

// Kinds of the hub's records of a sandbox's egress through its proxy: a
// connection opened (or, allowed, that failed to open), and one refused.
const (
	KindEgressAllow = "egress.allow"
	KindEgressDeny  = "egress.deny"
)

// Sources of the records the hub's ActivityService sends
// (hubv1.WatchResponse.source).
const (
	// SourceHub: the hub's own record, of a call it routed (the actor from
	// the caller's token) or of its own action. Fact.
	SourceHub = "hub"
	// SourceDaemon: a machine's account of its own work, as it reported
	// it: unverified, and without an actor (its claim is claimed_actor).
	SourceDaemon = "daemon"
)

// KindCall is the kind of the hub's record of a call it routed.
const KindCall = "call"

// KindCallRefused is the kind of the hub's record of a call it refused to
// route to a machine or sandbox the caller may not use (a member's call to
// a sandbox holding another token's secrets).
const KindCallRefused = "call.refused"

// Kinds of the hub's notes about a daemon's account of its own work.
const (
	// KindActivityGap: the daemon's numbering jumped; the records after
	// the jump are stored, the jump not trusted (the hub resumes after the
	// last record numbered in order).
	KindActivityGap = "activity.gap"
	// KindActivityDropped: records were dropped, a daemon's over its rate
	// or the hub's own when its store fell behind.
	KindActivityDropped = "activity.dropped"
)
