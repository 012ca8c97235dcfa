package pairing

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/devdepot-ai/agentd/internal/hub/store"
	"github.com/devdepot-ai/agentd/internal/hub/store/storetest"
)

// clock is a fake clock that moves only when told.
type clock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *clock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.now }

func (c *clock) Advance(d time.Duration) { c.mu.Lock(); defer c.mu.Unlock(); c.now = c.now.Add(d) }

// env is a pairing service on a real SQLite file with two orgs.
type env struct {
	svc          *Service
	store        *store.SQLite
	clock        *clock
	dbPath       string
	acme, globex store.Org
}

func newEnv(t *testing.T, opts Options) *env {
	t.Helper()
	ctx := t.Context()
	path := filepath.Join(t.TempDir(), "hub.db")
	s, err := store.OpenSQLite(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	c := &clock{now: storetest.T0}
	e := &env{store: s, clock: c, dbPath: path}
	if e.acme, err = s.CreateOrg(ctx, "acme", c.Now()); err != nil {
		t.Fatal(err)
	}
	if e.globex, err = s.CreateOrg(ctx, "globex", c.Now()); err != nil {
		t.Fatal(err)
	}
	opts.Store, opts.Now = s, c.Now
	if e.svc, err = New(ctx, opts); err != nil {
		t.Fatal(err)
	}
	return e
}

func (e *env) code(t *testing.T, org store.Org) string {
	t.Helper()
	code, _, err := e.svc.CreateCode(t.Context(), org.ID, 0, "admin-token")
	if err != nil {
		t.Fatal(err)
	}
	return code
}

func request(t *testing.T) MachineRequest {
	return MachineRequest{PublicKey: storetest.NewKey(t), Hostname: "laptop.local", OS: "linux", Arch: "amd64", Name: "Jane’s laptop", Version: "v1.2.3"}
}

// wrongSecondHalf returns code with its last character changed.
func wrongSecondHalf(code string) string {
	last := code[len(code)-1]
	i := strings.IndexByte(Alphabet, last)
	return code[:len(code)-1] + string(Alphabet[(i+1)%len(Alphabet)])
}

var codeForm = regexp.MustCompile(`^[` + Alphabet + `]{4}-[` + Alphabet + `]{4}$`)

func TestCreateAndRedeem(t *testing.T) {
	t.Parallel()
	e := newEnv(t, Options{})
	ctx := t.Context()
	code, expires, err := e.svc.CreateCode(ctx, e.acme.ID, 0, "admin-token")
	if err != nil {
		t.Fatal(err)
	}
	if !codeForm.MatchString(code) {
		t.Errorf("code %q: want XXXX-XXXX from %s", code, Alphabet)
	}
	if want := storetest.T0.Add(15 * time.Minute); !expires.Equal(want) {
		t.Errorf("expires %v, want %v (15 min default)", expires, want)
	}

	e.clock.Advance(time.Minute)
	req := request(t)
	typed := " " + strings.ToLower(code[:2]) + " " + code[2:4] + code[5:] + "\n" // how people type
	id, org, err := e.svc.Redeem(ctx, typed, "192.0.2.1:40000", req)
	if err != nil {
		t.Fatal(err)
	}
	if org != "acme" || !strings.HasPrefix(id, "m-") {
		t.Errorf("Redeem = %q, %q; want m-… in acme", id, org)
	}
	m, err := e.store.Machine(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	want := store.Machine{
		ID: id, OrgID: e.acme.ID, Name: "Jane’s laptop", Hostname: "laptop.local", OS: "linux", Arch: "amd64",
		Version: "v1.2.3", PublicKey: req.PublicKey, CreatedAt: storetest.T0.Add(time.Minute),
	}
	if diff := cmp.Diff(m, want); diff != "" {
		t.Errorf("machine (-got +want):\n%s", diff)
	}
	codes, err := e.store.ListPairingCodes(ctx, e.acme.ID)
	if err != nil {
		t.Fatal(err)
	}
	if len(codes) != 1 || codes[0].CreatedBy != "admin-token" || codes[0].UsedBy != id || codes[0].UsedFrom != "192.0.2.1" {
		t.Errorf("stored codes: %+v", codes)
	}

	// The code is in no file of the database, in either form.
	e.store.Close()
	for _, suffix := range []string{"", "-wal", "-shm"} {
		b, err := os.ReadFile(e.dbPath + suffix)
		if errors.Is(err, os.ErrNotExist) {
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		for _, form := range []string{code, strings.ReplaceAll(code, "-", ""), code[:4], code[5:]} {
			if bytes.Contains(b, []byte(form)) {
				t.Errorf("hub.db%s contains %q: codes must be stored only as HMACs", suffix, form)
			}
		}
	}
}

func TestRedeemFailures(t *testing.T) {
	t.Parallel()
	type result struct {
		err  error
		msg  string // a substring of the message
		live bool   // the code can still be redeemed afterwards
	}
	tests := []struct {
		name string
		// try redeems (or tries to) the fresh code of acme; it may move the clock.
		try  func(t *testing.T, e *env, code string) error
		want result
	}{
		{
			name: "used",
			try: func(t *testing.T, e *env, code string) error {
				redeemOK(t, e, code, request(t))
				e.clock.Advance(2 * time.Minute)
				return redeemErr(t, e, code, request(t))
			},
			want: result{ErrUsed, "pairing code was used 2m ago, and a code pairs one machine; ask your admin for a new one", false},
		},
		{
			name: "expired",
			try: func(t *testing.T, e *env, code string) error {
				e.clock.Advance(18 * time.Minute)
				return redeemErr(t, e, code, request(t))
			},
			want: result{ErrExpired, "pairing code expired 3m ago; ask your admin for a new one", false},
		},
		{
			name: "expired to the microsecond",
			try: func(t *testing.T, e *env, code string) error {
				e.clock.Advance(15 * time.Minute)
				return redeemErr(t, e, code, request(t))
			},
			want: result{ErrExpired, "expired 0s ago", false},
		},
		{
			name: "unknown code",
			try: func(t *testing.T, e *env, code string) error {
				other := "ABCD-EFGH"
				if code[:4] == "ABCD" {
					other = "HGFE-DCBA"
				}
				return redeemErr(t, e, other, request(t))
			},
			want: result{ErrWrongCode, "pairing code not recognised; check it, or ask your admin for a new one", true},
		},
		{
			name: "wrong second half",
			try: func(t *testing.T, e *env, code string) error {
				return redeemErr(t, e, wrongSecondHalf(code), request(t))
			},
			want: result{ErrWrongCode, "pairing code not recognised", true},
		},
		{name: "too short", try: redeemWith("ABCD-EFG", nil), want: result{ErrWrongCode, "8 characters, like ABCD-EF23; that had 7", true}},
		{name: "ambiguous character", try: redeemWith("ABCD-EF0H", nil), want: result{ErrWrongCode, "codes are letters except I, L and O", true}},
		{name: "huge code", try: redeemWith(strings.Repeat("A", 1<<20), nil), want: result{ErrWrongCode, "too long", true}},
		{name: "short key", try: redeemWith("", func(r *MachineRequest) { r.PublicKey = r.PublicKey[:31] }), want: result{ErrInvalid, "public key has 31 bytes; want a 32-byte Ed25519 public key", true}},
		{name: "no key", try: redeemWith("", func(r *MachineRequest) { r.PublicKey = nil }), want: result{ErrInvalid, "public key has 0 bytes", true}},
		{name: "zero key", try: redeemWith("", func(r *MachineRequest) { r.PublicKey = make([]byte, 32) }), want: result{ErrInvalid, "all zeros", true}},
		{name: "no hostname", try: redeemWith("", func(r *MachineRequest) { r.Hostname = "  " }), want: result{ErrInvalid, "hostname is empty", true}},
		{name: "long hostname", try: redeemWith("", func(r *MachineRequest) { r.Hostname = strings.Repeat("h", 254) }), want: result{ErrInvalid, "hostname has 254 bytes; at most 253", true}},
		{name: "hostname not UTF-8", try: redeemWith("", func(r *MachineRequest) { r.Hostname = "host\xff" }), want: result{ErrInvalid, "hostname is not valid UTF-8", true}},
		{name: "control characters", try: redeemWith("", func(r *MachineRequest) { r.Name = "evil\x1b[2J" }), want: result{ErrInvalid, "name contains control characters", true}},
		{name: "long name", try: redeemWith("", func(r *MachineRequest) { r.Name = strings.Repeat("é", 65) }), want: result{ErrInvalid, "name has 65 characters; at most 64", true}},
		{name: "bad os", try: redeemWith("", func(r *MachineRequest) { r.OS = "Linux 6.1" }), want: result{ErrInvalid, "os must be", true}},
		{name: "bad version", try: redeemWith("", func(r *MachineRequest) { r.Version = "1.0; rm -rf /" }), want: result{ErrInvalid, "version must be", true}},
		{
			name: "key registered",
			try: func(t *testing.T, e *env, code string) error {
				req := request(t)
				redeemOK(t, e, e.code(t, e.globex), req)
				return redeemErr(t, e, code, req)
			},
			want: result{ErrKeyRegistered, "public key is registered already", true},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t, Options{})
			code := e.code(t, e.acme)
			err := tt.try(t, e, code)
			if !errors.Is(err, tt.want.err) {
				t.Fatalf("error %v, want %v", err, tt.want.err)
			}
			var pe *Error
			if !errors.As(err, &pe) || !strings.Contains(pe.Msg, tt.want.msg) {
				t.Errorf("message %q, want it to contain %q", err, tt.want.msg)
			}
			if strings.Contains(err.Error(), code) || strings.Contains(err.Error(), strings.ReplaceAll(code, "-", "")) {
				t.Errorf("message %q repeats the code", err)
			}
			_, _, err = e.svc.Redeem(t.Context(), code, "198.51.100.9:1", request(t))
			if live := err == nil; live != tt.want.live {
				t.Errorf("code redeemable afterwards: %v (%v), want %v", live, err, tt.want.live)
			}
		})
	}
}

// redeemWith returns a try that redeems code (empty: the fresh one) with a
// request changed by edit.
func redeemWith(code string, edit func(*MachineRequest)) func(*testing.T, *env, string) error {
	return func(t *testing.T, e *env, fresh string) error {
		if code == "" {
			code = fresh
		}
		req := request(t)
		if edit != nil {
			edit(&req)
		}
		return redeemErr(t, e, code, req)
	}
}

func redeemOK(t *testing.T, e *env, code string, req MachineRequest) string {
	t.Helper()
	id, _, err := e.svc.Redeem(t.Context(), code, "192.0.2.1:1", req)
	if err != nil {
		t.Fatal(err)
	}
	return id
}

func redeemErr(t *testing.T, e *env, code string, req MachineRequest) error {
	t.Helper()
	id, org, err := e.svc.Redeem(t.Context(), code, "192.0.2.1:1", req)
	if err == nil {
		t.Fatalf("Redeem succeeded (%s in %s), want an error", id, org)
	}
	if id != "" || org != "" {
		t.Errorf("Redeem returned %q, %q with an error", id, org)
	}
	return err
}

func TestRetryWithSameKeyGetsSameMachine(t *testing.T) {
	t.Parallel()
	e := newEnv(t, Options{})
	code := e.code(t, e.acme)
	req := request(t)
	first := redeemOK(t, e, code, req)
	e.clock.Advance(time.Second)
	if again := redeemOK(t, e, code, req); again != first {
		t.Errorf("retry paired %s, want the first pairing's %s", again, first)
	}
	// Once revoked, the code does not bring the machine back.
	if err := e.store.RevokeMachine(t.Context(), e.acme.ID, first, e.clock.Now()); err != nil {
		t.Fatal(err)
	}
	if err := redeemErr(t, e, code, req); !errors.Is(err, ErrUsed) {
		t.Errorf("retry after revoke: %v, want ErrUsed", err)
	}
}

func TestLockout(t *testing.T) {
	t.Parallel()
	tests := []struct {
		wrong int
		want  error
		msg   string
	}{
		{wrong: 4, want: nil},
		{wrong: 5, want: ErrLocked, msg: "pairing code is locked after 5 wrong attempts; ask your admin for a new one"},
		{wrong: 8, want: ErrLocked},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprint(tt.wrong, " wrong"), func(t *testing.T) {
			t.Parallel()
			e := newEnv(t, Options{})
			code := e.code(t, e.acme)
			for i := range tt.wrong {
				// From a fresh address each time: the lockout is per code, not per address.
				_, _, err := e.svc.Redeem(t.Context(), wrongSecondHalf(code), fmt.Sprintf("203.0.113.%d:1", i), request(t))
				if !errors.Is(err, ErrWrongCode) {
					t.Fatalf("wrong guess %d: %v, want ErrWrongCode (the same answer, locked or not)", i+1, err)
				}
			}
			_, _, err := e.svc.Redeem(t.Context(), code, "192.0.2.1:1", request(t))
			if !errors.Is(err, tt.want) || tt.want == nil && err != nil {
				t.Fatalf("right code after %d wrong: %v, want %v", tt.wrong, err, tt.want)
			}
			if tt.msg != "" && err.Error() != tt.msg {
				t.Errorf("message %q, want %q", err, tt.msg)
			}
		})
	}
}

func TestBlindGuessesDoNotLockCodes(t *testing.T) {
	t.Parallel()
	e := newEnv(t, Options{})
	code := e.code(t, e.acme)
	for i := range 50 {
		guess := newCode()
		if guess[:4] == strings.ReplaceAll(code, "-", "")[:4] {
			continue
		}
		_, _, err := e.svc.Redeem(t.Context(), guess, fmt.Sprintf("203.0.113.%d:1", i), request(t))
		if !errors.Is(err, ErrWrongCode) {
			t.Fatalf("blind guess: %v, want ErrWrongCode", err)
		}
	}
	redeemOK(t, e, code, request(t))
}

func TestRateLimit(t *testing.T) {
	t.Parallel()
	e := newEnv(t, Options{PerMinute: 10})
	ctx := t.Context()
	code := e.code(t, e.acme)
	attempt := func(addr, c string) error {
		_, _, err := e.svc.Redeem(ctx, c, addr, request(t))
		return err
	}
	for i := range 10 {
		if err := attempt("192.0.2.7:1000", "ABCD-EFG"); !errors.Is(err, ErrWrongCode) {
			t.Fatalf("attempt %d: %v, want ErrWrongCode", i+1, err)
		}
	}
	steps := []struct {
		name    string
		advance time.Duration
		addr    string
		code    string
		want    error
	}{
		{"11th attempt, another port", 0, "192.0.2.7:2000", "ABCD-EFG", ErrRateLimited},
		{"even with the right code", 0, "192.0.2.7:2000", code, ErrRateLimited},
		{"another address", 0, "192.0.2.8:1000", "ABCD-EFG", ErrWrongCode},
		{"IPv4 mapped in IPv6", 0, "[::ffff:192.0.2.7]:1", "ABCD-EFG", ErrRateLimited},
		{"6 s later: one token", 6 * time.Second, "192.0.2.7:1000", "ABCD-EFG", ErrWrongCode},
		{"and only one", 0, "192.0.2.7:1000", "ABCD-EFG", ErrRateLimited},
		{"a minute later: all back", time.Minute, "192.0.2.7:1000", code, nil},
	}
	for _, st := range steps {
		e.clock.Advance(st.advance)
		err := attempt(st.addr, st.code)
		if !errors.Is(err, st.want) || st.want == nil && err != nil {
			t.Fatalf("%s: %v, want %v", st.name, err, st.want)
		}
	}
	e.clock.Advance(time.Hour)
	var pe *Error
	for range 10 {
		attempt("192.0.2.7:1000", "ABCD-EFG")
	}
	err := attempt("192.0.2.7:1000", "ABCD-EFG")
	if !errors.As(err, &pe) || pe.RetryAfter != 6*time.Second || pe.Msg != "too many pairing attempts from this address; try again in 6s" {
		t.Errorf("rate-limited error %#v, want RetryAfter 6s and a message saying so", err)
	}

	// Successful pairings give their token back: a fleet behind one NAT pairs.
	for i := range 25 {
		if err := attempt("192.0.2.99:1", e.code(t, e.acme)); err != nil {
			t.Fatalf("pairing %d from one address: %v", i+1, err)
		}
	}
}

func TestCodesPairIntoTheirOwnOrg(t *testing.T) {
	t.Parallel()
	e := newEnv(t, Options{})
	ctx := t.Context()
	acmeCode, globexCode := e.code(t, e.acme), e.code(t, e.globex)
	id, org, err := e.svc.Redeem(ctx, globexCode, "192.0.2.1:1", request(t))
	if err != nil {
		t.Fatal(err)
	}
	if org != "globex" {
		t.Errorf("globex's code paired into %q", org)
	}
	if m, err := e.store.Machine(ctx, id); err != nil || m.OrgID != e.globex.ID {
		t.Errorf("machine %+v, %v: want it in globex", m, err)
	}
	if ms, err := e.store.ListMachines(ctx, e.acme.ID); err != nil || len(ms) != 0 {
		t.Errorf("acme's machines: %+v, %v; want none", ms, err)
	}
	if _, org, err = e.svc.Redeem(ctx, acmeCode, "192.0.2.1:1", request(t)); err != nil || org != "acme" {
		t.Errorf("acme's code: %q, %v; want acme", org, err)
	}
}

func TestConcurrentRedeem(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name     string
		sameKey  bool
		wantWins int // successful calls
	}{
		{"distinct keys: one wins", false, 1},
		{"one key retried: all get the same machine", true, 20},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t, Options{})
			code := e.code(t, e.acme)
			key := storetest.NewKey(t)
			const n = 20
			ids := make([]string, n)
			errs := make([]error, n)
			var wg sync.WaitGroup
			start := make(chan struct{}) // all at once, not one after another
			for i := range n {
				req := request(t)
				if tt.sameKey {
					req.PublicKey = key
				}
				wg.Go(func() {
					<-start
					ids[i], _, errs[i] = e.svc.Redeem(t.Context(), code, fmt.Sprintf("198.51.100.%d:1", i), req)
				})
			}
			close(start)
			wg.Wait()
			wins := map[string]int{}
			for i, err := range errs {
				switch {
				case err == nil:
					wins[ids[i]]++
				case !errors.Is(err, ErrUsed):
					t.Errorf("loser %d: %v, want ErrUsed", i, err)
				}
			}
			if len(wins) != 1 {
				t.Errorf("machines paired: %v, want exactly one", wins)
			}
			for _, n := range wins {
				if n != tt.wantWins {
					t.Errorf("%d calls succeeded, want %d", n, tt.wantWins)
				}
			}
			if ms, err := e.store.ListMachines(t.Context(), e.acme.ID); err != nil || len(ms) != 1 {
				t.Errorf("%d machines stored (%v), want 1", len(ms), err)
			}
		})
	}
}

func TestCreateCode(t *testing.T) {
	t.Parallel()
	e := newEnv(t, Options{})
	ctx := t.Context()
	tests := []struct {
		name string
		org  string
		ttl  time.Duration
		want error
	}{
		{"default", e.acme.ID, 0, nil},
		{"an hour", e.acme.ID, time.Hour, nil},
		{"too short", e.acme.ID, time.Second, ErrInvalid},
		{"negative", e.acme.ID, -time.Minute, ErrInvalid},
		{"too long", e.acme.ID, 25 * time.Hour, ErrInvalid},
		{"unknown org", "org-nope", 0, store.ErrNotFound},
	}
	for _, tt := range tests {
		_, expires, err := e.svc.CreateCode(ctx, tt.org, tt.ttl, "admin")
		if !errors.Is(err, tt.want) || tt.want == nil && err != nil {
			t.Errorf("%s: %v, want %v", tt.name, err, tt.want)
		}
		if err == nil && tt.ttl != 0 && !expires.Equal(e.clock.Now().Add(tt.ttl)) {
			t.Errorf("%s: expires %v", tt.name, expires)
		}
	}

	// Codes are distinct, and long-expired ones are cleared away.
	seen := map[string]bool{}
	for range 50 {
		c := e.code(t, e.acme)
		if seen[c] {
			t.Fatalf("code %s drawn twice", c)
		}
		seen[c] = true
	}
	e.clock.Advance(26 * time.Hour) // past every expiry and the 24 h kept after it
	e.code(t, e.acme)
	codes, err := e.store.ListPairingCodes(ctx, e.acme.ID)
	if err != nil {
		t.Fatal(err)
	}
	if len(codes) != 1 {
		t.Errorf("%d codes stored a day later, want only the new one", len(codes))
	}
}

func TestNormalize(t *testing.T) {
	t.Parallel()
	tests := []struct {
		in, want string
		err      error
	}{
		{"ABCD-EF23", "ABCDEF23", nil},
		{"abcd-ef23", "ABCDEF23", nil},
		{" ab cd\tef-2-3 ", "ABCDEF23", nil},
		{"ABCDEF23", "ABCDEF23", nil},
		{"ABCD-EF2", "", ErrWrongCode},
		{"ABCD-EF234", "", ErrWrongCode},
		{"ABCD-EF2O", "", ErrWrongCode}, // O
		{"ABCD-EF21", "", ErrWrongCode}, // 1
		{"ABCD-EFGI", "", ErrWrongCode}, // I
		{"ABCD-EFGL", "", ErrWrongCode}, // L
		{"ABCD-EFGſ", "", ErrWrongCode}, // long s upper-cases to S in Unicode: not a code character
		{"ABCD_EF23", "", ErrWrongCode},
		{"", "", ErrWrongCode},
		{"ABCD-EF2\xff", "", ErrWrongCode},
	}
	for _, tt := range tests {
		got, err := Normalize(tt.in)
		if got != tt.want || !errors.Is(err, tt.err) || tt.err == nil && err != nil {
			t.Errorf("Normalize(%q) = %q, %v; want %q, %v", tt.in, got, err, tt.want, tt.err)
		}
	}
}

func TestNewCodeUsesWholeAlphabet(t *testing.T) {
	t.Parallel()
	counts := map[rune]int{}
	for range 2000 {
		for _, r := range newCode() {
			counts[r]++
		}
	}
	if len(counts) != len(Alphabet) {
		t.Errorf("%d distinct characters in 16,000, want all %d", len(counts), len(Alphabet))
	}
	for r, n := range counts {
		// 16,000/31 ≈ 516 each; a fair draw stays well within ±30%.
		if n < 360 || n > 670 {
			t.Errorf("character %c drawn %d times, want about 516", r, n)
		}
	}
}

func TestAgo(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		d    time.Duration
		want string
	}{
		{0, "0s"}, {59 * time.Second, "59s"}, {3*time.Minute + 30*time.Second, "3m"},
		{5 * time.Hour, "5h"}, {47 * time.Hour, "47h"}, {72 * time.Hour, "3d"},
	} {
		if got := ago(tt.d); got != tt.want {
			t.Errorf("ago(%v) = %q, want %q", tt.d, got, tt.want)
		}
	}
}

func TestNewNeedsAStore(t *testing.T) {
	t.Parallel()
	if _, err := New(t.Context(), Options{}); err == nil {
		t.Error("New without a store succeeded")
	}
}
