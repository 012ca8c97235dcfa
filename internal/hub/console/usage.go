package console

import (
	"context"
	"net/http"
	"sort"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/devdepot-ai/agentd/internal/hub/store"
	hubv1 "github.com/devdepot-ai/agentd/proto/gen/agentd/hub/v1"
)

// The usage page's series: what each running or paused sandbox and each
// online machine of an org uses, sampled (through the hub's SandboxStats,
// as agentctl top does) when the page is viewed and then every
// Options.UsageEvery by one sampler goroutine, only for orgs whose page
// was viewed within usageWatch. Memory is bounded: usageKeep samples per
// target, targets that are gone are dropped at the next sample, and an
// org nobody looked at for usageWatch is forgotten.
const (
	usageKeep  = 120             // samples kept per sandbox or machine
	usageWatch = 3 * time.Minute // sampling goes on this long after a view
)

// usagePoint is one sample of one target.
type usagePoint struct {
	At       time.Time
	CPU      float64 // percent of one core
	Mem      int64   // bytes
	MemLimit int64   // bytes (0: none known)
}

// usageSeries is one target's samples, oldest first.
type usageSeries struct {
	Kind   string // "sandbox" or "machine"
	ID     string
	Name   string // the machine's name, the sandbox's environment and conversation
	Points []usagePoint
}

// usageOrg is one org's series and the session that last viewed them (the
// sampler samples as that session, while it stands).
type usageOrg struct {
	idHash store.TokenHash
	viewed time.Time
	last   time.Time // last sample taken
	series map[string]*usageSeries
}

// usageBook keeps the series of the orgs being looked at, and runs the
// sampler while there are any.
type usageBook struct {
	mu      sync.Mutex
	orgs    map[string]*usageOrg
	running bool
	closed  bool
	stop    chan struct{}
	wg      sync.WaitGroup
}

// Close stops the usage sampler and waits for it; the console serves on
// (a later view samples once, without starting it again).
func (c *Console) Close() {
	c.usage.mu.Lock()
	if !c.usage.closed {
		c.usage.closed = true
		close(c.usage.stop)
	}
	c.usage.mu.Unlock()
	c.usage.wg.Wait()
}

// viewUsage samples org for session s unless it was sampled within
// UsageEvery, keeps the sampler running, and returns the org's series.
func (c *Console) viewUsage(s *session) []usageSeries {
	now := time.Now() // scheduling runs on the real clock, whatever Options.Now says
	b := &c.usage
	b.mu.Lock()
	o := b.orgs[s.who.Org]
	if o == nil {
		o = &usageOrg{series: map[string]*usageSeries{}}
		b.orgs[s.who.Org] = o
	}
	o.idHash, o.viewed = s.idHash, now
	due := now.Sub(o.last) >= c.opts.UsageEvery
	if due {
		o.last = now // one sample for views at once
	}
	if !b.running && !b.closed {
		b.running = true
		b.wg.Add(1)
		go c.sampleUsage()
	}
	b.mu.Unlock()
	if due {
		c.takeUsage(s.ctx, s.who.Org)
	}
	return c.usageOf(s.who.Org)
}

// sampleUsage samples every org viewed within usageWatch, every
// UsageEvery, until none is or Close.
func (c *Console) sampleUsage() {
	b := &c.usage
	defer b.wg.Done()
	tick := time.NewTicker(c.opts.UsageEvery)
	defer tick.Stop()
	for {
		select {
		case <-b.stop:
			return
		case <-tick.C:
		}
		now := time.Now()
		type due struct {
			org    string
			idHash store.TokenHash
		}
		var todo []due
		b.mu.Lock()
		for name, o := range b.orgs {
			if now.Sub(o.viewed) > usageWatch {
				delete(b.orgs, name)
			} else if now.Sub(o.last) >= c.opts.UsageEvery*4/5 {
				o.last = now
				todo = append(todo, due{name, o.idHash})
			}
		}
		if len(b.orgs) == 0 {
			b.running = false
			b.mu.Unlock()
			return
		}
		b.mu.Unlock()
		for _, d := range todo {
			c.sampleAs(d.org, d.idHash)
		}
	}
}

// sampleAs samples org as the stored session idHash, if it still stands
// and is still in org (an owner may have switched).
func (c *Console) sampleAs(org string, idHash store.TokenHash) {
	ctx, cancel := context.WithTimeout(context.Background(), c.opts.UsageEvery)
	defer cancel()
	go func() { // Close ends a sample under way
		select {
		case <-c.usage.stop:
			cancel()
		case <-ctx.Done():
		}
	}()
	sess, err := c.opts.Sessions.ConsoleSession(ctx, idHash, c.opts.Now())
	if err != nil {
		c.forgetUsage(org)
		return
	}
	as, who, err := c.opts.Backend.As(ctx, sess)
	if err != nil || who.Org != org {
		c.forgetUsage(org)
		return
	}
	c.takeUsage(as, org)
}

func (c *Console) forgetUsage(org string) {
	c.usage.mu.Lock()
	delete(c.usage.orgs, org)
	c.usage.mu.Unlock()
}

// takeUsage asks the hub what org's sandboxes and machines use (as the
// caller of ctx) and appends a point to each one's series; targets not in
// the answer are dropped.
func (c *Console) takeUsage(ctx context.Context, org string) {
	resp, err := c.opts.Backend.Environments().SandboxStats(ctx, &hubv1.SandboxStatsRequest{})
	if err != nil {
		c.log.Debug("console usage sample", zap.String("org", org), zap.Error(err))
		return
	}
	at := resp.GetSampled().AsTime()
	b := &c.usage
	b.mu.Lock()
	defer b.mu.Unlock()
	o := b.orgs[org]
	if o == nil {
		return // forgotten meanwhile
	}
	seen := map[string]bool{}
	add := func(kind, id, name string, p usagePoint) {
		key := kind + ":" + id
		seen[key] = true
		s := o.series[key]
		if s == nil {
			s = &usageSeries{Kind: kind, ID: id}
			o.series[key] = s
		}
		s.Name = name
		s.Points = append(s.Points, p)
		if n := len(s.Points); n > usageKeep {
			s.Points = append(s.Points[:0:0], s.Points[n-usageKeep:]...)
		}
	}
	for _, u := range resp.GetSandboxes() {
		add("sandbox", u.GetId(), u.GetEnvironment()+" · "+u.GetConversation(),
			usagePoint{At: at, CPU: u.GetCpuPercent(), Mem: u.GetMemoryBytes(), MemLimit: u.GetMemoryLimit()})
	}
	for _, m := range resp.GetMachines() {
		if m.GetError() != "" {
			seen["machine:"+m.GetId()] = true // no answer this time: keep what it had
			continue
		}
		add("machine", m.GetId(), m.GetName(),
			usagePoint{At: at, CPU: m.GetCpuPercent(), Mem: m.GetMemoryBytes(), MemLimit: m.GetMemoryTotalBytes()})
	}
	for k := range o.series {
		if !seen[k] {
			delete(o.series, k)
		}
	}
}

// usageOf is a copy of org's series: machines by name, then sandboxes by
// id.
func (c *Console) usageOf(org string) []usageSeries {
	c.usage.mu.Lock()
	defer c.usage.mu.Unlock()
	o := c.usage.orgs[org]
	if o == nil {
		return nil
	}
	out := make([]usageSeries, 0, len(o.series))
	for _, s := range o.series {
		cp := *s
		cp.Points = append([]usagePoint(nil), s.Points...)
		out = append(out, cp)
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Kind != out[j].Kind {
			return out[i].Kind == "machine"
		}
		if out[i].Name != out[j].Name && out[i].Kind == "machine" {
			return out[i].Name < out[j].Name
		}
		return out[i].ID < out[j].ID
	})
	return out
}

// usageData is the usage page's.
type usageData struct {
	Every   time.Duration
	Targets []usageTarget
}

// usageTarget is one sandbox's or machine's charts.
type usageTarget struct {
	Kind, ID, Name string
	CPU, Mem       chart
}

// usageNow samples s's org if due and lays out its charts.
func (c *Console) usageNow(s *session) usageData {
	d := usageData{Every: c.opts.UsageEvery}
	for _, sr := range c.viewUsage(s) {
		t := usageTarget{Kind: sr.Kind, ID: sr.ID, Name: sr.Name}
		t.CPU, t.Mem = usageCharts(sr)
		d.Targets = append(d.Targets, t)
	}
	return d
}

func (c *Console) usagePage(w http.ResponseWriter, r *http.Request, s *session) {
	c.render(w, http.StatusOK, c.view("usage", s, c.usageNow(s)))
}

// usageEvents sends the charts again every UsageEvery while the page is
// open (each send counts as a view).
func (c *Console) usageEvents(w http.ResponseWriter, r *http.Request, s *session) {
	c.stream(w, r, func(send func(event, data string) error) error {
		for {
			select {
			case <-r.Context().Done():
				return nil
			case <-time.After(c.opts.UsageEvery):
			}
			html, err := c.fragment("usage", "usage-charts", c.usageNow(s))
			if err != nil {
				return err
			}
			if err := send("replace", html); err != nil {
				return err
			}
		}
	})
}
