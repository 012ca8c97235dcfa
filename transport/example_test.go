package transport_test

import (
	"context"
	"crypto/ed25519"
	"fmt"
	"log"
	"net/http"
	"time"

	"go.uber.org/zap"
	"google.golang.org/grpc"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	"github.com/devdepot-ai/agentd/transport"
)

// The daemon serves its gRPC server on the tunnel like on any listener;
// `agentd status` reads Status.
func ExampleListen() {
	var (
		ctx       = context.Background()
		machineID = "m-1"                                    // from `agentd pair`
		key       ed25519.PrivateKey                         // from `agentd pair`
		srv       = grpc.NewServer( /* agentd's options */ ) // agentd.Server in the real daemon
	)
	tun, err := transport.Listen(transport.Options{
		HubURL:    "https://hub.example.com",
		MachineID: machineID,
		Key:       key,
		Logger:    zap.NewNop(),
	})
	if err != nil {
		log.Fatal(err) // bad options
	}
	go func() {
		<-ctx.Done()
		srv.GracefulStop() // closes the tunnel with going-away
	}()
	if err := srv.Serve(tun); err != nil {
		log.Fatal(err)
	}

	st := tun.Status()
	if st.State == transport.StateConnected {
		fmt.Printf("connected to %s since %s\n", st.Hub, st.ConnectedSince.Format(time.RFC3339))
	} else {
		fmt.Printf("%s: %v (next attempt %s)\n", st.State, st.Err, st.NextAttempt.Format(time.TimeOnly))
	}
}

// The hub accepts tunnels on GET /v1/tunnel and calls machines through the
// registry.
func ExampleAcceptor() {
	lookup := func(ctx context.Context, machineID string) (ed25519.PublicKey, string, error) {
		// From the store: return transport.ErrUnknownMachine for no such
		// machine, or its key, its org and transport.ErrRevoked if revoked.
		return nil, "", transport.ErrUnknownMachine
	}
	reg, err := transport.NewRegistry(transport.RegistryOptions{
		OnUp:   func(id string) { /* mark online; start ActivityService.Watch on its own goroutine */ },
		OnDown: func(id string) { /* mark offline, last seen now */ },
	})
	if err != nil {
		log.Fatal(err)
	}
	acc, err := transport.NewAcceptor(transport.AcceptorOptions{
		Authenticate: lookup,
		OnTunnel:     reg.Add,
		Host:         "hub.example.com", // from --public-url
	})
	if err != nil {
		log.Fatal(err)
	}
	mux := http.NewServeMux()
	mux.Handle("GET "+transport.Path, acc)
	hub := &http.Server{Addr: ":8443", Handler: mux}
	go hub.ListenAndServeTLS("cert.pem", "key.pem")

	// Routing a call:
	ctx := context.Background()
	if cc, ok := reg.Get("m-1"); ok {
		_, _ = healthpb.NewHealthClient(cc).Check(ctx, &healthpb.HealthCheckRequest{})
	}
	// Revoking: mark it revoked in the store, then
	reg.Close("m-1")

	// Shutting down:
	_ = hub.Shutdown(ctx)
	_ = acc.Close()
	reg.CloseAll()
}
