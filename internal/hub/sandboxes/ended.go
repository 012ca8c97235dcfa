package sandboxes

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"time"

	"go.uber.org/zap"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/devdepot-ai/agentd/internal/errs"
	"github.com/devdepot-ai/agentd/internal/hub/store"
	"github.com/devdepot-ai/agentd/internal/rpcerr"
	"github.com/devdepot-ai/agentd/internal/wire"
	agentdv1 "github.com/devdepot-ai/agentd/proto/gen/agentd/v1"
)

// The processes a lifecycle step ends. A stop, an archive (a stop first),
// a move to a new image (the same) or a delete ends every process of the
// sandbox, and their records go with its agentd. So, before it, the hub
// asks that agentd which processes run (at a pause too: a paused agentd
// cannot answer, and the stop of a paused sandbox is the idle policy's
// common case) and keeps them in its store; after it, it marks them ended
// with the step's reason ("sandbox stopped: idle 30m", "sandbox stopped by
// alice", "sandbox archived: idle 7d", "sandbox deleted by alice") and
// adds a process.exit record to the activity for each. From then on the
// hub answers for them, from any replica and after a restart: Attach gets
// the process's start and its exit with the reason, Wait and List its
// record, any other call the error saying so.

// listTimeout bounds the question to a sandbox's agentd before a step.
const listTimeout = 2 * time.Second

// maxListed bounds the processes kept per step.
const maxListed = 256

// hubTag starts the tag of the processes the hub itself runs in a
// sandbox (the workspace's measure): they are not the caller's.
const hubTag = "hub:"

// listProcesses keeps, as the sandbox's listed processes, those its agentd
// says run now. Without an answer (no tunnel, no reply in listTimeout)
// the ones listed before are dropped when running is set (they may have
// ended since), kept otherwise (a paused sandbox's, listed at its pause).
func (m *Manager) listProcesses(ctx context.Context, sb store.Sandbox, running bool) {
	procs, err := m.askProcesses(ctx, sb.ID)
	if err != nil {
		m.log.Debug("listing a sandbox's processes", zap.String("sandbox", sb.ID), zap.Error(err))
		if !running {
			return
		}
		procs = nil
	}
	if err := m.o.Store.SetSandboxProcesses(context.WithoutCancel(ctx), sb.ID, procs); err != nil {
		m.log.Warn("recording a sandbox's processes", zap.String("sandbox", sb.ID), zap.Error(err))
	}
}

func (m *Manager) askProcesses(ctx context.Context, id string) ([]store.SandboxProcess, error) {
	mc, ok := m.o.Tunnels.Get(id)
	if !ok {
		return nil, fmt.Errorf("sandbox %s has no tunnel", id)
	}
	ctx, cancel := context.WithTimeout(ctx, listTimeout)
	defer cancel()
	ctx = metadata.AppendToOutgoingContext(ctx, wire.MDActor, "hub")
	resp, err := agentdv1.NewProcessServiceClient(mc).List(ctx, &agentdv1.ProcessServiceListRequest{})
	if err != nil {
		return nil, err
	}
	var procs []store.SandboxProcess
	for _, p := range resp.GetProcesses() {
		if p.GetState() != agentdv1.ProcessState_PROCESS_STATE_RUNNING || p.GetId() == "" || strings.HasPrefix(p.GetTag(), hubTag) {
			continue
		}
		b, err := protojson.Marshal(p)
		if err != nil {
			continue
		}
		procs = append(procs, store.SandboxProcess{SandboxID: id, ID: p.GetId(), Info: b})
		if len(procs) == maxListed {
			break
		}
	}
	return procs, nil
}

// endProcesses marks the sandbox's listed processes ended for reason,
// now, and adds an activity record of each.
func (m *Manager) endProcesses(ctx context.Context, sb store.Sandbox, reason string) {
	ctx = context.WithoutCancel(ctx)
	ended, err := m.o.Store.EndSandboxProcesses(ctx, sb.ID, reason, m.o.Now())
	if err != nil {
		m.log.Warn("recording the end of a sandbox's processes", zap.String("sandbox", sb.ID), zap.Error(err))
		return
	}
	if m.o.RecordAbout == nil {
		return
	}
	for _, p := range ended {
		info := endedInfo(p)
		x := info.GetExited()
		what := commandOf(info)
		m.o.RecordAbout(ctx, sb.OrgID, sb.ID, &agentdv1.ActivityRecord{
			Kind: wire.KindProcessExit, ObjectId: p.ID, Command: what, Cwd: info.GetCwd(),
			Outcome: agentdv1.Outcome_OUTCOME_ERROR, ExitCode: x.GetExitCode(), Duration: x.GetDuration(),
			Error:   "killed by " + x.GetSignal() + ": " + reason,
			Summary: fmt.Sprintf("`%s` (%s) ended, killed by %s: %s", cutText(what, 200), p.ID, x.GetSignal(), reason),
		})
	}
}

// stopReason is the exit reason of the processes a stop for why ends:
// "idle 30m" → "sandbox stopped: idle 30m"; "stopped by alice" →
// "sandbox stopped by alice"; "stopped to be archived: idle 7d" →
// "sandbox archived: idle 7d"; "stopped: the environment's image
// changed" → "sandbox stopped: the environment's image changed".
func stopReason(why string) string {
	if rest, ok := strings.CutPrefix(why, "stopped to be archived"); ok {
		return "sandbox archived" + rest
	}
	if rest, ok := strings.CutPrefix(why, "stopped"); ok && (strings.HasPrefix(rest, " ") || strings.HasPrefix(rest, ":")) {
		return "sandbox stopped" + rest
	}
	return "sandbox stopped: " + why
}

// deleteReason is the exit reason of the processes a delete for why
// ends: "removed by alice" → "sandbox deleted by alice"; "its
// environment was removed" → "sandbox deleted: its environment was
// removed".
func deleteReason(why string) string {
	if rest, ok := strings.CutPrefix(why, "removed by "); ok {
		return "sandbox deleted by " + rest
	}
	return "sandbox deleted: " + why
}

// byWhom is " by NAME" for a person's action in ctx (the caller's token),
// " by request" when the caller is unnamed.
func (m *Manager) byWhom(ctx context.Context) string {
	if m.o.CallerName != nil {
		if n := m.o.CallerName(ctx); n != "" {
			return " by " + n
		}
	}
	return " by request"
}

// endedInfo is an ended process's record: as listed, exited now, killed
// by the signal the step sent it (a delete: SIGKILL, as the engine
// removes a running container; a stop: SIGTERM, on which agentd ends its
// processes before the grace's SIGKILL), with the reason.
func endedInfo(p store.SandboxProcess) *agentdv1.ProcessInfo {
	info := &agentdv1.ProcessInfo{}
	if err := protojson.Unmarshal(p.Info, info); err != nil || info.GetId() == "" {
		info = &agentdv1.ProcessInfo{Id: p.ID}
	}
	sig, num := "TERM", int32(15)
	if strings.HasPrefix(p.Reason, "sandbox deleted") {
		sig, num = "KILL", 9
	}
	x := &agentdv1.Exited{ExitCode: -1, Signal: sig, SignalNumber: num, EndTime: timestamppb.New(p.EndedAt), Reason: p.Reason}
	if st := info.GetStartTime(); st != nil && p.EndedAt.After(st.AsTime()) {
		x.Duration = durationpb.New(p.EndedAt.Sub(st.AsTime()))
	}
	info.State, info.Exited, info.StdinOpen = agentdv1.ProcessState_PROCESS_STATE_EXITED, x, false
	return info
}

func commandOf(info *agentdv1.ProcessInfo) string {
	if c := info.GetCommand(); c != "" {
		return c
	}
	return strings.Join(info.GetArgv(), " ")
}

func cutText(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}

// endedProcess returns the record of process pid of sandbox id, when a
// lifecycle step ended it.
func (m *Manager) endedProcess(ctx context.Context, id, pid string) (store.SandboxProcess, bool) {
	if pid == "" {
		return store.SandboxProcess{}, false
	}
	all, err := m.o.Store.SandboxProcesses(ctx, id)
	if err != nil {
		return store.SandboxProcess{}, false
	}
	for _, p := range all {
		if p.ID == pid && !p.EndedAt.IsZero() {
			return p, true
		}
	}
	return store.SandboxProcess{}, false
}

const processService = "/agentd.v1.ProcessService/"

// AnswerEnded answers a call to sandbox id's agentd that found no such
// process (NOT_FOUND), when a lifecycle step of the sandbox ended it:
// Attach gets the process's start and its exit with the reason, Wait its
// record; Signal, Input and Resize the error, saying what ended it. It
// returns the answer's frames (encoded), or nil and the error the caller
// gets. req is the call's request (every ProcessService request names
// its process in field 1).
func (m *Manager) AnswerEnded(ctx context.Context, id, method string, req []byte, err error) ([][]byte, error) {
	if rpcerr.Code(err) != codes.NotFound || !strings.HasPrefix(method, processService) {
		return nil, err
	}
	var named agentdv1.WaitRequest // field 1: the process's id, in every request
	if proto.Unmarshal(req, &named) != nil {
		return nil, err
	}
	p, ok := m.endedProcess(context.WithoutCancel(ctx), id, named.GetId())
	if !ok {
		return nil, err
	}
	info := endedInfo(p)
	var msgs []proto.Message
	switch strings.TrimPrefix(method, processService) {
	case "Attach":
		msgs = []proto.Message{
			&agentdv1.AttachResponse{Event: &agentdv1.ProcessEvent{Event: &agentdv1.ProcessEvent_Started{
				Started: &agentdv1.Started{Id: info.GetId(), Pid: info.GetPid(), StartTime: info.GetStartTime()}}}},
			&agentdv1.AttachResponse{Event: &agentdv1.ProcessEvent{Event: &agentdv1.ProcessEvent_Exited{Exited: info.GetExited()}}},
		}
	case "Wait":
		msgs = []proto.Message{&agentdv1.WaitResponse{Process: info}}
	default:
		return nil, errs.New(errs.NotFound, "process %s ended at %s: %s (its output went with the sandbox's agentd)",
			p.ID, p.EndedAt.UTC().Format("15:04:05 MST"), p.Reason)
	}
	frames := make([][]byte, 0, len(msgs))
	for _, msg := range msgs {
		b, merr := proto.Marshal(msg)
		if merr != nil {
			return nil, err
		}
		frames = append(frames, b)
	}
	return frames, nil
}

// EditEnded returns, for a List call to sandbox id, what adds to its
// agentd's answer the processes lifecycle steps ended (oldest first, as
// List is); nil for any other call.
func (m *Manager) EditEnded(ctx context.Context, id, method string) func([]byte) []byte {
	if method != processService+"List" {
		return nil
	}
	return func(b []byte) []byte {
		all, err := m.o.Store.SandboxProcesses(context.WithoutCancel(ctx), id)
		if err != nil || len(all) == 0 {
			return b
		}
		var resp agentdv1.ProcessServiceListResponse
		if proto.Unmarshal(b, &resp) != nil {
			return b
		}
		have := map[string]bool{}
		for _, p := range resp.GetProcesses() {
			have[p.GetId()] = true
		}
		var ended []*agentdv1.ProcessInfo
		for _, p := range all {
			if !p.EndedAt.IsZero() && !have[p.ID] {
				ended = append(ended, endedInfo(p))
			}
		}
		if len(ended) == 0 {
			return b
		}
		sort.SliceStable(ended, func(i, j int) bool {
			return ended[i].GetStartTime().AsTime().Before(ended[j].GetStartTime().AsTime())
		})
		resp.Processes = append(ended, resp.Processes...)
		out, err := proto.Marshal(&resp)
		if err != nil {
			return b
		}
		return out
	}
}
