package sandboxes

import (
	"context"
	"errors"
	"io"
	"strconv"
	"strings"
	"time"

	"go.uber.org/zap"
	"google.golang.org/grpc/metadata"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/devdepot-ai/agentd/internal/hub/store"
	"github.com/devdepot-ai/agentd/internal/sandbox"
	"github.com/devdepot-ai/agentd/internal/wire"
	agentdv1 "github.com/devdepot-ai/agentd/proto/gen/agentd/v1"
)

// measureTimeout bounds one measure of a workspace (du of every file).
const measureTimeout = 10 * time.Second

// measure records what a running sandbox's /workspace holds: du -sxk
// through its agentd (busybox's du takes it too), before the sandbox is
// paused or stopped, so that sandbox ls shows the size of the ones that no
// longer run. A sandbox that cannot be measured keeps its last figure.
func (m *Manager) measure(ctx context.Context, sb store.Sandbox) {
	mc, ok := m.o.Tunnels.Get(sb.ID)
	if !ok {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, measureTimeout)
	defer cancel()
	ctx = metadata.AppendToOutgoingContext(ctx, wire.MDActor, "hub")
	st, err := agentdv1.NewProcessServiceClient(mc).Start(ctx, &agentdv1.StartRequest{
		Argv: []string{"du", "-sxk", sandbox.WorkspaceDir}, Timeout: durationpb.New(measureTimeout), Tag: "hub: workspace size",
	})
	if err != nil {
		m.log.Debug("measuring a workspace", zap.String("sandbox", sb.ID), zap.Error(err))
		return
	}
	var out strings.Builder
	for {
		r, err := st.Recv()
		if errors.Is(err, io.EOF) || err != nil {
			return
		}
		ev := r.GetEvent()
		if o := ev.GetOutput(); o != nil && o.GetStream() == agentdv1.OutputStream_OUTPUT_STREAM_STDOUT && out.Len() < 4096 {
			out.Write(o.GetData())
		}
		if x := ev.GetExited(); x != nil {
			// du exits 1 when a file vanished under it: its total stands.
			f := strings.Fields(out.String())
			if len(f) == 0 {
				return
			}
			kib, err := strconv.ParseInt(f[0], 10, 64)
			if err != nil || kib < 0 {
				return
			}
			if err := m.o.Store.SetSandboxWorkspace(ctx, sb.ID, kib<<10, m.o.Now()); err != nil {
				m.log.Warn("recording a workspace's size", zap.String("sandbox", sb.ID), zap.Error(err))
			}
			return
		}
	}
}
