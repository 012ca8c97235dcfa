package sandbox

// CheckStatus is the outcome of one validation check.
type CheckStatus string

// Check outcomes.
const (
	Pass CheckStatus = "pass"
	Warn CheckStatus = "warn" // works, but something is worth fixing
	Fail CheckStatus = "fail" // the image is rejected
)

// Check is one line of an image's validation report: what was checked and,
// when it did not pass, what breaks for the agent and how to fix it ("every
// Python cell fails" and "install python3", never just "missing python3").
type Check struct {
	ID     string      `json:"id"`     // stable, e.g. "reference.host"
	Status CheckStatus `json:"status"` // pass | warn | fail
	Title  string      `json:"title"`  // what was checked, one line
	Breaks string      `json:"breaks,omitempty"`
	Fix    string      `json:"fix,omitempty"`
}

// Report is an image's validation report, checks in the order they ran.
type Report []Check

// Failed reports whether any check failed.
func (r Report) Failed() bool {
	for _, c := range r {
		if c.Status == Fail {
			return true
		}
	}
	return false
}
