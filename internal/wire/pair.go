package wire

// PairPath is where the hub takes pairing requests (HTTP POST).
const PairPath = "/v1/pair"

// PairRequest is the JSON body of POST /v1/pair: agentd sends it with the
// code an admin issued and the public half of the key it generated.
type PairRequest struct {
	// Code is the pairing code, XXXX-XXXX.
	Code string `json:"code"`
	// PublicKey is the machine's Ed25519 public key, 32 bytes (base64 in
	// JSON).
	PublicKey []byte `json:"public_key"`
	// Hostname, OS and Arch describe the machine (os.Hostname,
	// runtime.GOOS, runtime.GOARCH).
	Hostname string `json:"hostname"`
	OS       string `json:"os"`
	Arch     string `json:"arch"`
	// Name is the name to show in `agentctl machines`; empty means the
	// hostname.
	Name string `json:"name,omitempty"`
	// Version is the agentd version.
	Version string `json:"version,omitempty"`
}

// PairResponse is the JSON answer to a successful pairing (200 OK).
type PairResponse struct {
	// MachineID is the id the hub assigned to the machine.
	MachineID string `json:"machine_id"`
	// Org is the name of the org the machine joined.
	Org string `json:"org"`
}

// PairError is the JSON answer to a failed pairing (any status but 200).
type PairError struct {
	// Error says why, for a person.
	Error string `json:"error"`
}
