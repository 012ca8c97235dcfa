package console

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/coder/websocket"
	"go.uber.org/zap"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/devdepot-ai/agentd/internal/errs"
	"github.com/devdepot-ai/agentd/internal/rpcerr"
	hubv1 "github.com/devdepot-ai/agentd/proto/gen/agentd/hub/v1"
	agentdv1 "github.com/devdepot-ai/agentd/proto/gen/agentd/v1"
)

// The methods a terminal calls on its machine or sandbox.
const (
	MethodStart  = "/agentd.v1.ProcessService/Start"
	MethodAttach = "/agentd.v1.ProcessService/Attach"
	MethodInput  = "/agentd.v1.ProcessService/Input"
	MethodResize = "/agentd.v1.ProcessService/Resize"
	MethodSignal = "/agentd.v1.ProcessService/Signal"
)

// Kinds of the hub's records of console terminals.
const (
	// KindTerminal is one page's time on a terminal: who, where, which
	// process, bytes each way, and how it ended.
	KindTerminal = "terminal"
	// KindTerminalInput is what was typed into a terminal, recorded only
	// when the hub runs with --record-terminal-input.
	KindTerminalInput = "terminal.input"
)

// TerminalTag is the tag of the shells the console starts (agentctl ps
// shows it).
const TerminalTag = "console-terminal"

// terminalShell is what a new terminal runs: the user's login shell, by
// way of /bin/sh, which every Unix machine and sandbox image has.
var terminalShell = []string{"/bin/sh", "-c", `exec "${SHELL:-/bin/sh}" -l`}

// Bounds of what a page may ask.
const (
	maxTermSize   = 1000     // rows or columns
	maxTermFrame  = 64 << 10 // bytes of one message from the page
	inputRecordAt = 4 << 10  // recorded keystrokes are stored in records of at most this
	endGrace      = 3 * time.Second
)

// terminalData is the terminal page's.
type terminalData struct {
	Machine   string // machine or sandbox id
	Label     string // what the heading calls it
	Sandbox   bool
	Process   string // the process to reattach to (the URL's p), or ""
	Recording bool   // keystrokes are recorded (the page says so)
}

func (c *Console) terminalPage(w http.ResponseWriter, r *http.Request, s *session) {
	id := r.PathValue("machine")
	d := terminalData{Machine: id, Process: r.URL.Query().Get("p"), Recording: c.opts.RecordTerminalInput}
	if strings.HasPrefix(id, "sb-") {
		sb, err := c.findSandbox(s, id)
		if err != nil {
			c.fail(w, r, s, err)
			return
		}
		d.Sandbox = true
		d.Label = "sandbox " + sb.GetId() + " (" + sb.GetEnvironment() + ")"
	} else {
		m, err := c.findMachine(s, id)
		if err != nil {
			c.fail(w, r, s, err)
			return
		}
		if machineStatus(m.GetStatus()) == "revoked" {
			c.fail(w, r, s, errs.New(errs.Precondition, "machine %s was revoked", id))
			return
		}
		d.Label = "machine " + m.GetName()
	}
	c.render(w, http.StatusOK, c.view("terminal", s, d))
}

func (c *Console) findSandbox(s *session, id string) (*hubv1.Sandbox, error) {
	resp, err := c.opts.Backend.Environments().ListSandboxes(s.ctx, &hubv1.ListSandboxesRequest{})
	if err != nil {
		return nil, err
	}
	for _, sb := range resp.GetSandboxes() {
		if sb.GetId() == id {
			return sb, nil
		}
	}
	return nil, errs.New(errs.NotFound, "sandbox %s not found in org %s", id, s.who.Org)
}

// termMsg is a JSON control message, either way.
type termMsg struct {
	T      string `json:"t"`
	ID     string `json:"id,omitempty"`
	Rows   uint32 `json:"rows,omitempty"`
	Cols   uint32 `json:"cols,omitempty"`
	Offset int64  `json:"offset,omitempty"`
	Bytes  int64  `json:"bytes,omitempty"`
	Text   string `json:"text,omitempty"`
	Final  bool   `json:"final,omitempty"` // an error after which reconnecting is useless
}

// terminalSocket is a page's connection to one PTY: it starts the shell
// (no p given) or attaches to process p from offset from, then carries
// output to the page and keystrokes, resizes and "end" to the process.
// The process outlives the connection: a reload or a dropped network
// attaches again, with replay from the page's last offset.
func (c *Console) terminalSocket(w http.ResponseWriter, r *http.Request, s *session) {
	q := r.URL.Query()
	machine := r.PathValue("machine")
	id := q.Get("p")
	from, err := strconv.ParseInt(q.Get("from"), 10, 64)
	if q.Get("from") == "" {
		from, err = 0, nil
	}
	rows, cols := termDim(q.Get("rows"), 24), termDim(q.Get("cols"), 80)
	if err != nil || from < 0 || rows == 0 || cols == 0 || len(id) > 128 {
		http.Error(w, "bad terminal request: want p=PROCESS (optional), from=OFFSET ≥ 0, rows and cols 1–1000", http.StatusBadRequest)
		return
	}
	// Accept checks that Origin is this host: another site's page cannot
	// open a terminal with the visitor's cookie (it is SameSite=Strict too).
	ws, err := websocket.Accept(w, r, nil)
	if err != nil {
		return // Accept answered (403 for a foreign Origin)
	}
	ws.SetReadLimit(maxTermFrame)
	t := &terminal{c: c, ws: ws, machine: machine, who: s.who.Name, began: c.opts.Now(), reattach: id != ""}
	ctx, cancel := context.WithCancelCause(s.ctx)
	defer cancel(nil)
	go t.recheckSession(ctx, r, cancel)
	go t.keepalive(ctx)
	err = t.run(ctx, id, from, rows, cols)
	if cause := context.Cause(ctx); errors.Is(cause, ErrSignedOut) {
		t.mu.Lock()
		t.signedOut = true
		t.mu.Unlock()
		t.record(context.WithoutCancel(s.ctx), nil)
		return // recheckSession told the page
	}
	t.record(context.WithoutCancel(s.ctx), err)
	if err != nil && !errors.Is(err, context.Canceled) {
		_ = t.sendJSON(context.Background(), termMsg{T: "error", Text: rpcerr.Message(err)})
		_ = ws.Close(websocket.StatusPolicyViolation, "")
		return
	}
	_ = ws.Close(websocket.StatusNormalClosure, "")
}

// sessionRecheck is how often an open terminal checks that its session
// still stands: a revoked token or a sign-out ends its terminals too.
const sessionRecheck = 10 * time.Second

func (t *terminal) recheckSession(ctx context.Context, r *http.Request, cancel context.CancelCauseFunc) {
	tick := time.NewTicker(sessionRecheck)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		if _, err := t.c.session(r.WithContext(ctx)); errors.Is(err, ErrSignedOut) || errors.Is(err, errNoSession) {
			err := fmt.Errorf("%w: sign in again to reattach (the shell keeps running)", ErrSignedOut)
			// Told before the cancel: cancelling a read closes the websocket.
			_ = t.sendJSON(ctx, termMsg{T: "error", Text: err.Error(), Final: true})
			cancel(err)
			return
		}
	}
}

// pingEvery is how often the hub pings a terminal's page: proxies and
// load balancers cut websockets idle for a minute (the page would
// reattach, but need not).
const pingEvery = 15 * time.Second

// keepalive pings the page until ctx ends. A page that does not answer
// within pingEvery is gone (a laptop that slept, a network that vanished
// without a word): the connection is closed, so that its Attach stream
// ends and a sandbox it kept in use can idle (a live page reattaches).
func (t *terminal) keepalive(ctx context.Context) {
	tick := time.NewTicker(pingEvery)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		pctx, cancel := context.WithTimeout(ctx, pingEvery)
		err := t.ws.Ping(pctx)
		cancel()
		if err != nil && ctx.Err() == nil {
			_ = t.ws.CloseNow()
			return
		}
	}
}

func termDim(s string, def uint32) uint32 {
	if s == "" {
		return def
	}
	n, err := strconv.ParseUint(s, 10, 32)
	if err != nil || n < 1 || n > maxTermSize {
		return 0
	}
	return uint32(n)
}

// terminal is one connection's state.
type terminal struct {
	c        *Console
	ws       *websocket.Conn
	machine  string
	who      string
	began    time.Time
	reattach bool

	wmu sync.Mutex // one writer to ws at a time

	mu        sync.Mutex
	id        string
	in, out   int64 // bytes typed, bytes shown
	exit      string
	ended     bool   // the page asked to end it
	signedOut bool   // the session ended under it
	typed     []byte // keystrokes not yet recorded (recording on)
	typedWhen time.Time
}

func (t *terminal) run(ctx context.Context, id string, from int64, rows, cols uint32) error {
	b := t.c.opts.Backend
	var events func() (*agentdv1.ProcessEvent, error)
	var doneOut func(error) error
	if id == "" {
		cctx, pc, done, err := b.Process(ctx, t.machine, MethodStart)
		if err != nil {
			return err
		}
		st, err := pc.Start(cctx, &agentdv1.StartRequest{Argv: terminalShell, OpenStdin: true, Tag: TerminalTag,
			Env: map[string]string{"TERM": "xterm-256color"}, Pty: &agentdv1.PtySize{Rows: rows, Cols: cols}})
		if err != nil {
			return done(err)
		}
		doneOut = done
		events = func() (*agentdv1.ProcessEvent, error) {
			m, err := st.Recv()
			return m.GetEvent(), err
		}
	} else {
		cctx, pc, done, err := b.Process(ctx, t.machine, MethodAttach)
		if err != nil {
			return err
		}
		st, err := pc.Attach(cctx, &agentdv1.AttachRequest{Id: id, FromOffset: from})
		if err != nil {
			return done(err)
		}
		doneOut = done
		events = func() (*agentdv1.ProcessEvent, error) {
			m, err := st.Recv()
			return m.GetEvent(), err
		}
	}
	first, err := events()
	if err != nil {
		return doneOut(err)
	}
	if first.GetStarted() == nil {
		return doneOut(errors.New("the process's first event was not its start"))
	}
	t.mu.Lock()
	t.id = first.GetStarted().GetId()
	t.mu.Unlock()
	if err := t.sendJSON(ctx, termMsg{T: "started", ID: t.id}); err != nil {
		return doneOut(err)
	}
	if id == "" {
		t.c.sizes.set(t.id, rows, cols)
	} else if !t.c.sizes.is(t.id, rows, cols) {
		// A page that reattaches may have another size than the PTY.
		if err := t.resize(ctx, rows, cols); err != nil {
			t.c.log.Debug("terminal resize", zap.Error(err))
		}
	}

	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	inCh := make(chan error, 1)
	go func() {
		defer cancel() // the page left: stop following the output
		inCh <- t.readPage(ctx)
	}()
	outErr := doneOut(t.pump(ctx, events))
	cancel()
	inErr := <-inCh
	t.flushTyped(context.WithoutCancel(ctx), true)
	switch {
	case errors.Is(inErr, errPageGone) || errors.Is(outErr, errPageGone):
		return nil // the page left; the process runs on
	case outErr != nil && t.exitText() == "" && !errors.Is(outErr, context.Canceled):
		return outErr
	case errors.Is(inErr, context.Canceled):
		return nil
	}
	return inErr
}

// errPageGone: the page closed its websocket or the connection broke.
var errPageGone = errors.New("the page left")

// pump sends the process's events to the page until it exits or ctx ends.
func (t *terminal) pump(ctx context.Context, events func() (*agentdv1.ProcessEvent, error)) error {
	for {
		e, err := events()
		if err != nil {
			if ctx.Err() != nil {
				return context.Canceled
			}
			return err
		}
		switch {
		case e.GetOutput() != nil:
			o := e.GetOutput()
			buf := make([]byte, 8+len(o.GetData()))
			binary.BigEndian.PutUint64(buf, uint64(o.GetOffset()))
			copy(buf[8:], o.GetData())
			t.mu.Lock()
			t.out += int64(len(o.GetData()))
			t.mu.Unlock()
			if err := t.write(ctx, websocket.MessageBinary, buf); err != nil {
				return fmt.Errorf("%w: %w", errPageGone, err)
			}
		case e.GetGap() != nil:
			g := e.GetGap()
			if err := t.sendJSON(ctx, termMsg{T: "gap", Offset: g.GetOffset(), Bytes: g.GetBytes()}); err != nil {
				return err
			}
		case e.GetExited() != nil:
			text := exitText(e.GetExited())
			t.mu.Lock()
			t.exit = text
			t.mu.Unlock()
			if err := t.sendJSON(ctx, termMsg{T: "exit", Text: text}); err != nil {
				return err
			}
			return nil
		}
	}
}

func exitText(x *agentdv1.Exited) string {
	var s string
	if x.GetSignal() != "" {
		s = "ended by signal " + x.GetSignal()
	} else {
		s = fmt.Sprintf("exited with code %d", x.GetExitCode())
	}
	if x.GetReason() != "" {
		s += ": " + x.GetReason()
	}
	return s
}

func (t *terminal) exitText() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.exit
}

// readPage carries the page's messages to the process until the page
// goes or ctx ends. Keystrokes ride one Input stream, opened at the first.
func (t *terminal) readPage(ctx context.Context) error {
	var input agentdv1.ProcessService_InputClient
	var inputDone func(error) error
	defer func() {
		if input != nil {
			_, err := input.CloseAndRecv()
			_ = inputDone(err)
		}
	}()
	for {
		typ, data, err := t.ws.Read(ctx)
		if err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			return fmt.Errorf("%w: %w", errPageGone, err)
		}
		if typ == websocket.MessageBinary {
			if input == nil {
				cctx, pc, done, err := t.c.opts.Backend.Process(ctx, t.machine, MethodInput)
				if err != nil {
					return err
				}
				if input, err = pc.Input(cctx); err != nil {
					return done(err)
				}
				inputDone = done
				if err := input.Send(&agentdv1.InputRequest{Id: t.id}); err != nil {
					return err
				}
			}
			if err := input.Send(&agentdv1.InputRequest{Data: data}); err != nil {
				_, rerr := input.CloseAndRecv()
				input = nil
				return inputDone(rerr)
			}
			t.typedBytes(ctx, data)
			continue
		}
		var m termMsg
		if err := json.Unmarshal(data, &m); err != nil {
			_ = t.sendJSON(ctx, termMsg{T: "error", Text: "bad message: want JSON {t: resize|end}"})
			continue
		}
		switch m.T {
		case "resize":
			if m.Rows < 1 || m.Cols < 1 || m.Rows > maxTermSize || m.Cols > maxTermSize {
				_ = t.sendJSON(ctx, termMsg{T: "error", Text: "bad size: rows and cols 1–1000"})
				continue
			}
			if err := t.resize(ctx, m.Rows, m.Cols); err != nil {
				_ = t.sendJSON(ctx, termMsg{T: "error", Text: "resize: " + rpcerr.Message(err)})
			}
		case "end":
			t.mu.Lock()
			t.ended = true
			t.mu.Unlock()
			if err := t.end(ctx); err != nil {
				_ = t.sendJSON(ctx, termMsg{T: "error", Text: "end: " + rpcerr.Message(err)})
			}
		default:
			_ = t.sendJSON(ctx, termMsg{T: "error", Text: "unknown message " + strconv.Quote(m.T)})
		}
	}
}

func (t *terminal) resize(ctx context.Context, rows, cols uint32) error {
	cctx, pc, done, err := t.c.opts.Backend.Process(ctx, t.machine, MethodResize)
	if err != nil {
		return err
	}
	_, err = pc.Resize(cctx, &agentdv1.ResizeRequest{Id: t.id, Size: &agentdv1.PtySize{Rows: rows, Cols: cols}})
	if err == nil {
		t.c.sizes.set(t.id, rows, cols)
	}
	return done(err)
}

// termSizes remembers the last size of at most maxSizes PTYs.
type termSizes struct {
	mu sync.Mutex
	m  map[string][2]uint32
}

const maxSizes = 4096

func (s *termSizes) set(id string, rows, cols uint32) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.m == nil || len(s.m) >= maxSizes {
		s.m = map[string][2]uint32{} // forgetting costs one redraw
	}
	s.m[id] = [2]uint32{rows, cols}
}

func (s *termSizes) is(id string, rows, cols uint32) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.m[id] == [2]uint32{rows, cols}
}

// end hangs up the shell, as closing a terminal window does (the shell
// passes it to its jobs), and kills what is left after endGrace.
func (t *terminal) end(ctx context.Context) error {
	signal := func(sig string) error {
		cctx, pc, done, err := t.c.opts.Backend.Process(ctx, t.machine, MethodSignal)
		if err != nil {
			return err
		}
		_, err = pc.Signal(cctx, &agentdv1.SignalRequest{Id: t.id, Signal: sig, Grace: durationpb.New(endGrace)})
		return done(err)
	}
	if err := signal("HUP"); err != nil {
		return err
	}
	// Owned by the timer: it ends after endGrace even if the page left.
	kctx := context.WithoutCancel(ctx)
	time.AfterFunc(endGrace, func() {
		if t.exitText() == "" {
			ctx = kctx
			_ = signal("KILL")
		}
	})
	return nil
}

func (t *terminal) write(ctx context.Context, typ websocket.MessageType, b []byte) error {
	t.wmu.Lock()
	defer t.wmu.Unlock()
	return t.ws.Write(ctx, typ, b)
}

func (t *terminal) sendJSON(ctx context.Context, m termMsg) error {
	b, _ := json.Marshal(m)
	return t.write(ctx, websocket.MessageText, b)
}
