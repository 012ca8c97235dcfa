package console

import (
	"context"
	"embed"
	"errors"
	"io/fs"
	"net/http"
	"time"

	"go.uber.org/zap"
	"google.golang.org/grpc/codes"

	"github.com/devdepot-ai/agentd/internal/hub/store"
	"github.com/devdepot-ai/agentd/internal/rpcerr"
	hubv1 "github.com/devdepot-ai/agentd/proto/gen/agentd/hub/v1"
	agentdv1 "github.com/devdepot-ai/agentd/proto/gen/agentd/v1"
)

// Prefix is the path the console is served under.
const Prefix = "/console/"

// Errors a Backend returns.
var (
	// ErrBadToken: the API token given at sign-in is unknown, malformed or
	// revoked.
	ErrBadToken = errors.New("bad API token")
	// ErrSignedOut: the session's token was revoked or its org is gone.
	ErrSignedOut = errors.New("session ended")
)

// Identity is who a session signs in.
type Identity struct {
	Name  string // the token's name (the actor in activity)
	Org   string // org name
	Admin bool   // may change things
	Owner bool   // an owner token, or the owner's console link (Org: the one it switched to)
}

// Backend is what the console needs of the hub: its service
// implementations, called in process as the caller As returns.
type Backend interface {
	// CheckToken resolves an API token (ErrBadToken if it is not a live
	// one) to who it is and a session for it (OrgID and TokenHash set).
	CheckToken(ctx context.Context, raw string) (Identity, store.ConsoleSession, error)
	// As returns ctx carrying the session's caller for the services below;
	// ErrSignedOut if the session no longer stands.
	As(ctx context.Context, s store.ConsoleSession) (context.Context, Identity, error)
	// Admin, Environments and Activity are the hub's services.
	Admin() hubv1.AdminServiceServer
	Environments() hubv1.EnvironmentServiceServer
	Activity() hubv1.ActivityServiceServer
	// Changed returns a channel closed at the next change a live page
	// may show (activity stored, a machine online or offline).
	Changed() <-chan struct{}
	// Output reads a process's retained output through its machine,
	// failing at once when the machine is offline.
	Output(ctx context.Context, machine, processID string) ([]*agentdv1.ProcessEvent, error)
	// FollowOutput gives fn a running process's events from the offsets
	// given (stdout or pty, stderr) until it exits, fn fails or ctx ends.
	FollowOutput(ctx context.Context, machine, processID string, from, stderrFrom int64, fn func(*agentdv1.ProcessEvent) error) error
	// Processes lists a machine's processes, asking it through the hub's
	// routing (as agentctl ps does): an offline machine fails at once, and
	// ctx's deadline bounds one that does not answer.
	Processes(ctx context.Context, machine string) ([]*agentdv1.ProcessInfo, error)
	// Process routes one ProcessService call (method: its full name) to
	// a machine or sandbox as the hub routes every call, as the caller of
	// ctx (its org and rights; a paused or stopped sandbox wakes): the
	// context and client for the call, and done, to be called with the
	// call's error when it has ended (it returns the error to report).
	Process(ctx context.Context, machine, method string) (context.Context, agentdv1.ProcessServiceClient, func(error) error, error)
	// Record stores one record of the hub's own about machine (a machine
	// or sandbox id) in the org of ctx's caller.
	Record(ctx context.Context, machine string, r *agentdv1.ActivityRecord)
	// Exposures lists the org's live previews the caller may see, of its
	// machines and sandboxes, oldest first.
	Exposures(ctx context.Context) ([]Exposure, error)
	// Unexpose revokes one of them by ID (recorded as agentctl port
	// unexpose is); NotFound if it is not live.
	Unexpose(ctx context.Context, id string) error
	// OnlineSince says since when each machine with a live tunnel has
	// been online (ids of every org: look up only ids the caller may see).
	OnlineSince() map[string]time.Time
}

// Sessions is the part of the store the console keeps sessions in.
type Sessions = store.ConsoleSessions

// Options configures a Console. Zero fields get defaults in New.
type Options struct {
	// Backend is the hub. Required.
	Backend Backend
	// Sessions stores sessions and links. Required.
	Sessions Sessions
	// PublicURL is the hub's URL as machines reach it, shown in the
	// pairing commands. Default: the scheme and Host of each request.
	PublicURL string
	// SessionTTL is how long a sign-in lasts (default 12 h).
	SessionTTL time.Duration
	// ListTimeout bounds asking the online machines what they run, for
	// the machines page's running-commands count (default 2 s): one that
	// does not answer in time shows "no answer", never holding the page.
	ListTimeout time.Duration
	// RecordTerminalInput stores what is typed into console terminals in
	// activity (terminal.input records); the terminal page says so. Off:
	// only who opened which terminal, when, and the bytes each way.
	RecordTerminalInput bool
	// UsageEvery is how often the usage page's charts are sampled while
	// it is viewed (default 5 s).
	UsageEvery time.Duration
	// Logger receives the console's logs. Default: a no-op logger.
	Logger *zap.Logger
	// Now is the clock. Default time.Now.
	Now func() time.Time
}

// Console serves the web console.
type Console struct {
	opts    Options
	log     *zap.Logger
	handler http.Handler
	pages   *pages
	// sizes is the last size this hub gave each terminal's PTY, so that
	// a page reattaching at the same size does not make the shell redraw.
	sizes termSizes
	// usage is the usage page's series and their sampler.
	usage usageBook
}

//go:generate go run ./xtermbundle

//go:embed static
var staticFS embed.FS

// New builds a Console.
func New(opts Options) (*Console, error) {
	if opts.Backend == nil || opts.Sessions == nil {
		return nil, errors.New("console: Backend and Sessions are required")
	}
	if opts.SessionTTL <= 0 {
		opts.SessionTTL = 12 * time.Hour
	}
	if opts.ListTimeout <= 0 {
		opts.ListTimeout = 2 * time.Second
	}
	if opts.UsageEvery <= 0 {
		opts.UsageEvery = 5 * time.Second
	}
	if opts.Logger == nil {
		opts.Logger = zap.NewNop()
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	p, err := parsePages()
	if err != nil {
		return nil, err
	}
	c := &Console{opts: opts, log: opts.Logger, pages: p}
	c.usage.orgs, c.usage.stop = map[string]*usageOrg{}, make(chan struct{})
	c.handler = c.routes()
	return c, nil
}

// ServeHTTP serves every path under Prefix.
func (c *Console) ServeHTTP(w http.ResponseWriter, r *http.Request) { c.handler.ServeHTTP(w, r) }

// CSP is the Content-Security-Policy of every console response: scripts,
// styles and connections to the console's own origin only, none inline.
const CSP = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; connect-src 'self'; " +
	"form-action 'self'; frame-ancestors 'none'; base-uri 'none'"

func (c *Console) routes() http.Handler {
	mux := http.NewServeMux()
	static, _ := fs.Sub(staticFS, "static")
	mux.Handle("GET "+Prefix+"static/", http.StripPrefix(Prefix+"static/", http.FileServerFS(static)))
	mux.HandleFunc("GET "+Prefix+"{$}", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, Prefix+"machines", http.StatusSeeOther)
	})
	mux.HandleFunc("GET "+Prefix+"signin", c.signInPage)
	mux.HandleFunc("POST "+Prefix+"signin", c.signIn)
	mux.HandleFunc("GET "+Prefix+"link", c.linkPage)
	mux.HandleFunc("POST "+Prefix+"link", c.redeemLink)
	mux.HandleFunc("POST "+Prefix+"signout", c.signOut)
	mux.Handle("POST "+Prefix+"org", c.auth(c.switchOrg))

	mux.Handle("GET "+Prefix+"machines", c.auth(c.machines))
	mux.Handle("GET "+Prefix+"machines/events", c.auth(c.machineEvents))
	mux.Handle("GET "+Prefix+"machines/{id}/revoke", c.auth(c.revokeMachinePage))
	mux.Handle("POST "+Prefix+"machines/{id}/revoke", c.auth(c.revokeMachine))
	mux.Handle("POST "+Prefix+"pair", c.auth(c.pair))
	mux.Handle("GET "+Prefix+"pair/events", c.auth(c.pairEvents))

	mux.Handle("GET "+Prefix+"activity", c.auth(c.activity))
	mux.Handle("GET "+Prefix+"activity/events", c.auth(c.activityEvents))
	mux.Handle("GET "+Prefix+"activity/{id}/output", c.auth(c.output))
	mux.Handle("GET "+Prefix+"activity/{id}/output/events", c.auth(c.outputEvents))

	mux.Handle("GET "+Prefix+"terminal/{machine}", c.auth(c.terminalPage))
	mux.Handle("GET "+Prefix+"terminal/{machine}/ws", c.auth(c.terminalSocket))
	mux.Handle("GET "+Prefix+"exposures/{id}/revoke", c.auth(c.unexposePage))
	mux.Handle("POST "+Prefix+"exposures/{id}/revoke", c.auth(c.unexpose))

	mux.Handle("GET "+Prefix+"environments", c.auth(c.environments))
	mux.Handle("POST "+Prefix+"environments", c.auth(c.createEnvironment))
	mux.Handle("GET "+Prefix+"environments/{name}", c.auth(c.environment))
	mux.Handle("GET "+Prefix+"environments/{name}/events", c.auth(c.environmentEvents))
	mux.Handle("POST "+Prefix+"environments/{name}/{action}", c.auth(c.environmentAction))

	mux.Handle("GET "+Prefix+"sandboxes", c.auth(c.sandboxes))
	mux.Handle("GET "+Prefix+"sandboxes/{id}/{action}", c.auth(c.sandboxConfirm))
	mux.Handle("POST "+Prefix+"sandboxes/{id}/{action}", c.auth(c.sandboxAction))
	mux.Handle("GET "+Prefix+"usage", c.auth(c.usagePage))
	mux.Handle("GET "+Prefix+"usage/events", c.auth(c.usageEvents))

	mux.Handle("GET "+Prefix+"tokens", c.auth(c.tokens))
	mux.Handle("POST "+Prefix+"tokens", c.auth(c.createToken))
	mux.Handle("GET "+Prefix+"tokens/{id}/revoke", c.auth(c.revokeTokenPage))
	mux.Handle("POST "+Prefix+"tokens/{id}/revoke", c.auth(c.revokeToken))

	cop := http.NewCrossOriginProtection()
	cop.SetDenyHandler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "cross-origin request refused: use the console's own pages", http.StatusForbidden)
	}))
	return securityHeaders(cop.Handler(mux))
}

// securityHeaders sets what every response carries.
func securityHeaders(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		h.Set("Content-Security-Policy", CSP)
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("Referrer-Policy", "no-referrer")
		h.Set("X-Frame-Options", "DENY")
		h.Set("Cross-Origin-Opener-Policy", "same-origin")
		if r.TLS != nil {
			h.Set("Strict-Transport-Security", "max-age=31536000")
		}
		next.ServeHTTP(w, r)
	})
}

// httpStatus maps a service's error to an HTTP status and a message.
func httpStatus(err error) (int, string) {
	msg := rpcerr.Message(err)
	switch rpcerr.Code(err) {
	case codes.PermissionDenied:
		return http.StatusForbidden, msg
	case codes.NotFound:
		return http.StatusNotFound, msg
	case codes.InvalidArgument:
		return http.StatusBadRequest, msg
	case codes.AlreadyExists, codes.FailedPrecondition:
		return http.StatusConflict, msg
	case codes.Unavailable, codes.DeadlineExceeded:
		return http.StatusServiceUnavailable, msg
	case codes.Unauthenticated:
		return http.StatusUnauthorized, msg
	}
	return http.StatusInternalServerError, msg
}
