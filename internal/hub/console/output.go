package console

import (
	"fmt"
	"net/http"
	"strconv"
	"strings"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// output shows one command's full retained output (head and tail, the gap
// marked), read from its machine; ?download=1 sends it as a text file. An
// offline machine is said at once, with the output the record kept.
func (c *Console) output(w http.ResponseWriter, r *http.Request, s *session) {
	id, err := strconv.ParseInt(r.PathValue("id"), 10, 64)
	if err != nil || id <= 0 {
		c.fail(w, r, s, status.Error(codes.InvalidArgument, "activity id: want a positive number"))
		return
	}
	rec, ok, err := c.record(s.ctx, id)
	if err != nil {
		c.fail(w, r, s, err)
		return
	}
	if !ok || rec.GetRecord().GetObjectId() == "" || !strings.HasPrefix(rec.GetRecord().GetKind(), "process.") {
		c.fail(w, r, s, status.Errorf(codes.NotFound, "no command with activity id %d in org %s", id, s.who.Org))
		return
	}
	d := outputData{Rec: rec, Now: c.opts.Now()}
	evs, err := c.opts.Backend.Output(s.ctx, rec.GetMachineId(), rec.GetRecord().GetObjectId())
	switch {
	case status.Code(err) == codes.Unavailable || status.Code(err) == codes.FailedPrecondition || status.Code(err) == codes.NotFound:
		d.Offline = status.Convert(err).Message()
		if out := rec.GetRecord().GetOutput(); len(out) > 0 {
			d.Parts = []outputPart{{Text: string(out)}}
		}
	case err != nil:
		c.fail(w, r, s, err)
		return
	default:
		d.Parts, d.Running = parts(evs)
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
	c.render(w, r, http.StatusOK, "output", s, d)
}
