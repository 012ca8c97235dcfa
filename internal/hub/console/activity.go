package console

import (
	"context"
	"errors"
	"html/template"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"time"

	"google.golang.org/grpc"

	hubv1 "github.com/devdepot-ai/agentd/proto/gen/agentd/hub/v1"
	agentdv1 "github.com/devdepot-ai/agentd/proto/gen/agentd/v1"
)

// watchStream runs ActivityService.Watch in process: the service uses
// only Context and Send of its stream.
type watchStream struct {
	grpc.ServerStream
	ctx  context.Context
	send func(*hubv1.WatchResponse) error
}

func (w *watchStream) Context() context.Context          { return w.ctx }
func (w *watchStream) Send(m *hubv1.WatchResponse) error { return w.send(m) }

var _ hubv1.ActivityService_WatchServer = (*watchStream)(nil)

// errEnough stops a Watch once the console has what it wants.
var errEnough = errors.New("enough")

// watch runs Watch with req, giving each response to fn until fn returns
// errEnough (or another error, which watch returns).
func (c *Console) watch(ctx context.Context, req *hubv1.WatchRequest, fn func(*hubv1.WatchResponse) error) error {
	var ferr error
	err := c.opts.Backend.Activity().Watch(req, &watchStream{ctx: ctx, send: func(m *hubv1.WatchResponse) error {
		ferr = fn(m)
		return ferr
	}})
	if err != nil {
		return err
	}
	if errors.Is(ferr, errEnough) {
		return nil
	}
	return ferr
}

// historyQuery filters activity.
type historyQuery struct {
	Machine      string
	Environment  string
	Conversation string
	Actor        string
	envMachines  map[string]bool // the machines (sandboxes) of Environment
}

func (q historyQuery) match(m *hubv1.WatchResponse) bool {
	r := m.GetRecord()
	switch {
	case q.Conversation != "" && r.GetConversation() != q.Conversation:
		return false
	case q.Actor != "" && r.GetActor() != q.Actor:
		return false
	case q.Environment != "" && !q.envMachines[m.GetMachineId()]:
		return false
	}
	return true
}

func (q historyQuery) values() url.Values {
	v := url.Values{}
	for k, s := range map[string]string{"machine": q.Machine, "env": q.Environment, "conversation": q.Conversation, "actor": q.Actor} {
		if s != "" {
			v.Set(k, s)
		}
	}
	return v
}

// parseQuery reads the filters, resolving an environment to its machines.
func (c *Console) parseQuery(s *session, r *http.Request) (historyQuery, error) {
	v := r.URL.Query()
	q := historyQuery{Machine: v.Get("machine"), Environment: v.Get("env"), Conversation: v.Get("conversation"), Actor: v.Get("actor")}
	if q.Environment != "" {
		q.envMachines = map[string]bool{q.Environment: true} // a machine as an environment
		resp, err := c.opts.Backend.Environments().ListSandboxes(s.ctx, &hubv1.ListSandboxesRequest{Environment: q.Environment})
		if err == nil {
			for _, sb := range resp.GetSandboxes() {
				q.envMachines[sb.GetId()] = true
			}
		}
	}
	return q, nil
}

// maxScan bounds how many records one Watch replays (the store's limit).
const maxScan = 1000

// history returns up to limit records matching q with ids below before
// (0: the newest), oldest first. Watch replays forward, so an older page
// is read in widening windows of ids below before.
func (c *Console) history(ctx context.Context, q historyQuery, before int64, limit int) ([]*hubv1.WatchResponse, error) {
	var out []*hubv1.WatchResponse
	collect := func(since int64, tail int32) error {
		out = out[:0]
		return c.watch(ctx, &hubv1.WatchRequest{MachineId: q.Machine, SinceId: since, Tail: tail, NoFollow: true}, func(m *hubv1.WatchResponse) error {
			if before > 0 && m.GetId() >= before {
				return errEnough
			}
			if q.match(m) {
				out = append(out, m)
			}
			return nil
		})
	}
	if before <= 0 {
		if err := collect(0, maxScan); err != nil {
			return nil, err
		}
	} else {
		for span := int64(256); ; span *= 4 {
			since := max(0, before-1-span)
			if err := collect(since, 0); err != nil {
				return nil, err
			}
			if since == 0 {
				// Watch reads since_id 0 as "the newest tail": ask for one
				// below the first id instead.
				if err := collect(0, maxScan); err != nil {
					return nil, err
				}
				out = slices.DeleteFunc(out, func(m *hubv1.WatchResponse) bool { return m.GetId() >= before })
			}
			if len(out) >= limit || since == 0 || span > 1<<20 {
				break
			}
		}
	}
	if len(out) > limit {
		out = out[len(out)-limit:]
	}
	return out, nil
}

// activityRow is one row of the activity table.
type activityRow struct {
	*hubv1.WatchResponse
	Output string // bounded, as the record holds it
}

func rows(ms []*hubv1.WatchResponse) []activityRow {
	out := make([]activityRow, 0, len(ms))
	for i := len(ms) - 1; i >= 0; i-- { // newest first
		out = append(out, activityRow{WatchResponse: ms[i], Output: string(ms[i].GetRecord().GetOutput())})
	}
	return out
}

// activityData is the activity page's.
type activityData struct {
	Q        historyQuery
	Rows     []activityRow
	Newest   int64        // the newest id shown: the live stream continues after it
	Older    template.URL // the next older page; "" when this is the last (built from url.Values: escaped)
	Live     string       // the live stream's URL
	Machines []*hubv1.Machine
	Plot     *plot
}

// pageSize is how many records a history page shows.
const pageSize = 50

func (c *Console) activity(w http.ResponseWriter, r *http.Request, s *session) {
	q, err := c.parseQuery(s, r)
	if err != nil {
		c.fail(w, r, s, err)
		return
	}
	before, _ := strconv.ParseInt(r.URL.Query().Get("before"), 10, 64)
	recs, err := c.history(s.ctx, q, before, pageSize)
	if err != nil {
		c.fail(w, r, s, err)
		return
	}
	d := activityData{Q: q, Rows: rows(recs)}
	if len(recs) > 0 {
		if before == 0 {
			d.Newest = recs[len(recs)-1].GetId()
		}
		if oldest := recs[0].GetId(); oldest > 1 && len(recs) == pageSize {
			v := q.values()
			v.Set("before", strconv.FormatInt(oldest, 10))
			d.Older = template.URL(Prefix + "activity?" + v.Encode())
		}
	}
	if before == 0 {
		v := q.values()
		v.Set("after", strconv.FormatInt(d.Newest, 10))
		d.Live = Prefix + "activity/events?" + v.Encode()
		if ms, err := c.opts.Backend.Admin().ListMachines(s.ctx, &hubv1.ListMachinesRequest{}); err == nil {
			d.Machines = ms.GetMachines()
		}
		if all, err := c.history(s.ctx, historyQuery{}, 0, maxScan); err == nil {
			d.Plot = commandsPerHour(all, c.opts.Now(), 24, len(all) >= maxScan)
		}
	}
	c.render(w, http.StatusOK, c.view("activity", s, d))
}

// activityEvents streams new matching records as rows for the top of the
// table.
func (c *Console) activityEvents(w http.ResponseWriter, r *http.Request, s *session) {
	q, err := c.parseQuery(s, r)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	after, _ := strconv.ParseInt(r.URL.Query().Get("after"), 10, 64)
	c.stream(w, r, func(send func(event, data string) error) error {
		return c.watch(s.ctx, &hubv1.WatchRequest{MachineId: q.Machine, SinceId: after}, func(m *hubv1.WatchResponse) error {
			if !q.match(m) {
				return nil
			}
			html, err := c.fragment("activity", "activity-row", rows([]*hubv1.WatchResponse{m})[0])
			if err != nil {
				return err
			}
			return send("prepend", html)
		})
	})
}

// record returns the org's activity record with that id.
func (c *Console) record(ctx context.Context, id int64) (*hubv1.WatchResponse, bool, error) {
	var got *hubv1.WatchResponse
	err := c.watch(ctx, &hubv1.WatchRequest{SinceId: id - 1, NoFollow: true}, func(m *hubv1.WatchResponse) error {
		got = m
		return errEnough
	})
	if err != nil || got == nil || got.GetId() != id {
		return nil, false, err
	}
	return got, true, nil
}

// outputData is the output page's.
type outputData struct {
	Rec     *hubv1.WatchResponse
	Parts   []outputPart
	Offline string // why the machine could not be asked; the record's own output is shown
	Running bool
	Live    string // running: the stream of what it writes next
	Now     time.Time
}

// outputPart is a run of output, or a gap in what was retained.
type outputPart struct {
	Text string
	Gap  int64 // bytes not retained here
}

// streamEnds is where each output stream's read so far ends.
type streamEnds struct{ out, err int64 }

func (s *streamEnds) saw(stream agentdv1.OutputStream, end int64) {
	if stream == agentdv1.OutputStream_OUTPUT_STREAM_STDERR {
		s.err = max(s.err, end)
	} else {
		s.out = max(s.out, end)
	}
}

func parts(evs []*agentdv1.ProcessEvent) ([]outputPart, bool, streamEnds) {
	var ps []outputPart
	var ends streamEnds
	running := true
	for _, e := range evs {
		switch {
		case e.GetOutput() != nil:
			o := e.GetOutput()
			ends.saw(o.GetStream(), o.GetOffset()+int64(len(o.GetData())))
			d := string(o.GetData())
			if n := len(ps); n > 0 && ps[n-1].Gap == 0 {
				ps[n-1].Text += d
			} else {
				ps = append(ps, outputPart{Text: d})
			}
		case e.GetGap() != nil:
			g := e.GetGap()
			ends.saw(g.GetStream(), g.GetOffset()+g.GetBytes())
			ps = append(ps, outputPart{Gap: g.GetBytes()})
		case e.GetExited() != nil:
			running = false
		}
	}
	return ps, running, ends
}
