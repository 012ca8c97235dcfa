package storetest

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/devdepot-ai/agentd/internal/hub/store"
)

func testReplicas(t *testing.T, s store.Store) {
	ctx := t.Context()
	a := store.Replica{ID: "r-a", Addr: "10.0.0.1:9443", StartedAt: T0, HeartbeatAt: T0}
	b := store.Replica{ID: "r-b", Addr: "10.0.0.2:9443", StartedAt: T0, HeartbeatAt: T0}
	noErr(t, s.RegisterReplica(ctx, a))
	noErr(t, s.RegisterReplica(ctx, b))
	wantErr(t, "register without id", s.RegisterReplica(ctx, store.Replica{StartedAt: T0, HeartbeatAt: T0}), store.ErrInvalid)
	wantErr(t, "register without times", s.RegisterReplica(ctx, store.Replica{ID: "r-c"}), store.ErrInvalid)
	if diff := cmp.Diff(must(s.ListReplicas(ctx))(t), []store.Replica{a, b}); diff != "" {
		t.Errorf("ListReplicas (-got +want):\n%s", diff)
	}

	// Routes: a machine on A, then the same machine reconnected to B.
	noErr(t, s.SetRoute(ctx, "m-1", "r-a", T0))
	noErr(t, s.SetRoute(ctx, "m-2", "r-a", T0))
	wantErr(t, "route to an unknown replica", s.SetRoute(ctx, "m-3", "r-x", T0), store.ErrNotFound)
	want := store.Route{MachineID: "m-1", ReplicaID: "r-a", Addr: a.Addr, Since: T0}
	if diff := cmp.Diff(must(s.Route(ctx, "m-1", T0))(t), want); diff != "" {
		t.Errorf("Route (-got +want):\n%s", diff)
	}
	noErr(t, s.SetRoute(ctx, "m-1", "r-b", T0.Add(time.Second)))
	noErr(t, s.DeleteRoute(ctx, "m-1", "r-a")) // A's late goodbye: B's route stays
	want = store.Route{MachineID: "m-1", ReplicaID: "r-b", Addr: b.Addr, Since: T0.Add(time.Second)}
	if diff := cmp.Diff(must(s.Route(ctx, "m-1", T0))(t), want); diff != "" {
		t.Errorf("Route after the move (-got +want):\n%s", diff)
	}
	_, err := s.Route(ctx, "m-9", T0)
	wantErr(t, "route of an unknown machine", err, store.ErrNotFound)

	// A heartbeats, B falls silent: B's routes are not served once it is
	// older than aliveSince, and go when it expires.
	later := T0.Add(10 * time.Second)
	noErr(t, s.ReplicaHeartbeat(ctx, "r-a", later))
	_, err = s.Route(ctx, "m-1", later.Add(-5*time.Second))
	wantErr(t, "route through a silent replica", err, store.ErrNotFound)
	if n := must(s.ExpireReplicas(ctx, later.Add(-5*time.Second)))(t); n != 1 {
		t.Errorf("ExpireReplicas = %d, want 1", n)
	}
	wantErr(t, "heartbeat of an expired replica", s.ReplicaHeartbeat(ctx, "r-b", later), store.ErrNotFound)
	// Registering again brings the replica back, without its old routes.
	b.HeartbeatAt = later
	noErr(t, s.RegisterReplica(ctx, b))
	_, err = s.Route(ctx, "m-1", T0)
	wantErr(t, "route of an expired replica", err, store.ErrNotFound)
	if r := must(s.Route(ctx, "m-2", later))(t); r.ReplicaID != "r-a" {
		t.Errorf("m-2 is routed to %s, want r-a", r.ReplicaID)
	}

	// A clean shutdown takes the replica's routes with it.
	noErr(t, s.DeleteReplica(ctx, "r-a"))
	noErr(t, s.DeleteReplica(ctx, "r-a"))
	_, err = s.Route(ctx, "m-2", T0)
	wantErr(t, "route of a deleted replica", err, store.ErrNotFound)
	if diff := cmp.Diff(must(s.ListReplicas(ctx))(t), []store.Replica{b}); diff != "" {
		t.Errorf("ListReplicas at the end (-got +want):\n%s", diff)
	}
}

func testListRoutes(t *testing.T, s store.Store) {
	ctx := t.Context()
	acme := must(s.CreateOrg(ctx, "acme", T0))(t)
	globex := must(s.CreateOrg(ctx, "globex", T0))(t)
	m1 := must(s.CreateMachine(ctx, store.Machine{OrgID: acme.ID, Name: "one", PublicKey: NewKey(t), CreatedAt: T0}))(t)
	m2 := must(s.CreateMachine(ctx, store.Machine{OrgID: acme.ID, Name: "two", PublicKey: NewKey(t), CreatedAt: T0}))(t)
	g := must(s.CreateMachine(ctx, store.Machine{OrgID: globex.ID, Name: "other", PublicKey: NewKey(t), CreatedAt: T0}))(t)
	live := store.Replica{ID: "r-live", Addr: "10.0.0.1:9443", StartedAt: T0, HeartbeatAt: T0.Add(time.Minute)}
	silent := store.Replica{ID: "r-silent", Addr: "10.0.0.2:9443", StartedAt: T0, HeartbeatAt: T0}
	noErr(t, s.RegisterReplica(ctx, live))
	noErr(t, s.RegisterReplica(ctx, silent))
	noErr(t, s.SetRoute(ctx, m1.ID, live.ID, T0))
	noErr(t, s.SetRoute(ctx, m2.ID, silent.ID, T0))
	noErr(t, s.SetRoute(ctx, g.ID, live.ID, T0))
	got := must(s.ListRoutes(ctx, acme.ID, T0.Add(30*time.Second)))(t)
	want := []store.Route{{MachineID: m1.ID, ReplicaID: live.ID, Addr: live.Addr, Since: T0}}
	if diff := cmp.Diff(got, want); diff != "" {
		t.Errorf("ListRoutes of acme through live replicas (-got +want):\n%s", diff)
	}
	if n := len(must(s.ListRoutes(ctx, acme.ID, T0))(t)); n != 2 {
		t.Errorf("ListRoutes of acme, every replica: %d routes, want 2", n)
	}
}
