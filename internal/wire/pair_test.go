package wire

import (
	"encoding/json"
	"net/url"
	"testing"
)

// The pairing JSON is a contract with already-deployed daemons and hubs:
// these bytes must not change.
func TestPairJSON(t *testing.T) {
	for _, c := range []struct {
		v    any
		want string
	}{
		{PairRequest{Code: "ABCD-EFGH", PublicKey: []byte{1, 2, 3}, Hostname: "h", OS: "linux", Arch: "amd64"},
			`{"code":"ABCD-EFGH","public_key":"AQID","hostname":"h","os":"linux","arch":"amd64"}`},
		{PairRequest{Code: "c", Name: "n", Version: "v1"},
			`{"code":"c","public_key":null,"hostname":"","os":"","arch":"","name":"n","version":"v1"}`},
		{PairResponse{MachineID: "m-1", Org: "acme"}, `{"machine_id":"m-1","org":"acme"}`},
		{PairResponse{}, `{"machine_id":"","org":""}`},
		{PairError{Error: "no"}, `{"error":"no"}`},
	} {
		b, err := json.Marshal(c.v)
		if err != nil || string(b) != c.want {
			t.Errorf("%T: got %s (%v), want %s", c.v, b, err, c.want)
		}
	}
}

func TestPairPathJoin(t *testing.T) {
	for base, want := range map[string]string{
		"https://hub.example":        "https://hub.example/v1/pair",
		"https://hub.example/prefix": "https://hub.example/prefix/v1/pair",
	} {
		u, _ := url.Parse(base)
		if got := u.JoinPath(PairPath).String(); got != want {
			t.Errorf("%s: got %s, want %s", base, got, want)
		}
	}
}
