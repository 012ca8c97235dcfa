package agentd

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"

	"go.uber.org/zap"

	"github.com/devdepot-ai/agentd/internal/config"
	"github.com/devdepot-ai/agentd/internal/listen"
	"github.com/devdepot-ai/agentd/internal/version"
	"github.com/devdepot-ai/agentd/transport"
)

// RunOptions configures Run. Zero fields get defaults.
type RunOptions struct {
	// Server configures the daemon (workspace, mode, state dir, logger, …).
	Server Options
	// ConfigDir holds the pairing and the key (default: config.ConfigDir()).
	ConfigDir string
	// Socket is the local socket `agentd status` and agentctl use (default:
	// agentd.sock in the state dir). "-" serves no local socket.
	Socket string
	// Backoff paces reconnects (zero: the defaults).
	Backoff transport.Backoff
}

// Run is `agentd run`: the daemon serving its paired hub through the tunnel
// it dials, and its local socket, until ctx is cancelled.
func Run(ctx context.Context, o RunOptions) error {
	if o.ConfigDir == "" {
		d, err := config.ConfigDir()
		if err != nil {
			return err
		}
		o.ConfigDir = d
	}
	m, key, err := config.LoadMachine(o.ConfigDir)
	if err != nil {
		return err
	}
	log := o.Server.Logger
	if log == nil {
		log = zap.NewNop()
	}
	pool, err := caPool(m.CAFile)
	if err != nil {
		return err
	}
	tun, err := transport.Listen(transport.Options{
		HubURL: m.Hub, MachineID: m.MachineID, Key: key, RootCAs: pool,
		Logger: log.Named("tunnel"), UserAgent: "agentd/" + version.Version, Backoff: o.Backoff,
	})
	if err != nil {
		return err
	}
	o.Server.Tunnel = &tunnelInfo{t: tun, org: m.Org}
	srv, err := New(ctx, o.Server)
	if err != nil {
		tun.Close()
		return err
	}
	listeners := []net.Listener{tun}
	if o.Socket != "-" {
		sock := o.Socket
		if sock == "" {
			sock = filepath.Join(srv.Options().StateDir, "agentd.sock")
		}
		a, err := listen.Parse(sock)
		if err != nil {
			tun.Close()
			return err
		}
		local, err := listen.Listen(a)
		if err != nil {
			tun.Close()
			return fmt.Errorf("local socket: %w", err)
		}
		defer os.Remove(a.Address)
		listeners = append(listeners, local)
	}
	watchCtx, stopWatch := context.WithCancel(ctx)
	watched := make(chan struct{})
	go func() {
		defer close(watched)
		logTunnel(watchCtx, tun, log)
	}()
	defer func() {
		stopWatch()
		<-watched
	}()
	log.Info("running", zap.String("hub", m.Hub), zap.String("machine", m.MachineID), zap.String("org", m.Org),
		zap.String("workspace", srv.Options().Workspace), zap.String("version", version.Version))
	return srv.Serve(ctx, listeners...)
}

// tunnelInfo feeds SystemService.Info the tunnel's state.
type tunnelInfo struct {
	t   *transport.Tunnel
	org string
}

// logTunnel logs the tunnel's state changes in plain words.
func logTunnel(ctx context.Context, t *transport.Tunnel, log *zap.Logger) {
	var last transport.State
	for {
		st := t.Status()
		if st.State != last {
			last = st.State
			switch st.State {
			case transport.StateConnected:
				log.Info("tunnel up", zap.String("hub", st.Hub))
			case transport.StateRejected:
				log.Error("the hub refused this machine; retrying slowly", zap.Error(st.Err), zap.Time("next_attempt", st.NextAttempt))
			case transport.StateWaiting:
				if st.Err != nil && !errors.Is(st.Err, context.Canceled) {
					log.Warn("tunnel down; reconnecting", zap.Error(st.Err), zap.Time("next_attempt", st.NextAttempt))
				}
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-t.Updated():
		}
	}
}
