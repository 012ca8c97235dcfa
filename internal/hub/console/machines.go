package console

import (
	"context"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/devdepot-ai/agentd/internal/errs"
	hubv1 "github.com/devdepot-ai/agentd/proto/gen/agentd/hub/v1"
	agentdv1 "github.com/devdepot-ai/agentd/proto/gen/agentd/v1"
)

// machineStatus is a machine's status as a word (also its CSS class).
func machineStatus(s hubv1.MachineStatus) string {
	switch s {
	case hubv1.MachineStatus_MACHINE_STATUS_ONLINE:
		return "online"
	case hubv1.MachineStatus_MACHINE_STATUS_REVOKED:
		return "revoked"
	}
	return "offline"
}

// machineTable is the data of the machines table.
type machineTable struct {
	Org      string
	Admin    bool
	Now      time.Time
	Machines []*hubv1.Machine
	Running  map[string]int       // online machine id -> commands running, as it says
	NoAnswer map[string]bool      // online machine id -> it did not list its processes in time
	Since    map[string]time.Time // machine id -> online since (its tunnel's uptime)
	// Exposures are the org's live previews, of machines and sandboxes
	// (the page's, not the live table's).
	Exposures []Exposure
}

// maxListing bounds how many machines are asked for their processes at
// once.
const maxListing = 16

func (c *Console) machineTable(s *session) (machineTable, error) {
	resp, err := c.opts.Backend.Admin().ListMachines(s.ctx, &hubv1.ListMachinesRequest{})
	if err != nil {
		return machineTable{}, err
	}
	t := machineTable{Org: s.who.Org, Admin: s.who.Admin, Now: c.opts.Now(), Machines: resp.GetMachines(),
		Running: map[string]int{}, NoAnswer: map[string]bool{}, Since: map[string]time.Time{}}
	since := c.opts.Backend.OnlineSince()
	for _, m := range t.Machines {
		if at, ok := since[m.GetId()]; ok {
			t.Since[m.GetId()] = at
		}
	}
	c.countRunning(s, &t)
	return t, nil
}

// countRunning asks every online machine, at once and within
// Options.ListTimeout, how many processes it runs: exact, where the
// activity history would only know what its newest records say. A machine
// that fails or does not answer in time is marked NoAnswer.
func (c *Console) countRunning(s *session, t *machineTable) {
	ctx, cancel := context.WithTimeout(s.ctx, c.opts.ListTimeout)
	defer cancel()
	var (
		wg  sync.WaitGroup
		mu  sync.Mutex
		sem = make(chan struct{}, maxListing)
	)
	for _, m := range t.Machines {
		if m.GetStatus() != hubv1.MachineStatus_MACHINE_STATUS_ONLINE {
			continue
		}
		id := m.GetId()
		wg.Go(func() {
			sem <- struct{}{}
			defer func() { <-sem }()
			procs, err := c.opts.Backend.Processes(ctx, id)
			n := 0
			for _, p := range procs {
				if p.GetState() == agentdv1.ProcessState_PROCESS_STATE_RUNNING {
					n++
				}
			}
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				c.log.Debug("console process list", zap.String("machine", id), zap.Error(err))
				t.NoAnswer[id] = true
				return
			}
			t.Running[id] = n
		})
	}
	wg.Wait()
}

func (c *Console) machines(w http.ResponseWriter, r *http.Request, s *session) {
	t, err := c.machineTable(s)
	if err != nil {
		c.fail(w, r, s, err)
		return
	}
	if t.Exposures, err = c.opts.Backend.Exposures(s.ctx); err != nil {
		c.fail(w, r, s, err)
		return
	}
	c.render(w, http.StatusOK, c.view("machines", s, t))
}

// machineEvents sends the machines table again at every change.
func (c *Console) machineEvents(w http.ResponseWriter, r *http.Request, s *session) {
	c.stream(w, r, func(send func(event, data string) error) error {
		for {
			changed := c.opts.Backend.Changed()
			t, err := c.machineTable(s)
			if err != nil {
				return err
			}
			html, err := c.fragment("machines", "machine-table", t)
			if err != nil {
				return err
			}
			if err := send("replace", html); err != nil {
				return err
			}
			// Each table asks every online machine for its processes: at
			// most one every refreshGap, however busy the org is (a change
			// meanwhile is drawn right after).
			select {
			case <-r.Context().Done():
				return nil
			case <-time.After(refreshGap):
			}
			select {
			case <-r.Context().Done():
				return nil
			case <-changed:
			}
		}
	})
}

// refreshGap is the least time between two live machines tables.
const refreshGap = 500 * time.Millisecond

func (c *Console) findMachine(s *session, id string) (*hubv1.Machine, error) {
	resp, err := c.opts.Backend.Admin().ListMachines(s.ctx, &hubv1.ListMachinesRequest{})
	if err != nil {
		return nil, err
	}
	for _, m := range resp.GetMachines() {
		if m.GetId() == id {
			return m, nil
		}
	}
	return nil, errs.New(errs.NotFound, "machine %s not found in org %s", id, s.who.Org)
}

func (c *Console) revokeMachinePage(w http.ResponseWriter, r *http.Request, s *session) {
	m, err := c.findMachine(s, r.PathValue("id"))
	if err != nil {
		c.fail(w, r, s, err)
		return
	}
	c.render(w, http.StatusOK, c.view("revoke", s, m))
}

func (c *Console) revokeMachine(w http.ResponseWriter, r *http.Request, s *session) {
	if _, err := c.opts.Backend.Admin().RevokeMachine(s.ctx, &hubv1.RevokeMachineRequest{Id: r.PathValue("id")}); err != nil {
		c.fail(w, r, s, err)
		return
	}
	http.Redirect(w, r, Prefix+"machines", http.StatusSeeOther)
}

// pairData is the pairing page's.
type pairData struct {
	Org     string
	Code    string
	Expires time.Time
	HubURL  string
	After   int64 // unix microseconds: machines paired since are the new one
}

// pair makes a pairing code and shows it, in the response to the POST
// only (never in a URL), with the two commands that use it.
func (c *Console) pair(w http.ResponseWriter, r *http.Request, s *session) {
	now := c.opts.Now()
	resp, err := c.opts.Backend.Admin().CreatePairingCode(s.ctx, &hubv1.CreatePairingCodeRequest{})
	if err != nil {
		c.fail(w, r, s, err)
		return
	}
	c.render(w, http.StatusOK, c.view("pair", s, pairData{Org: resp.GetOrg(), Code: resp.GetCode(), Expires: resp.GetExpires().AsTime(),
		HubURL: c.hubURL(r), After: now.Add(-time.Second).UnixMicro()}))
}

// hubURL is the URL machines dial: Options.PublicURL, or this request's.
func (c *Console) hubURL(r *http.Request) string {
	if c.opts.PublicURL != "" {
		return strings.TrimSuffix(c.opts.PublicURL, "/")
	}
	u := url.URL{Scheme: "http", Host: r.Host}
	if r.TLS != nil {
		u.Scheme = "https"
	}
	return u.String()
}

// pairEvents tells the pairing page when a machine paired after `after`
// is online.
func (c *Console) pairEvents(w http.ResponseWriter, r *http.Request, s *session) {
	after, err := strconv.ParseInt(r.URL.Query().Get("after"), 10, 64)
	if err != nil {
		http.Error(w, "after: want unix microseconds", http.StatusBadRequest)
		return
	}
	c.stream(w, r, func(send func(event, data string) error) error {
		for {
			changed := c.opts.Backend.Changed()
			resp, err := c.opts.Backend.Admin().ListMachines(s.ctx, &hubv1.ListMachinesRequest{})
			if err != nil {
				return err
			}
			for _, m := range resp.GetMachines() {
				if m.GetCreated().AsTime().UnixMicro() >= after && m.GetStatus() == hubv1.MachineStatus_MACHINE_STATUS_ONLINE {
					html, err := c.fragment("pair", "paired", m)
					if err != nil {
						return err
					}
					if err := send("replace", html); err != nil {
						return err
					}
					return send("done", "") // or EventSource would reconnect
				}
			}
			select {
			case <-r.Context().Done():
				return nil
			case <-changed:
			}
		}
	})
}
