package storetest

import (
	"bytes"
	"testing"

	"github.com/devdepot-ai/agentd/internal/hub/store"
)

// Broker: an org's CA is stored once (a second put returns the first),
// per org; an environment's private destinations round-trip, and bad
// input changes nothing.
func testBroker(t *testing.T, s store.Store) {
	ctx := t.Context()
	org := must(s.CreateOrg(ctx, "acme", T0))(t)
	other := must(s.CreateOrg(ctx, "beta", T0))(t)
	_, _, err := s.OrgCA(ctx, org.ID)
	wantErr(t, "no CA yet", err, store.ErrNotFound)
	c, k, err := s.PutOrgCA(ctx, org.ID, []byte("cert-1"), []byte("key-1"), T0)
	noErr(t, err)
	if string(c) != "cert-1" || string(k) != "key-1" {
		t.Errorf("put: %q %q", c, k)
	}
	c, k, err = s.PutOrgCA(ctx, org.ID, []byte("cert-2"), []byte("key-2"), T0)
	noErr(t, err)
	if string(c) != "cert-1" || string(k) != "key-1" {
		t.Errorf("second put replaced the first: %q %q", c, k)
	}
	_, _, err = s.OrgCA(ctx, other.ID)
	wantErr(t, "another org's CA", err, store.ErrNotFound)
	_, _, err = s.PutOrgCA(ctx, other.ID, nil, []byte("k"), T0)
	wantErr(t, "empty cert", err, store.ErrInvalid)

	must(s.CreateEnvironment(ctx, store.Environment{OrgID: org.ID, Name: "py", Image: "ghcr.io/acme/py:1", Network: "public", CreatedAt: T0}))(t)
	if l := must(s.EnvironmentAllowPrivate(ctx, org.ID, "py"))(t); len(l) != 0 {
		t.Errorf("new environment allows %v", l)
	}
	want := []string{"10.20.0.0/16", "mirror.internal"}
	noErr(t, s.SetEnvironmentAllowPrivate(ctx, org.ID, "py", want, T0))
	got := must(s.EnvironmentAllowPrivate(ctx, org.ID, "py"))(t)
	if !bytes.Equal([]byte(fmtList(got)), []byte(fmtList(want))) {
		t.Errorf("allow-private %v, want %v", got, want)
	}
	wantErr(t, "bad entry", s.SetEnvironmentAllowPrivate(ctx, org.ID, "py", []string{"a,b"}, T0), store.ErrInvalid)
	wantErr(t, "unknown env", s.SetEnvironmentAllowPrivate(ctx, org.ID, "nope", want, T0), store.ErrNotFound)
	_, err = s.EnvironmentAllowPrivate(ctx, other.ID, "py")
	wantErr(t, "another org's env", err, store.ErrNotFound)
	if got := must(s.EnvironmentAllowPrivate(ctx, org.ID, "py"))(t); fmtList(got) != fmtList(want) {
		t.Errorf("a refused set changed the list: %v", got)
	}
	noErr(t, s.SetEnvironmentAllowPrivate(ctx, org.ID, "py", nil, T0))
	if l := must(s.EnvironmentAllowPrivate(ctx, org.ID, "py"))(t); len(l) != 0 {
		t.Errorf("cleared list: %v", l)
	}
}

func fmtList(l []string) string {
	var b bytes.Buffer
	for _, s := range l {
		b.WriteString(s + "|")
	}
	return b.String()
}
