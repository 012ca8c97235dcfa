package replica_test

import (
	"bytes"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/json"
	"net/http"
	"os"
	"strings"
	"testing"

	"go.uber.org/goleak"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"

	"github.com/devdepot-ai/agentd/internal/hub/hubtest"
	"github.com/devdepot-ai/agentd/internal/hub/pairing"
	"github.com/devdepot-ai/agentd/internal/hub/store"
	"github.com/devdepot-ai/agentd/internal/hub/store/pgtest"
	hubv1 "github.com/devdepot-ai/agentd/proto/gen/agentd/hub/v1"
)

// TestMain runs one PostgreSQL cluster for the package's tests and fails
// them if a goroutine outlives them.
func TestMain(m *testing.M) {
	code := pgtest.Main(m)
	if err := goleak.Find(); code == 0 && err != nil {
		os.Stderr.WriteString("goleak: " + err.Error() + "\n")
		code = 1
	}
	os.Exit(code)
}

// openPostgres opens a store on url, closed when the test ends.
func openPostgres(t testing.TB, url string) *store.Postgres {
	t.Helper()
	s, err := store.OpenPostgres(t.Context(), url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// twoReplicas starts two hubs on one new Postgres database, each with a
// pool of its own, as two agenthub processes would have.
func twoReplicas(t testing.TB, opts hubtest.Options) (a, b *hubtest.Hub) {
	t.Helper()
	url := pgtest.Database(t)
	opts.Store = openPostgres(t, url)
	a = hubtest.Start(t, opts)
	b = a.Replica(openPostgres(t, url))
	return a, b
}

func adminClient(t testing.TB, h *hubtest.Hub) hubv1.AdminServiceClient {
	t.Helper()
	cc, err := grpc.NewClient(h.Addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cc.Close() })
	return hubv1.NewAdminServiceClient(cc)
}

func pairCode(t testing.TB, h *hubtest.Hub) string {
	t.Helper()
	ctx := metadata.AppendToOutgoingContext(t.Context(), "authorization", "Bearer "+h.Token)
	resp, err := adminClient(t, h).CreatePairingCode(ctx, &hubv1.CreatePairingCodeRequest{})
	if err != nil {
		t.Fatal(err)
	}
	return resp.GetCode()
}

// pair posts a pairing request with code to h and returns the HTTP status.
func pair(t *testing.T, h *hubtest.Hub, code string) int {
	t.Helper()
	pub, _, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	body, err := json.Marshal(map[string]any{"code": code, "public_key": []byte(pub), "hostname": "box", "os": "linux", "arch": "amd64"})
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.Post(h.URL+"/v1/pair", "application/json", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

// wrongSecondHalf returns code with its last character changed: the same
// code's row, a wrong guess at it.
func wrongSecondHalf(code string) string {
	last := code[len(code)-1]
	i := strings.IndexByte(pairing.Alphabet, last)
	return code[:len(code)-1] + string(pairing.Alphabet[(i+1)%len(pairing.Alphabet)])
}

// TestLimitsHoldAcrossReplicas: wrong guesses at a code, and pairing
// attempts from one address, count the same whichever replica they reach.
func TestLimitsHoldAcrossReplicas(t *testing.T) {
	t.Parallel()
	a, b := twoReplicas(t, hubtest.Options{})
	replicas := []*hubtest.Hub{a, b}
	code := pairCode(t, a)
	steps := []struct {
		name string
		to   *hubtest.Hub
		code string
		want int
	}{
		{"wrong guess 1 on A", a, wrongSecondHalf(code), http.StatusForbidden},
		{"wrong guess 2 on B", b, wrongSecondHalf(code), http.StatusForbidden},
		{"wrong guess 3 on A", a, wrongSecondHalf(code), http.StatusForbidden},
		{"wrong guess 4 on B", b, wrongSecondHalf(code), http.StatusForbidden},
		{"wrong guess 5 on A", a, wrongSecondHalf(code), http.StatusForbidden},
		{"the right code on B: locked", b, code, http.StatusGone},
		// Six failed attempts from 127.0.0.1 so far, of 10 a minute.
		{"blind guess 7 on A", a, "ABCD-EFGH", http.StatusForbidden},
		{"blind guess 8 on B", b, "ABCD-EFGH", http.StatusForbidden},
		{"blind guess 9 on A", a, "ABCD-EFGH", http.StatusForbidden},
		{"blind guess 10 on B", b, "ABCD-EFGH", http.StatusForbidden},
		{"11th on A: rate limited", a, "ABCD-EFGH", http.StatusTooManyRequests},
		{"11th on B: rate limited", b, pairCode(t, b), http.StatusTooManyRequests},
	}
	for _, st := range steps {
		if got := pair(t, st.to, st.code); got != st.want {
			t.Errorf("%s: status %d, want %d", st.name, got, st.want)
		}
	}
	for i, h := range replicas {
		ms, err := h.Store.ListMachines(t.Context(), h.Org.ID)
		if err != nil || len(ms) != 0 {
			t.Errorf("replica %d: machines %v (%v), want none paired", i, ms, err)
		}
	}
}
