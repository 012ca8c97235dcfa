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
	// KindProcessInput is bytes written to a running command's stdin.
	KindProcessInput = "process.input"
	// KindProcessSignal is a signal sent to a command (by a caller, or
	// by the daemon to the commands of a revoked token).
	KindProcessSignal = "process.signal"
	// KindProcessPrefix starts the kind of every record of a command
	// (start, exit, input, signal): each names the process in object_id,
	// whose output the hub and the console can show.
	KindProcessPrefix = "process."
)

// Kinds of a daemon's records of its other services' work.
const (
	// KindPythonRun is a Python snippet run (in a session, when
	// object_id names one).
	KindPythonRun = "python.run"

	KindSnapshotCreate  = "snapshot.create"
	KindSnapshotRestore = "snapshot.restore"
	KindSnapshotExport  = "snapshot.export"
	KindSnapshotImport  = "snapshot.import"
	KindSnapshotDelete  = "snapshot.delete"

	KindFilesStat      = "files.stat"
	KindFilesList      = "files.list"
	KindFilesMkdir     = "files.mkdir"
	KindFilesMove      = "files.move"
	KindFilesRemove    = "files.remove"
	KindFilesRead      = "files.read"
	KindFilesReadLines = "files.read_lines"
	KindFilesWrite     = "files.write"
	KindFilesEdit      = "files.edit"
	KindFilesSearch    = "files.search"
	KindFilesGlob      = "files.glob"
	KindFilesWatch     = "files.watch"

	// KindPortConnect is one TCP connection a caller made to a port of
	// the daemon's host (PortService.Connect: port forwards and
	// previews): bytes each way and duration.
	KindPortConnect = "port.connect"
)

// Kinds of the hub's own records of what it did for a caller.
const (
	// KindAgentRun is an agent started in a sandbox (AgentService.Run).
	KindAgentRun = "agent.run"
	// KindEnvironmentRefused is a call an environment could not take.
	KindEnvironmentRefused = "environment.refused"
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
