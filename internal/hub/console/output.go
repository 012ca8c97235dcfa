package console

import (
	"fmt"
	"net/http"
	"strconv"

	"google.golang.org/grpc/codes"

	"github.com/devdepot-ai/agentd/internal/errs"
	"github.com/devdepot-ai/agentd/internal/rpcerr"
	hubv1 "github.com/devdepot-ai/agentd/proto/gen/agentd/hub/v1"
	agentdv1 "github.com/devdepot-ai/agentd/proto/gen/agentd/v1"
)

// output shows one command's full retained output (head and tail, the gap
// marked), read from its machine; ?download=1 sends it as a text file. An
// offline machine is said at once, with the output the record kept.
func (c *Console) output(w http.ResponseWriter, r *http.Request, s *session) {
	id, rec, err := c.commandRecord(s, r)
	if err != nil {
		c.fail(w, r, s, err)
		return
	}
	d := outputData{Rec: rec, Now: c.opts.Now()}
	evs, err := c.opts.Backend.Output(s.ctx, rec.GetMachineId(), rec.GetRecord().GetObjectId())
	switch {
	case rpcerr.Code(err) == codes.Unavailable || rpcerr.Code(err) == codes.FailedPrecondition || rpcerr.Code(err) == codes.NotFound:
		d.Offline = rpcerr.Message(err)
		if out := rec.GetRecord().GetOutput(); len(out) > 0 {
			d.Parts = []outputPart{{Text: string(out)}}
		}
	case err != nil:
		c.fail(w, r, s, err)
		return
	default:
		var ends streamEnds
		d.Parts, d.Running, ends = parts(evs)
		if d.Running {
			d.Live = fmt.Sprintf("%sactivity/%d/output/events?from=%d&stderr_from=%d", Prefix, id, ends.out, ends.err)
		}
	}
	if r.URL.Query().Get("download") != "" {
		h := w.Header()
		h.Set("Content-Type", "text/plain; charset=utf-8")
		h.Set("Content-Disposition", fmt.Sprintf("attachment; filename=%q", rec.GetRecord().GetObjectId()+".txt"))
		h.Set("Cache-Control", "no-store")
		for _, p := range d.Parts {
			if p.Gap > 0 {
				fmt.Fprintf(w, "\n[… %d bytes not retained …]\n", p.Gap)
				continue
			}
			fmt.Fprint(w, p.Text)
		}
		return
	}
	c.render(w, http.StatusOK, c.view("output", s, d))
}

// commandRecord is the org's process record the path's id names.
func (c *Console) commandRecord(s *session, r *http.Request) (int64, *hubv1.WatchResponse, error) {
	id, err := strconv.ParseInt(r.PathValue("id"), 10, 64)
	if err != nil || id <= 0 {
		return 0, nil, errs.New(errs.Invalid, "activity id: want a positive number")
	}
	rec, ok, err := c.record(s.ctx, id)
	if err != nil {
		return 0, nil, err
	}
	if !ok || !hasOutput(rec.GetRecord()) {
		return 0, nil, errs.New(errs.NotFound, "no command with activity id %d in org %s", id, s.who.Org)
	}
	return id, rec, nil
}

// outputEvents streams a running command's output as it is written, from
// where the page's replay ended, as text to append; then its exit.
func (c *Console) outputEvents(w http.ResponseWriter, r *http.Request, s *session) {
	_, rec, err := c.commandRecord(s, r)
	if err != nil {
		code, msg := httpStatus(err)
		http.Error(w, msg, code)
		return
	}
	q := r.URL.Query()
	from, err1 := strconv.ParseInt(q.Get("from"), 10, 64)
	stderrFrom, err2 := strconv.ParseInt(q.Get("stderr_from"), 10, 64)
	if err1 != nil || err2 != nil || from < 0 || stderrFrom < 0 {
		http.Error(w, "from, stderr_from: want offsets", http.StatusBadRequest)
		return
	}
	c.stream(w, r, func(send func(event, data string) error) error {
		err := c.opts.Backend.FollowOutput(s.ctx, rec.GetMachineId(), rec.GetRecord().GetObjectId(), from, stderrFrom, func(e *agentdv1.ProcessEvent) error {
			switch {
			case e.GetOutput() != nil:
				return send("append", string(e.GetOutput().GetData()))
			case e.GetGap() != nil:
				return send("append", fmt.Sprintf("\n[… %d bytes not retained …]\n", e.GetGap().GetBytes()))
			case e.GetExited() != nil:
				return send("append", "\n— "+exitLine(e.GetExited())+" —\n")
			}
			return nil
		})
		if err != nil {
			return err
		}
		return send("done", "")
	})
}

// exitLine says how a process ended.
func exitLine(x *agentdv1.Exited) string {
	if x.GetSignal() != "" {
		return "killed by " + x.GetSignal()
	}
	return fmt.Sprintf("exit %d", x.GetExitCode())
}
