package console

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/protobuf/types/known/timestamppb"

	hubv1 "github.com/devdepot-ai/agentd/proto/gen/agentd/hub/v1"
	agentdv1 "github.com/devdepot-ai/agentd/proto/gen/agentd/v1"
)

func out(stream agentdv1.OutputStream, off int64, s string) *agentdv1.ProcessEvent {
	return &agentdv1.ProcessEvent{Event: &agentdv1.ProcessEvent_Output{Output: &agentdv1.Output{Stream: stream, Offset: off, Data: []byte(s)}}}
}

func gap(off, n int64) *agentdv1.ProcessEvent {
	return &agentdv1.ProcessEvent{Event: &agentdv1.ProcessEvent_Gap{Gap: &agentdv1.Gap{Stream: agentdv1.OutputStream_OUTPUT_STREAM_STDOUT, Offset: off, Bytes: n}}}
}

var exited = &agentdv1.ProcessEvent{Event: &agentdv1.ProcessEvent_Exited{Exited: &agentdv1.Exited{}}}

func TestParts(t *testing.T) {
	t.Parallel()
	const so, se = agentdv1.OutputStream_OUTPUT_STREAM_STDOUT, agentdv1.OutputStream_OUTPUT_STREAM_STDERR
	for _, tt := range []struct {
		name    string
		evs     []*agentdv1.ProcessEvent
		want    []outputPart
		running bool
		ends    streamEnds
	}{
		{"none, running", nil, nil, true, streamEnds{}},
		{"head, gap, tail, exit", []*agentdv1.ProcessEvent{out(so, 0, "head\n"), out(se, 0, "err\n"), gap(9, 1000), out(so, 1009, "tail\n"), exited},
			[]outputPart{{Text: "head\nerr\n"}, {Gap: 1000}, {Text: "tail\n"}}, false, streamEnds{out: 1014, err: 4}},
		{"running, no gap", []*agentdv1.ProcessEvent{out(so, 0, "a"), out(so, 1, "b")}, []outputPart{{Text: "ab"}}, true, streamEnds{out: 2}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, running, ends := parts(tt.evs)
			if diff := cmp.Diff(got, tt.want); diff != "" {
				t.Errorf("parts (-got +want):\n%s", diff)
			}
			if running != tt.running || ends != tt.ends {
				t.Errorf("running %v ends %+v, want %v %+v", running, ends, tt.running, tt.ends)
			}
		})
	}
}

func TestCommandsPerHour(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 3, 1, 12, 30, 0, 0, time.UTC)
	rec := func(kind string, at time.Time) *hubv1.WatchResponse {
		return &hubv1.WatchResponse{Record: &agentdv1.ActivityRecord{Kind: kind, Time: timestamppb.New(at)}}
	}
	recs := []*hubv1.WatchResponse{
		rec("process.start", now),                      // this hour
		rec("process.start", now.Add(-10*time.Minute)), // this hour
		rec("process.exit", now),                       // not a start
		rec("process.start", now.Add(-2*time.Hour)),    // two hours back
		rec("process.start", now.Add(-25*time.Hour)),   // out of range
		rec("file.write", now.Add(-time.Hour)),         // not a command
	}
	p := commandsPerHour(recs, now, 24, false)
	var values []int
	for _, b := range p.Bars {
		values = append(values, b.Value)
	}
	want := make([]int, 24)
	want[23], want[21] = 2, 1
	if diff := cmp.Diff(values, want); diff != "" {
		t.Errorf("values (-got +want):\n%s", diff)
	}
	if p.Max != 2 || p.Empty {
		t.Errorf("max %d empty %v", p.Max, p.Empty)
	}
	// The tallest bar fills the plot's inner height; bars stay inside.
	inner := plotHeight - plotTop - plotBottom
	if b := p.Bars[23]; b.H != inner || b.Y != plotTop {
		t.Errorf("tallest bar at y %d height %d, want %d %d", b.Y, b.H, plotTop, inner)
	}
	for _, b := range p.Bars {
		if b.X < 0 || b.X+b.W > p.Width || b.Y+b.H != plotTop+inner {
			t.Errorf("bar %+v outside the plot", b)
		}
	}
	if commandsPerHour(nil, now, 24, false).Empty != true {
		t.Error("no records: want an empty plot")
	}
}

// TestCommandsPerHourCutShort: when the history read stopped at its limit
// inside the plot's window, the plot says which window it covers.
func TestCommandsPerHourCutShort(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 3, 1, 12, 30, 0, 0, time.UTC)
	recs := func(oldest time.Time) []*hubv1.WatchResponse {
		return []*hubv1.WatchResponse{
			{Record: &agentdv1.ActivityRecord{Kind: "process.start", Time: timestamppb.New(now)}},
			{Record: &agentdv1.ActivityRecord{Kind: "process.start", Time: timestamppb.New(oldest)}},
		}
	}
	for _, tt := range []struct {
		name   string
		oldest time.Time
		cut    bool
		want   string
	}{
		{"whole history", now.Add(-2 * time.Hour), false, ""},
		{"cut inside the window", now.Add(-2*time.Hour - 5*time.Minute), true, "Covers Mar 1 10:25 UTC to now only: the hub's newest 2 activity records; older commands are not counted."},
		{"cut before the window", now.Add(-30 * time.Hour), true, ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if got := commandsPerHour(recs(tt.oldest), now, 24, tt.cut).Note; got != tt.want {
				t.Errorf("note %q, want %q", got, tt.want)
			}
		})
	}
}
