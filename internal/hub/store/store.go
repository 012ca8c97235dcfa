// Package store keeps the control plane's state: orgs, API tokens, pairing
// codes, machines, the org's activity and the server secret.
//
// Store is the interface the hub consumes. OpenSQLite returns the embedded
// default implementation (modernc.org/sqlite, pure Go); a Postgres
// implementation for several hub replicas fills the same interface and passes
// the same conformance suite (package storetest).
//
// The interface is written for any SQL engine: IDs are opaque strings made in
// Go, the times it records are values the caller passes in (the store reads
// no clock for them, so every implementation and every test sees the same
// times; the hub's clock decides what "expired" means), and the
// decisions that must be atomic — redeeming a pairing code, counting a wrong
// guess against one, appending activity and advancing the machine's sequence
// number — are single methods that run in one transaction.
//
// Times come back in UTC with microsecond precision (what Postgres
// timestamptz keeps); a zero time.Time means "never" (not used, not revoked).
//
// Errors are the sentinels below, wrapped with context; match them with
// errors.Is.
package store

import (
	"context"
	"crypto/ed25519"
	"encoding/json"
	"errors"
	"time"
)

// Errors returned by every Store implementation.
var (
	// ErrNotFound: no such row, or the row belongs to another org.
	ErrNotFound = errors.New("not found")
	// ErrConflict: the write would break a uniqueness rule (an org name
	// taken, a public key already registered, a live token name reused).
	ErrConflict = errors.New("conflict")
	// ErrInvalid: the store cannot hold the value (an empty name, an
	// unknown role, a malformed key or record).
	ErrInvalid = errors.New("invalid")
	// ErrPrecondition: the row exists but is not in the state the operation
	// needs — a pairing code already used, expired or locked.
	ErrPrecondition = errors.New("precondition failed")
	// ErrRevoked: the API token was revoked.
	ErrRevoked = errors.New("revoked")
)

// Store is the hub's state. Implementations are safe for concurrent use.
type Store interface {
	Orgs
	Tokens
	PairingCodes
	Machines
	ActivityLog
	Environments
	Sandboxes
	RateLimits
	Replicas
	ConsoleSessions
	Exposures
	EgressLists
	Broker
	SandboxProcesses
	Leases

	// ServerSecret returns the hub's 32-byte random secret, created when the
	// store was first initialised. Pairing codes are stored as HMACs keyed
	// with it.
	ServerSecret(ctx context.Context) ([]byte, error)

	// Close releases the store.
	Close() error
}

// Orgs stores organisations.
type Orgs interface {
	// CreateOrg creates an org; ErrConflict if the name is taken.
	CreateOrg(ctx context.Context, name string, at time.Time) (Org, error)
	// Org returns the org with that ID.
	Org(ctx context.Context, id string) (Org, error)
	// OrgByName returns the org with that name.
	OrgByName(ctx context.Context, name string) (Org, error)
	// ListOrgs returns every org, oldest first.
	ListOrgs(ctx context.Context) ([]Org, error)
}

// Tokens stores API tokens. Only their SHA-256 is stored (see HashToken).
type Tokens interface {
	// CreateToken stores t and assigns its ID. ErrConflict if the org has a
	// live token with the same name or the hash is stored already;
	// ErrNotFound if the org is unknown.
	CreateToken(ctx context.Context, t Token) (Token, error)
	// TokenByHash returns the live token with that hash: ErrNotFound if
	// there is none, ErrRevoked if it was revoked. It is the only lookup
	// meant for authentication.
	TokenByHash(ctx context.Context, hash TokenHash) (Token, error)
	// ListTokens returns the org's tokens, revoked ones included, oldest first.
	ListTokens(ctx context.Context, orgID string) ([]Token, error)
	// TouchToken records that the token was used at `at`. Callers should
	// throttle it (one write per token per minute is plenty).
	TouchToken(ctx context.Context, id string, at time.Time) error
	// RevokeToken revokes one of the org's tokens. Revoking twice keeps the
	// first time.
	RevokeToken(ctx context.Context, orgID, id string, at time.Time) error
}

// PairingCodes stores pairing codes as HMACs; the code itself is never
// stored. Package pairing owns the policy (format, TTL, lockout).
type PairingCodes interface {
	// CreatePairingCode stores c and assigns its ID. ErrConflict if the
	// selector is taken (draw another code); ErrNotFound if the org is unknown.
	CreatePairingCode(ctx context.Context, c PairingCode) (PairingCode, error)
	// PairingCodeBySelector returns the code with that selector.
	PairingCodeBySelector(ctx context.Context, selector []byte) (PairingCode, error)
	// ListPairingCodes returns the org's codes (used and expired ones until
	// they are deleted), oldest first.
	ListPairingCodes(ctx context.Context, orgID string) ([]PairingCode, error)
	// FailPairingCode counts a wrong guess against a live code and locks it
	// when the count reaches lockAfter. ErrPrecondition if the code is not
	// live at `at` (used, expired or locked already): nothing changes.
	FailPairingCode(ctx context.Context, id string, lockAfter int, at time.Time) (PairingCode, error)
	// RedeemPairingCode, in one transaction, marks the live code used (by
	// m's new ID, from remoteAddr) and creates m in the code's org. Exactly
	// one of several concurrent calls for the same code succeeds; the others
	// get ErrPrecondition. ErrConflict (nothing changed, the code stays
	// usable) if m's public key is already registered.
	RedeemPairingCode(ctx context.Context, id, remoteAddr string, at time.Time, m Machine) (Machine, error)
	// DeletePairingCodes deletes every code that expired before `before`,
	// used or not, and returns how many.
	DeletePairingCodes(ctx context.Context, before time.Time) (int64, error)
}

// Machines stores paired machines.
type Machines interface {
	// CreateMachine registers m in m.OrgID without a pairing code (a
	// sandbox the hub starts itself). The ID is assigned ("m-…") unless m.ID
	// is a sandbox id ("sb-…"), which is kept. ErrConflict if the public key
	// or the ID is registered already.
	CreateMachine(ctx context.Context, m Machine) (Machine, error)
	// Machine returns the machine with that ID, revoked or not: a caller
	// authenticating it must check RevokedAt, one serving an org must check
	// OrgID.
	Machine(ctx context.Context, id string) (Machine, error)
	// ListMachines returns the org's machines, oldest first.
	ListMachines(ctx context.Context, orgID string) ([]Machine, error)
	// MachineSeen records that the machine's tunnel was up at `at` (the
	// stored time never moves back) and its agentd version, when version is
	// not empty.
	MachineSeen(ctx context.Context, id string, at time.Time, version string) error
	// RevokeMachine revokes one of the org's machines. Revoking twice keeps
	// the first time.
	RevokeMachine(ctx context.Context, orgID, id string, at time.Time) error
}

// Environments stores an org's custom image environments and its default
// environment. A validation is a run that only one caller can start at a
// time: StartValidation bumps the generation, and only the run holding that
// generation may finish it.
type Environments interface {
	// CreateEnvironment stores e (state validating, running "create",
	// generation 1). ErrConflict if the org has one of that name.
	CreateEnvironment(ctx context.Context, e Environment) (Environment, error)
	// Environment returns one of the org's environments.
	Environment(ctx context.Context, orgID, name string) (Environment, error)
	// ListEnvironments returns the org's environments by name.
	ListEnvironments(ctx context.Context, orgID string) ([]Environment, error)
	// ListValidating returns every environment with a validation running
	// (of every org): a hub that restarts runs them again.
	ListValidating(ctx context.Context) ([]Environment, error)
	// StartValidation starts a validation of kind "update" or
	// "revalidate", bumping the generation. ErrPrecondition, changing
	// nothing, if one is running already. "update" lets go of the pin at
	// once (state validating, report cleared); "revalidate" keeps state,
	// pin and report until FinishValidation, unless nothing is pinned, when
	// it acts as "update".
	StartValidation(ctx context.Context, orgID, name, kind string, at time.Time) (Environment, error)
	// SetValidationReason records progress ("pulling …") of the run with
	// that generation. ErrPrecondition if another run has started since.
	SetValidationReason(ctx context.Context, orgID, name string, generation int64, reason string, at time.Time) error
	// FinishValidation stores the outcome of the run with that generation
	// (state, pinned, reason, report, inventory from r) and ends it.
	// ErrPrecondition if another run has started since (nothing changes).
	FinishValidation(ctx context.Context, orgID, name string, generation int64, r Environment, at time.Time) (Environment, error)
	// DeleteEnvironment deletes one of the org's environments (and the
	// org's default, if it named it).
	DeleteEnvironment(ctx context.Context, orgID, name string) error
	// SetDefaultEnvironment makes name the org's default ("builtin" or any
	// name the hub accepts; the store does not check it exists).
	SetDefaultEnvironment(ctx context.Context, orgID, name string) error
	// DefaultEnvironment returns the org's default ("" when none was set).
	DefaultEnvironment(ctx context.Context, orgID string) (string, error)
	// SetEnvironmentIsolation sets a custom image environment's isolation
	// ("runc" or "gvisor"; ErrInvalid otherwise) and returns it.
	SetEnvironmentIsolation(ctx context.Context, orgID, name, isolation string, at time.Time) (Environment, error)
	// BuiltinIsolation returns the isolation of the org's built-in
	// environment ("runc" until one was set).
	BuiltinIsolation(ctx context.Context, orgID string) (string, error)
	// SetBuiltinIsolation sets it.
	SetBuiltinIsolation(ctx context.Context, orgID, isolation string) error
}

// Sandboxes stores the sandboxes the hub runs. The store decides which
// caller gets a conversation's sandbox: one row per (org, environment,
// conversation) among those not warm.
type Sandboxes interface {
	// CreateSandbox stores sb. ErrConflict if it is not warm and the
	// conversation has a sandbox in that environment already.
	CreateSandbox(ctx context.Context, sb Sandbox) (Sandbox, error)
	// Sandbox returns one sandbox.
	Sandbox(ctx context.Context, id string) (Sandbox, error)
	// ConversationSandbox returns the conversation's sandbox in env.
	ConversationSandbox(ctx context.Context, orgID, env, conversation string) (Sandbox, error)
	// ListSandboxes returns the org's sandboxes ("" : every org's), oldest
	// first.
	ListSandboxes(ctx context.Context, orgID string) ([]Sandbox, error)
	// ClaimWarmSandbox gives the oldest warm sandbox of env whose container
	// is set and that hub drives (Sandbox.Hub: a replica hands out only
	// containers on its own engine) to the conversation, in one
	// transaction. ErrNotFound if there is none; ErrConflict if the
	// conversation has one already.
	ClaimWarmSandbox(ctx context.Context, orgID, env, hub, conversation string, at time.Time) (Sandbox, error)
	// SetSandboxContainer records the container that runs the sandbox.
	SetSandboxContainer(ctx context.Context, id, containerID string) error
	// SetSandboxToken records the API token the sandbox counts against
	// (a warm one, once claimed).
	SetSandboxToken(ctx context.Context, id, token string) error
	// TouchSandbox records that a call used the sandbox at `at`.
	TouchSandbox(ctx context.Context, id string, at time.Time) error
	// DeleteSandbox deletes the row; deleting a missing one is not an error.
	DeleteSandbox(ctx context.Context, id string) error
	// SetSandboxState records the sandbox's state (one of SandboxStates),
	// since at, for reason. ErrInvalid for another state, ErrNotFound for
	// a missing sandbox.
	SetSandboxState(ctx context.Context, id, state string, at time.Time, reason string) error
	// ArchiveSandbox records, in one step, that a stopped sandbox is
	// archived in archiveID: its state, why, and no container any more.
	// ErrConflict when it is not stopped, ErrNotFound when it is gone.
	ArchiveSandbox(ctx context.Context, id, archiveID string, at time.Time, reason string) error
	// UnarchiveSandbox records, in one step, that an archived sandbox was
	// restored into containerID of image and runs: its archive id
	// cleared. ErrConflict when it is not archived, ErrNotFound when it is
	// gone.
	UnarchiveSandbox(ctx context.Context, id, containerID, image string, at time.Time) error
	// ClaimArchivedSandbox gives an archived sandbox of hub fromHub to hub
	// toHub (the replica that restores it) with a new machine key, in one
	// transaction. ErrConflict when it is not archived on fromHub any more.
	ClaimArchivedSandbox(ctx context.Context, id, fromHub, toHub string, pub ed25519.PublicKey) error
	// SetSandboxWorkspace records what the sandbox's /workspace held at
	// `at`, in bytes. ErrInvalid for a negative size.
	SetSandboxWorkspace(ctx context.Context, id string, bytes int64, at time.Time) error
	// SetSandboxPolicy stores the lifecycle policy of the org's sandboxes
	// of environment env (any name, the built-in one's included); the zero
	// Policy goes back to the hub's defaults. ErrInvalid for a duration
	// below Never.
	SetSandboxPolicy(ctx context.Context, orgID, env string, p Policy) error
	// SandboxPolicy returns what SetSandboxPolicy stored for env (the zero
	// Policy when nothing was). DeleteEnvironment deletes it.
	SandboxPolicy(ctx context.Context, orgID, env string) (Policy, error)
}

// RateLimits keeps rate limits in the store, so that they hold across hub
// replicas: a caller cannot dodge one by reaching another replica. Each key
// has a token bucket (burst tokens, one more every `every`), stored as the
// time at which it is full again (the generic cell rate algorithm), so
// taking a token is one statement.
type RateLimits interface {
	// TakeToken spends one of key's tokens at `at`. When there is none it
	// returns false and how long until there will be one, and changes
	// nothing. ErrInvalid for an empty key, every <= 0 or burst < 1.
	TakeToken(ctx context.Context, key string, every time.Duration, burst int, at time.Time) (ok bool, wait time.Duration, err error)
	// ReturnToken gives back a token TakeToken spent (an attempt that
	// turned out well). A bucket never holds more than burst tokens.
	ReturnToken(ctx context.Context, key string, every time.Duration) error
	// DeleteRateLimits forgets the buckets that are full at `at` (they
	// hold nothing a new bucket would not) and returns how many.
	DeleteRateLimits(ctx context.Context, at time.Time) (int64, error)
}

// Replicas records the hub replicas serving from one database and which
// of them holds each machine's tunnel, so that a call reaching one replica
// can be forwarded to the one that holds the machine.
type Replicas interface {
	// RegisterReplica stores r (or updates it: a replica that registers
	// again keeps its ID). ErrInvalid without an ID or times.
	RegisterReplica(ctx context.Context, r Replica) error
	// ReplicaHeartbeat records that the replica was alive at `at`.
	// ErrNotFound if it is not registered (others expired it: it must
	// register again and record its routes again).
	ReplicaHeartbeat(ctx context.Context, id string, at time.Time) error
	// ListReplicas returns the registered replicas by ID.
	ListReplicas(ctx context.Context) ([]Replica, error)
	// DeleteReplica deletes a replica and its routes; deleting a missing
	// one is not an error.
	DeleteReplica(ctx context.Context, id string) error
	// ExpireReplicas deletes the replicas whose last heartbeat is before
	// `before`, with their routes, and returns how many.
	ExpireReplicas(ctx context.Context, before time.Time) (int64, error)
	// SetRoute records that the replica holds the machine's tunnel since
	// `at` (a newer tunnel replaces any older route). ErrNotFound if the
	// replica is not registered.
	SetRoute(ctx context.Context, machineID, replicaID string, at time.Time) error
	// DeleteRoute deletes the machine's route if that replica holds it (a
	// route another replica took since stays).
	DeleteRoute(ctx context.Context, machineID, replicaID string) error
	// Route returns the machine's route, if its replica heartbeat at or
	// after aliveSince; ErrNotFound otherwise.
	Route(ctx context.Context, machineID string, aliveSince time.Time) (Route, error)
	// ListRoutes returns the routes of the org's machines through replicas
	// that heartbeat at or after aliveSince, by machine ID.
	ListRoutes(ctx context.Context, orgID string, aliveSince time.Time) ([]Route, error)
}

// Replica is a hub replica's stored form.
type Replica struct {
	ID          string
	Addr        string // host:port other replicas forward calls to
	StartedAt   time.Time
	HeartbeatAt time.Time
}

// Route says which replica holds a machine's tunnel.
type Route struct {
	MachineID string
	ReplicaID string
	Addr      string // the replica's Addr
	Since     time.Time
}

// Sandbox is a sandbox's stored form.
type Sandbox struct {
	ID           string // sb-…, also its machine id
	OrgID        string
	Environment  string
	Conversation string // "" while warm
	Warm         bool
	Image        string // what it runs: repo@sha256:… or an image id
	ContainerID  string // "" until created
	Hub          string // the hub instance that drives its container
	CreatedAt    time.Time
	LastUsedAt   time.Time
	// ExpiresAt is when the sandbox is removed, used or not (an agent run's
	// TTL); zero: when idle, as conversations' sandboxes are.
	ExpiresAt time.Time
	// Token is the id of the API token whose call made (or claimed) it:
	// the per-token cap counts it, and it is the one member token that may
	// call a sandbox holding secrets; "" for the hub's own (warm,
	// validation).
	Token string
	// HoldsSecrets: an agent run's resolved secrets were (or are being)
	// delivered into it; only admins and Token may call it.
	HoldsSecrets bool
	// State is SandboxRunning, SandboxPaused or SandboxStopped, since
	// StateAt (zero: since creation) for StateReason ("idle 30m").
	State       string
	StateAt     time.Time
	StateReason string
	// WorkspaceBytes is what /workspace held when last measured, at
	// WorkspaceAt; -1: never measured.
	WorkspaceBytes int64
	WorkspaceAt    time.Time
	// ArchiveID names the archive (in the hub's archive store) that holds
	// the workspace of an archived sandbox; "" in every other state.
	ArchiveID string
}

// Sandbox states: its processes run; are frozen in memory (no CPU); are
// gone, its container stopped and its /workspace volume kept.
const (
	SandboxRunning = "running"
	SandboxPaused  = "paused"
	SandboxStopped = "stopped"
	// SandboxArchived: its workspace is in the archive store (ArchiveID),
	// its container and volume removed.
	SandboxArchived = "archived"
)

// SandboxStates are the states a sandbox row may hold.
var SandboxStates = []string{SandboxRunning, SandboxPaused, SandboxStopped, SandboxArchived}

// Never, as a Policy duration, turns that step off.
const Never time.Duration = -1

// Policy is an environment's own lifecycle policy: how long its sandboxes
// idle before they are paused, stopped and removed. A zero duration is the
// hub's default; Never turns the step off.
type Policy struct {
	PauseAfter, StopAfter, ArchiveAfter, DeleteAfter time.Duration
}

// Environment states.
const (
	EnvValidating = "validating"
	EnvReady      = "ready"
	EnvRejected   = "rejected"
)

// Environment is a custom image environment's stored form.
type Environment struct {
	OrgID      string
	Name       string
	Image      string // the reference as given
	Network    string // "public" or "none"
	State      string // EnvValidating, EnvReady, EnvRejected
	Pinned     string // repo@sha256:… ("" until a validation passed)
	Reason     string // one line: progress, or why it was rejected
	Report     json.RawMessage
	Inventory  json.RawMessage
	Running    string // "", "create", "update", "revalidate"
	Generation int64
	CreatedAt  time.Time
	UpdatedAt  time.Time
	// WorkspaceMax bounds its sandboxes' /workspace, in bytes; 0: the
	// hub's default (agenthub serve --sandbox-workspace-max).
	WorkspaceMax int64
	// Isolation is "runc" or "gvisor" ("" at create: runc).
	Isolation string
}

// ActivityLog stores the operations machines report, per org, with bounded
// retention.
type ActivityLog interface {
	// AppendActivity stores the machine's records in its org. Records with
	// a sequence number already stored for the machine are skipped, so a
	// resumed watch that overlaps is harmless.
	AppendActivity(ctx context.Context, machineID string, recs []Activity) error
	// LastSeq returns the machine's cursor: the number of its first record
	// appended, then advanced by one with each record numbered one past it
	// (0: none yet). A record numbered past a gap is stored but does not
	// move it, so a forged high number cannot make a resumed watch skip the
	// records after the cursor. Pruning does not
	// lower it, so a resumed watch never replays what was pruned.
	LastSeq(ctx context.Context, machineID string) (uint64, error)
	// ListActivity returns the records q selects in ID (arrival) order.
	ListActivity(ctx context.Context, q ActivityQuery) ([]Activity, error)
	// PruneActivity deletes records beyond the newest keepPerOrg of each org
	// (0: no count limit), the oldest of each org whose records hold more
	// than keepBytesPerOrg bytes (0: no byte limit), and records older than
	// before (zero: no age limit), and returns how many.
	PruneActivity(ctx context.Context, keepPerOrg int, keepBytesPerOrg int64, before time.Time) (int64, error)
}

// Org is an organisation: the unit that owns tokens, machines and activity.
type Org struct {
	ID        string
	Name      string
	CreatedAt time.Time
}

// Role is what an API token may do.
type Role string

// Roles.
const (
	RoleAdmin  Role = "admin"  // everything, including tokens, codes and revoking machines
	RoleMember Role = "member" // use the org's machines and read its activity
)

// Valid reports whether r is a known role.
func (r Role) Valid() bool { return r == RoleAdmin || r == RoleMember }

// TokenHash is the SHA-256 of an API token, the form in which it is stored.
type TokenHash [32]byte

// Token is an API token's stored form.
type Token struct {
	ID    string
	OrgID string
	// Name says who uses the token ("ci", "chat-backend"); it is the actor
	// recorded in activity. Unique among the org's live tokens.
	Name string
	Role Role
	// Owner: the token acts for the hub's owner, in every org (creates
	// orgs, names any org with --org). Only an admin token is an owner.
	Owner      bool
	Hash       TokenHash
	CreatedAt  time.Time
	LastUsedAt time.Time // zero: never used
	RevokedAt  time.Time // zero: live
}

// PairingCode is a pairing code's stored form. A code is XXXX-XXXX; its
// first half selects the row (Selector), the whole code proves it (MAC).
type PairingCode struct {
	ID             string
	OrgID          string
	Selector       []byte // HMAC of the code's first half: the lookup key, unique
	MAC            []byte // HMAC of the whole normalised code
	CreatedBy      string // name of the token that created it
	CreatedAt      time.Time
	ExpiresAt      time.Time
	UsedAt         time.Time // zero: not used
	UsedBy         string    // ID of the machine it paired
	UsedFrom       string    // remote address that redeemed it
	FailedAttempts int       // wrong guesses counted against it
	LockedAt       time.Time // zero: not locked
}

// Live reports whether the code can still be redeemed at now.
func (c PairingCode) Live(now time.Time) bool {
	return c.UsedAt.IsZero() && c.LockedAt.IsZero() && now.Before(c.ExpiresAt)
}

// Machine is a paired machine (or a sandbox). Whether it is online is not
// stored: the hub knows from its live tunnels.
type Machine struct {
	ID         string // "m-" and 12 random characters
	OrgID      string
	Name       string // shown to people; defaults to the hostname
	Hostname   string
	OS         string // GOOS
	Arch       string // GOARCH
	Version    string // agentd version
	PublicKey  ed25519.PublicKey
	CreatedAt  time.Time
	LastSeenAt time.Time // zero: never connected
	RevokedAt  time.Time // zero: not revoked
}

// Activity is one operation a machine reported, or the hub recorded.
type Activity struct {
	ID        int64  // assigned by the store, increasing in arrival order; a cursor
	OrgID     string // set by the store from the machine
	MachineID string // set by the store: the machine whose sequence numbers Seq is of
	Seq       uint64 // the machine's sequence number
	Time      time.Time
	Record    json.RawMessage // the record as JSON
	// Source is who made the record: SourceHub or SourceDaemon (empty:
	// SourceDaemon).
	Source string
	// Subject is the machine the record is about (empty: MachineID): a
	// routed call's target in the hub's records.
	Subject string
}

// Sources of activity records (the values of wire.SourceHub and
// wire.SourceDaemon).
const (
	// SourceHub marks the hub's own records: of the calls it routed (the
	// actor from the caller's token) and of its own actions. Fact.
	SourceHub = "hub"
	// SourceDaemon marks a machine's account of its own work, as it
	// reported it: unverified.
	SourceDaemon = "daemon"
)

// ActivityQuery selects activity records.
type ActivityQuery struct {
	OrgID     string // required
	MachineID string // optional: only the records about this machine (Subject)
	AfterID   int64  // only records with ID > AfterID
	Limit     int    // at most this many (default 100, at most 1000)
	// Newest selects the newest Limit records instead of the oldest; they
	// still come back oldest first.
	Newest bool
}

// Limits of ActivityQuery.Limit.
const (
	DefaultActivityLimit = 100
	MaxActivityLimit     = 1000
)
