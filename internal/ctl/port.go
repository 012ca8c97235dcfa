package ctl

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"reflect"
	"strconv"
	"strings"
	"sync"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"

	hubv1 "github.com/devdepot-ai/agentd/proto/gen/agentd/hub/v1"
	agentdv1 "github.com/devdepot-ai/agentd/proto/gen/agentd/v1"
	"github.com/devdepot-ai/agentd/transport"
)

func (a *app) portCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "port",
		Short: "List the target's listening ports, forward local ports to them, expose them at preview URLs",
		Long: `port shows the TCP servers listening on the target (a machine or a sandbox),
carries local TCP connections to them (through the hub or directly), and
through the hub serves them at preview URLs. The target side is always
127.0.0.1:PORT on the target: agentd dials it from there, so a sandbox with
network "none" serves its ports too.`,
	}
	cmd.AddCommand(a.portLsCmd(), a.portForwardCmd(), a.portExposeCmd(), a.portUnexposeCmd())
	return cmd
}

func (a *app) portExposeCmd() *cobra.Command {
	var (
		access string
		ttl    time.Duration
	)
	cmd := &cobra.Command{
		Use:   "expose PORT [--access private|org|public] [--ttl D]",
		Short: "Serve a port of the target at a preview URL of the hub; prints the URL",
		Long: `expose makes a new preview URL for 127.0.0.1:PORT on the target (a machine or a
sandbox) and prints it alone on stdout, never on the console's origin: a name
of its own, https://TOKEN.DOMAIN/ (agenthub serve --preview-domain DOMAIN), or
https://HOST:PORT/p/TOKEN/ on the preview listener (--preview-listen).

Access:
  private  only you: sending your API token (Authorization: Bearer TOKEN), or,
           on the preview listener, signed in to the hub's console in the
           browser; the default
  org      any member of the org
  public   anyone with the URL (it holds 256 random bits)

The URL works until --ttl passes (default 24h; 0: until unexposed) or
'agentctl port unexpose'. The hub stores only a hash of it: it is shown once.`,
		Example: `  agentctl --env py --conversation c-42 port expose 8000
  agentctl --machine m-abc port expose 3000 --access org --ttl 2h
  agentctl --json --machine m-abc port expose 5173 --access public --ttl 0`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			port, err := strconv.ParseUint(args[0], 10, 16)
			if err != nil || port == 0 {
				return usagef("%q is not a port (1-65535)", args[0])
			}
			if ttl < 0 {
				return usagef("--ttl %s: want 0 (until unexposed) or more", ttl)
			}
			if !a.viaHub() {
				return usagef("port expose needs the hub, which serves previews: --hub URL with --machine ID or --env NAME")
			}
			req := &hubv1.ExposeRequest{Port: uint32(port), Access: access}
			if cmd.Flags().Changed("ttl") {
				req.Ttl = durationpb.New(ttl)
			}
			return a.call(cmd, func(ctx context.Context, c *conn) error {
				resp, err := hubv1.NewPreviewServiceClient(c).Expose(ctx, req)
				if err != nil {
					return err
				}
				if a.json {
					return a.printJSON(resp)
				}
				_, err = fmt.Fprintln(a.io.Out, resp.GetUrl())
				return err
			})
		},
	}
	cmd.Flags().StringVar(&access, "access", "private", "who may open the URL: private, org or public")
	cmd.Flags().DurationVar(&ttl, "ttl", 24*time.Hour, "how long the URL works; 0: until unexposed")
	return cmd
}

func (a *app) portUnexposeCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "unexpose PORT|URL",
		Short: "End a port's preview URLs (or the one URL given)",
		Long: `unexpose ends every preview URL of PORT on the target, or the one preview URL
given (then no target is needed). Its URLs answer 404 from then on. Prints the
ids of the exposures ended, one per line.`,
		Example: `  agentctl --env py --conversation c-42 port unexpose 8000
  agentctl port unexpose https://4yuq63…qsa.preview.example.com/
  agentctl port unexpose https://hub.example.com:8444/p/4yuq63…qsa/`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if !a.viaHub() {
				return usagef("port unexpose needs the hub, which serves previews: --hub URL")
			}
			req := &hubv1.UnexposeRequest{}
			if strings.Contains(args[0], "/") {
				req.Url = args[0]
			} else if port, err := strconv.ParseUint(args[0], 10, 16); err == nil && port > 0 {
				req.Port = uint32(port)
			} else {
				return usagef("%q is neither a port (1-65535) nor a preview URL", args[0])
			}
			return a.call(cmd, func(ctx context.Context, c *conn) error {
				resp, err := hubv1.NewPreviewServiceClient(c).Unexpose(ctx, req)
				if err != nil {
					return err
				}
				if a.json {
					return a.printJSON(resp)
				}
				for _, id := range resp.GetIds() {
					fmt.Fprintln(a.io.Out, id)
				}
				return nil
			})
		},
	}
}

func (a *app) portLsCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "ls",
		Short: "List the listening TCP ports on the target and the process owning each",
		Long: `ls lists the listening TCP sockets on the target, one per line: port, address,
network (tcp, tcp6), and the owning process's pid and command line where agentd
can see it (a process of another user shows pid -). Linux only; other systems
answer unimplemented.`,
		Example: `  agentctl port ls
  agentctl --hub https://hub.example.com --env py --conversation c-42 port ls
  agentctl --json port ls | jq '.ports[].port'`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return a.call(cmd, func(ctx context.Context, c *conn) error {
				resp, err := agentdv1.NewPortServiceClient(c).List(ctx, &agentdv1.PortServiceListRequest{})
				if err != nil {
					return err
				}
				var exp *hubv1.ListExposuresResponse
				if a.viaHub() {
					if exp, err = hubv1.NewPreviewServiceClient(c).ListExposures(ctx, &hubv1.ListExposuresRequest{}); err != nil {
						return err
					}
				}
				if a.json {
					return a.printPorts(resp, exp)
				}
				tw := tabwriter.NewWriter(a.io.Out, 0, 4, 2, ' ', 0)
				fmt.Fprintln(tw, "PORT\tADDRESS\tNETWORK\tPID\tCOMMAND")
				for _, p := range resp.GetPorts() {
					pid := "-"
					if p.GetPid() > 0 {
						pid = strconv.Itoa(int(p.GetPid()))
					}
					fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%s\n", p.GetPort(), p.GetAddress(), p.GetNetwork(), pid, cut(p.GetCommand(), 120))
				}
				if err := tw.Flush(); err != nil || len(exp.GetExposures()) == 0 {
					return err
				}
				fmt.Fprintln(a.io.Out)
				tw = tabwriter.NewWriter(a.io.Out, 0, 4, 2, ' ', 0)
				fmt.Fprintln(tw, "EXPOSED\tPORT\tACCESS\tBY\tEXPIRES")
				for _, e := range exp.GetExposures() {
					until := "when unexposed"
					if e.GetExpiresAt() != nil {
						until = e.GetExpiresAt().AsTime().Local().Format(time.RFC3339)
					}
					fmt.Fprintf(tw, "%s\t%d\t%s\t%s\t%s\n", e.GetId(), e.GetPort(), e.GetAccess(), e.GetCreatedBy(), until)
				}
				return tw.Flush()
			})
		},
	}
}

// printPorts prints port ls --json: one document, {"ports": […]} and,
// through the hub, "exposures": […].
func (a *app) printPorts(ports *agentdv1.PortServiceListResponse, exp *hubv1.ListExposuresResponse) error {
	doc := map[string]json.RawMessage{}
	for _, m := range []proto.Message{ports, exp} {
		if m == nil || reflect.ValueOf(m).IsNil() {
			continue
		}
		b, err := jsonOpts.Marshal(m)
		if err != nil {
			return err
		}
		if err := json.Unmarshal(b, &doc); err != nil {
			return err
		}
	}
	b, err := json.Marshal(doc)
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(a.io.Out, "%s\n", b)
	return err
}

// cut shortens s to at most n bytes of whole runes, with "…" when cut.
func cut(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8Start(s[n]) {
		n--
	}
	return s[:n] + "…"
}

func utf8Start(b byte) bool { return b&0xC0 != 0x80 }

// forwardSpec is one [LOCAL:]REMOTE of port forward.
type forwardSpec struct {
	local, remote uint16 // local 0: any free port
}

// parseForward reads [LOCAL:]REMOTE. Only ports: the local side is always
// 127.0.0.1, the remote side 127.0.0.1 on the target.
func parseForward(s string) (forwardSpec, error) {
	parts := strings.Split(s, ":")
	if len(parts) > 2 {
		return forwardSpec{}, usagef("%q: want [LOCAL:]REMOTE, two ports at most: agentctl listens on 127.0.0.1 only, and the target side is always 127.0.0.1 on the target", s)
	}
	port := func(p string, zeroOK bool) (uint16, error) {
		if p == "" && zeroOK {
			return 0, nil
		}
		n, err := strconv.ParseUint(p, 10, 16)
		if err != nil || (n == 0 && !zeroOK) {
			return 0, usagef("%q: %q is not a port (1-65535)", s, p)
		}
		return uint16(n), nil
	}
	remote, err := port(parts[len(parts)-1], false)
	if err != nil {
		return forwardSpec{}, err
	}
	if len(parts) == 1 {
		return forwardSpec{local: remote, remote: remote}, nil
	}
	local, err := port(parts[0], true)
	return forwardSpec{local: local, remote: remote}, err
}

func (a *app) portForwardCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "forward [LOCAL:]REMOTE...",
		Short: "Forward local ports to ports on the target, like ssh -L",
		Long: `forward listens on 127.0.0.1:LOCAL for each [LOCAL:]REMOTE and carries every TCP
connection made to it to 127.0.0.1:REMOTE on the target, through the hub or
directly: databases, debuggers, anything that speaks TCP. REMOTE alone uses the
same port locally; LOCAL 0 or empty (":5432") takes a free port. Each forward
prints "Forwarding from 127.0.0.1:LOCAL -> REMOTE" on stdout once it listens
(--json: {"local": "127.0.0.1:LOCAL", "remote": REMOTE}).

It runs until interrupted (Ctrl-C): then it stops listening and cuts the
connections in flight (each side sees its connection closed). A connection to a
port nothing listens on is closed at once, with the reason on stderr.

Through a hub it reaches directly (no HTTP proxy), each connection's bytes go
on a connection of their own to the hub (an HTTP upgrade) rather than inside
gRPC messages: cheaper for the hub, same access checks and records. An older
hub or daemon, or AGENTCTL_BYTE_STREAMS=0, carries them in messages.`,
		Example: `  agentctl port forward 8080
  agentctl port forward 15432:5432 9229
  agentctl --hub https://hub.example.com --env py --conversation c-42 port forward :8000`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			var specs []forwardSpec
			for _, s := range args {
				f, err := parseForward(s)
				if err != nil {
					return err
				}
				specs = append(specs, f)
			}
			c, err := a.dial()
			if err != nil {
				return err
			}
			defer c.Close()
			var lis []net.Listener
			defer func() {
				for _, l := range lis {
					l.Close()
				}
			}()
			for _, f := range specs {
				l, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(int(f.local))))
				if err != nil {
					return fmt.Errorf("listen for %d: %w", f.remote, err)
				}
				lis = append(lis, l)
			}
			for i, l := range lis {
				if a.json {
					fmt.Fprintf(a.io.Out, "{\"local\":%q,\"remote\":%d}\n", l.Addr().String(), specs[i].remote)
				} else {
					fmt.Fprintf(a.io.Out, "Forwarding from %s -> %d\n", l.Addr(), specs[i].remote)
				}
			}
			fw := &forwarder{client: agentdv1.NewPortServiceClient(c), errw: a.io.Err}
			if os.Getenv("AGENTCTL_BYTE_STREAMS") != "0" {
				fw.streams = c.streams
			}
			return fw.serve(c.ctx(cmd.Context()), lis, specs)
		},
	}
}

// forwarder carries the connections its listeners accept to the target,
// one PortService.Connect call each.
type forwarder struct {
	client agentdv1.PortServiceClient
	// streams, if set, opens the byte stream a hub offers for a
	// connection (nil: the bytes go in the call's messages).
	streams *transport.StreamDialer
	errw    io.Writer // where a failed connection is reported
	mu      sync.Mutex
}

// serve accepts on every listener until ctx ends, then closes them, cuts
// the connections in flight, and waits for them.
func (f *forwarder) serve(ctx context.Context, lis []net.Listener, specs []forwardSpec) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var wg sync.WaitGroup
	defer wg.Wait()
	errc := make(chan error, len(lis))
	for i, l := range lis {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				c, err := l.Accept()
				if err != nil {
					if ctx.Err() == nil {
						errc <- fmt.Errorf("accept on %s: %w", l.Addr(), err)
					}
					return
				}
				wg.Add(1)
				go func() {
					defer wg.Done()
					f.carry(ctx, c.(*net.TCPConn), specs[i].remote)
				}()
			}
		}()
	}
	var err error
	select {
	case <-ctx.Done():
	case err = <-errc:
	}
	cancel()
	for _, l := range lis {
		l.Close()
	}
	return err
}

// carry carries one local connection to 127.0.0.1:port on the target.
// Either side's half-close passes through; a failure of either cuts both.
func (f *forwarder) carry(ctx context.Context, local *net.TCPConn, port uint16) {
	defer local.Close()
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	st, err := f.client.Connect(ctx)
	if err == nil {
		err = st.Send(&agentdv1.ConnectRequest{Port: uint32(port), Stream: f.streams != nil})
	}
	var m *agentdv1.ConnectResponse
	if err == nil {
		m, err = st.Recv()
	}
	if err == nil && !m.GetConnected() {
		err = errors.New("the target answered without connecting")
	}
	if err != nil {
		if ctx.Err() == nil {
			f.report("connection from %s to port %d: %s", local.RemoteAddr(), port, describe(err))
		}
		return
	}
	if tok := m.GetStreamToken(); tok != "" && f.streams != nil {
		if f.carryStream(ctx, local, port, st, tok) {
			return
		}
		// The stream did not reach the hub (another replica behind a
		// load balancer, a proxy that does not pass upgrades): decline
		// it with an empty message, and carry the bytes in messages.
		if err := st.Send(&agentdv1.ConnectRequest{}); err != nil {
			f.report("connection from %s to port %d: %s", local.RemoteAddr(), port, describe(err))
			return
		}
	}

	// Local → target, until the local side half-closes or fails.
	upDone := make(chan struct{})
	go func() {
		defer close(upDone)
		buf := make([]byte, 32<<10)
		for {
			n, err := local.Read(buf)
			if n > 0 {
				if st.Send(&agentdv1.ConnectRequest{Data: buf[:n]}) != nil {
					return // the call ended; its error arrives through Recv
				}
			}
			if errors.Is(err, io.EOF) {
				_ = st.CloseSend()
				return
			}
			if err != nil {
				cancel() // the local connection failed: end the call
				return
			}
		}
	}()
	// Target → local, until the call ends.
	for {
		m, err := st.Recv()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			if ctx.Err() == nil {
				f.report("connection from %s to port %d: %s", local.RemoteAddr(), port, describe(err))
			}
			break
		}
		if len(m.GetData()) > 0 {
			if _, err := local.Write(m.GetData()); err != nil {
				break
			}
		}
		if m.GetEof() {
			_ = local.CloseWrite()
		}
	}
	cancel()
	local.Close() // ends the upload's Read
	<-upDone
}

func (f *forwarder) report(format string, args ...any) {
	f.mu.Lock()
	defer f.mu.Unlock()
	fmt.Fprintf(f.errw, "agentctl: port forward: "+format+"\n", args...)
}

// carryStream carries local on the byte stream the hub offered with
// token; the call beside it ends with the connection's outcome. It
// returns false, having done nothing, if the stream cannot be opened.
func (f *forwarder) carryStream(ctx context.Context, local *net.TCPConn, port uint16, st agentdv1.PortService_ConnectClient, token string) bool {
	sc, err := f.streams.Dial(ctx, token)
	if err != nil {
		return false
	}
	defer sc.Close()
	stop := context.AfterFunc(ctx, func() { local.Close(); sc.Close() }) // Ctrl-C cuts it
	defer stop()
	done := make(chan error, 2)
	cp := func(dst, src net.Conn) {
		_, err := io.Copy(dst, src) // splice(2) when both are TCP
		if err == nil {
			err = transport.CloseWrite(dst)
		}
		done <- err
	}
	go cp(sc, local)
	go cp(local, sc)
	for range 2 {
		if err := <-done; err != nil {
			break // a failure of either side cuts both
		}
	}
	local.Close()
	sc.Close()
	// The hub ends the call with how the connection went.
	if _, err := st.Recv(); err != nil && !errors.Is(err, io.EOF) && ctx.Err() == nil {
		f.report("connection from %s to port %d: %s", local.RemoteAddr(), port, describe(err))
	}
	return true
}
