package egressproxy

import (
	"context"
	"net"
	"time"

	"go.uber.org/zap"
)

// An allow list changes while its sandbox runs (agentctl sandbox allow |
// deny). Every CONNECT looks the list up afresh, so a new connection sees
// the list of the moment; a tunnel already open stays open unless the
// change cut (Grant.CutGen): then the tunnels opened under an earlier
// generation to a destination the new list does not match are closed, by
// Recheck (called by the hub that made the change) and by the recheck loop
// (for a change made on another replica, which only the store tells).

// tunnel is one open CONNECT: which sandbox, where to, under which
// generation of its allow list.
type tunnel struct {
	sandbox string
	host    string
	port    int
	gen     int64
	conns   [2]net.Conn // the sandbox's side, the destination's
}

// open counts a tunnel in.
func (p *Proxy) open(tn *tunnel) {
	p.mu.Lock()
	p.tunnels[tn] = struct{}{}
	p.mu.Unlock()
}

// shut counts a tunnel out.
func (p *Proxy) shut(tn *tunnel) {
	p.mu.Lock()
	delete(p.tunnels, tn)
	p.mu.Unlock()
}

// Tunnels is how many tunnels of the sandbox id are open.
func (p *Proxy) Tunnels(id string) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	n := 0
	for tn := range p.tunnels {
		if tn.sandbox == id {
			n++
		}
	}
	return n
}

// Recheck looks up the sandbox id's grant and closes its tunnels that a
// cutting change no longer allows; it returns how many it closed.
func (p *Proxy) Recheck(ctx context.Context, id string) (int, error) {
	if p.Tunnels(id) == 0 {
		return 0, nil
	}
	g, err := p.o.Lookup(ctx, id)
	if err != nil {
		return 0, err
	}
	return p.cut(id, g), nil
}

// cut closes the sandbox id's tunnels that g cuts.
func (p *Proxy) cut(id string, g Grant) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	n := 0
	for tn := range p.tunnels {
		if tn.sandbox != id || tn.gen >= g.CutGen || g.Allow.Match(tn.host, tn.port) {
			continue
		}
		tn.conns[0].Close()
		tn.conns[1].Close()
		delete(p.tunnels, tn)
		n++
	}
	return n
}

// recheckLoop rechecks every sandbox with an open tunnel every
// RecheckEvery, until Close.
func (p *Proxy) recheckLoop() {
	defer p.loop.Done()
	t := time.NewTicker(p.o.RecheckEvery)
	defer t.Stop()
	for {
		select {
		case <-p.stop:
			return
		case <-t.C:
		}
		p.mu.Lock()
		ids := map[string]bool{}
		for tn := range p.tunnels {
			ids[tn.sandbox] = true
		}
		p.mu.Unlock()
		for id := range ids {
			ctx, cancel := context.WithTimeout(context.Background(), p.o.RecheckEvery*4)
			n, err := p.Recheck(ctx, id)
			cancel()
			if err != nil {
				p.log.Debug("could not recheck a sandbox's tunnels", zap.String("sandbox", id), zap.Error(err))
			} else if n > 0 {
				p.log.Info("closed tunnels its allow list no longer allows", zap.String("sandbox", id), zap.Int("closed", n))
			}
		}
	}
}
