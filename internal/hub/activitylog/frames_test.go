package activitylog

import (
	"bytes"
	"errors"
	"fmt"
	"testing"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/grpc/mem"
	"google.golang.org/protobuf/proto"

	agentdv1 "github.com/devdepot-ai/agentd/proto/gen/agentd/v1"
)

// split is b as gRPC may receive it: in buffers of at most n bytes.
func split(b []byte, n int) mem.BufferSlice {
	var bs mem.BufferSlice
	for len(b) > 0 {
		k := min(n, len(b))
		bs = append(bs, mem.SliceBuffer(bytes.Clone(b[:k])))
		b = b[k:]
	}
	return bs
}

func startFrame(t testing.TB, ev *agentdv1.ProcessEvent) []byte {
	b, err := proto.Marshal(&agentdv1.StartResponse{Event: ev})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func outputEvent(data string) *agentdv1.ProcessEvent {
	return &agentdv1.ProcessEvent{Event: &agentdv1.ProcessEvent_Output{Output: &agentdv1.Output{
		Stream: agentdv1.OutputStream_OUTPUT_STREAM_STDOUT, Offset: 12345, Data: []byte(data)}}}
}

// The record of a Start keeps the process id, the exit and the head and
// tail of the output, whatever buffers the frames arrive in.
func TestProcStream(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		outputs []string
		exited  *agentdv1.Exited
		want    string
	}{
		{"short", []string{"hello\n", "world\n"}, &agentdv1.Exited{ExitCode: 3}, "hello\nworld\n"},
		{"ended by a stop", []string{"zzz"}, &agentdv1.Exited{ExitCode: -1, Signal: "TERM", Reason: "sandbox stopped: idle 30m"}, "zzz"},
		{"exactly the limit", []string{"0123456789", "abcdefghij"}, &agentdv1.Exited{}, "0123456789abcdefghij"},
		{"head and tail", []string{"0123456789", "abcdefghij", "KLMNOPQRST", "uvwxyz"}, &agentdv1.Exited{Signal: "KILL", TimedOut: true},
			"0123456789\n[… 16 bytes …]\nQRSTuvwxyz"},
		{"one big frame", []string{"0123456789abcdefghijKLMNOPQRSTuvwxyz"}, nil, "0123456789\n[… 16 bytes …]\nQRSTuvwxyz"},
	}
	for _, tt := range tests {
		for _, chunk := range []int{1, 3, 16, 1 << 20} {
			t.Run(fmt.Sprintf("%s/buffers of %d", tt.name, chunk), func(t *testing.T) {
				var p procStream
				p.init(20)
				p.event(split(startFrame(t, &agentdv1.ProcessEvent{Event: &agentdv1.ProcessEvent_Started{Started: &agentdv1.Started{Id: "p-42", Pid: 7}}}), chunk))
				for _, o := range tt.outputs {
					p.event(split(startFrame(t, outputEvent(o)), chunk))
				}
				if tt.exited != nil {
					p.event(split(startFrame(t, &agentdv1.ProcessEvent{Event: &agentdv1.ProcessEvent_Exited{Exited: tt.exited}}), chunk))
				}
				type result struct {
					ID, Output, Signal string
					Reason             string
					Exited, TimedOut   bool
					Code               int32
				}
				got := result{p.id, string(p.output()), p.signal, p.reason, p.exited, p.timedOut, p.code}
				want := result{ID: "p-42", Output: tt.want, Exited: tt.exited != nil}
				if tt.exited != nil {
					want.Signal, want.TimedOut, want.Code = tt.exited.GetSignal(), tt.exited.GetTimedOut(), tt.exited.GetExitCode()
					want.Reason = tt.exited.GetReason()
				}
				if diff := cmp.Diff(got, want); diff != "" {
					t.Errorf("(-got +want):\n%s", diff)
				}
			})
		}
	}
}

// Reading an output frame allocates nothing: the proxy's hot path.
func TestProcStreamOutputAllocs(t *testing.T) {
	frame := startFrame(t, outputEvent(string(bytes.Repeat([]byte("x"), 32<<10))))
	for _, chunk := range []int{16 << 10, 1 << 20} {
		data := split(frame, chunk)
		var p procStream
		p.init(8 << 10)
		if n := testing.AllocsPerRun(100, func() { p.event(data) }); n != 0 {
			t.Errorf("reading a 32 KiB output frame in buffers of %d: %v allocations, want 0", chunk, n)
		}
	}
}

func BenchmarkProcStreamOutput(b *testing.B) {
	frame := startFrame(b, outputEvent(string(bytes.Repeat([]byte("x"), 32<<10))))
	data := split(frame, 16<<10)
	var p procStream
	p.init(8 << 10)
	b.SetBytes(int64(len(frame)))
	b.ReportAllocs()
	for b.Loop() {
		p.event(data)
	}
}

// A removed sandbox's secret values are forgotten once its collectors have
// stored their last records, not before (those are redacted too).
func TestSandboxGoneForgetsSecrets(t *testing.T) {
	t.Parallel()
	h := &Recorder{running: map[string]int{}, retired: map[string]bool{}, secrets: newRedactor()}
	held := func(id string) bool {
		r := &agentdv1.ActivityRecord{Summary: "the key is sk-0123456789"}
		h.secrets.redact(id, r)
		return r.Summary == "the key is [secret KEY]"
	}
	h.secrets.hold("sb-a", map[string][]byte{"KEY": []byte("sk-0123456789"), "PIN": []byte("123")})
	h.secrets.hold("sb-b", map[string][]byte{"KEY": []byte("sk-0123456789")})
	h.running["sb-a"] = 1

	h.SandboxGone("sb-a") // its collector is still storing
	h.SandboxGone("sb-b") // none is
	if !held("sb-a") || held("sb-b") {
		t.Fatalf("after removal: sb-a redacted %v (want true, its collector runs), sb-b %v (want false)", held("sb-a"), held("sb-b"))
	}
	h.collected("sb-a")
	if held("sb-a") {
		t.Error("sb-a's secrets are held after its last collector ended")
	}
	// Values shorter than minSecretLen are not redacted ("123" would
	// blank every 123 in the output).
	h.secrets.hold("sb-c", map[string][]byte{"PIN": []byte("123")})
	r := &agentdv1.ActivityRecord{Output: []byte("1234")}
	h.secrets.redact("sb-c", r)
	if string(r.Output) != "1234" {
		t.Errorf("a 3-byte secret was redacted: %q", r.Output)
	}
}

// A sandbox that holds secrets whose values this hub does not know (it
// restarted since the run began, or another replica delivered them) has its
// records' text withheld, not stored as it came: redaction fails closed.
func TestSecretsUnknownWithheld(t *testing.T) {
	t.Parallel()
	r := newRedactor()
	asked := map[string]int{}
	r.holds = func(id string) (bool, error) {
		asked[id]++
		switch id {
		case "sb-secret":
			return true, nil
		case "sb-broken":
			return false, errors.New("store down")
		}
		return false, nil
	}
	for _, tc := range []struct {
		id       string
		withheld bool
	}{
		{"sb-secret", true}, // holds secrets, values unknown here
		{"sb-plain", false}, // holds none
		{"sb-broken", true}, // cannot tell: closed
		{"m-laptop", false}, // not a sandbox
		{"sb-secret", true}, // asked again: from the cache
	} {
		rec := &agentdv1.ActivityRecord{Summary: "ran `env`", Command: "env", Output: []byte("KEY=sk-0123456789\n")}
		r.redact(tc.id, rec)
		if got := rec.Summary == withheld && rec.Command == "" && string(rec.Output) == withheld; got != tc.withheld {
			t.Errorf("%s: withheld %v (record %q %q %q), want %v", tc.id, got, rec.Summary, rec.Command, rec.Output, tc.withheld)
		}
	}
	if asked["sb-secret"] != 1 {
		t.Errorf("the store was asked %d times about sb-secret, want once", asked["sb-secret"])
	}
	// Once the values are held, they are redacted in place as before.
	r.hold("sb-secret", map[string][]byte{"KEY": []byte("sk-0123456789")})
	rec := &agentdv1.ActivityRecord{Output: []byte("KEY=sk-0123456789\n")}
	r.redact("sb-secret", rec)
	if string(rec.Output) != "KEY=[secret KEY]\n" {
		t.Errorf("with the values held: %q", rec.Output)
	}
}
