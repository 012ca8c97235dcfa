package console

import (
	"context"
	"errors"
	"io"
	"time"

	"google.golang.org/grpc/codes"

	"github.com/devdepot-ai/agentd/internal/rpcerr"
	agentdv1 "github.com/devdepot-ai/agentd/proto/gen/agentd/v1"
)

// OutputIdle is how long a running process's output may stay quiet before
// the page shows what it has (the replay of retained output comes at once).
const OutputIdle = 500 * time.Millisecond

// CollectOutput reads events until the process's exit, the stream's end, or
// (a process still running) a quiet spell of idle.
func CollectOutput(ctx context.Context, st agentdv1.ProcessService_AttachClient, idle time.Duration) ([]*agentdv1.ProcessEvent, error) {
	type ev struct {
		e   *agentdv1.ProcessEvent
		err error
	}
	ch := make(chan ev, 16)
	go func() {
		defer close(ch)
		for {
			m, err := st.Recv()
			select {
			case ch <- ev{m.GetEvent(), err}:
			case <-ctx.Done(): // the caller returned and cancelled ctx
				return
			}
			if err != nil || m.GetEvent().GetExited() != nil {
				return
			}
		}
	}()
	var evs []*agentdv1.ProcessEvent
	t := time.NewTimer(idle)
	defer t.Stop()
	for {
		select {
		case e, ok := <-ch:
			switch {
			case !ok || errors.Is(e.err, io.EOF):
				return evs, nil
			case e.err != nil && rpcerr.Code(e.err) == codes.DeadlineExceeded && len(evs) > 0:
				return evs, nil
			case e.err != nil:
				return nil, e.err
			}
			evs = append(evs, e.e)
			if e.e.GetExited() != nil {
				return evs, nil
			}
			t.Reset(idle)
		case <-t.C:
			if len(evs) > 0 {
				return evs, nil // still running: what it wrote so far
			}
			t.Reset(idle)
		}
	}
}
