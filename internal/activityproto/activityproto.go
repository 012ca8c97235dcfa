// Package activityproto turns the activity records the daemon and the hub
// send over gRPC back into the daemon's own activity.Record, and renders
// them as one line for a person. It is the one conversion shared by the CLI
// (agentctl activity) and `agenthub demo`, kept apart from internal/ctl so
// that the hub binary can render activity without linking the CLI, and apart
// from internal/activity, which knows nothing of the generated types.
package activityproto

import (
	"github.com/devdepot-ai/agentd/internal/activity"
	"github.com/devdepot-ai/agentd/internal/wire"
	hubv1 "github.com/devdepot-ai/agentd/proto/gen/agentd/hub/v1"
	agentdv1 "github.com/devdepot-ai/agentd/proto/gen/agentd/v1"
)

// Line renders a record the hub's ActivityService sent, with the machine
// it happened on (its name, or its id when it has none).
func Line(m *hubv1.WatchResponse) string {
	name := m.GetMachineName()
	if name == "" {
		name = m.GetMachineId()
	}
	r := Record(m.GetRecord())
	switch {
	case m.GetSource() == wire.SourceDaemon:
		// What the machine says it did: no actor the hub vouches for
		// (its claim follows), and labelled as its account.
		r.Actor = "reported by the daemon"
	}
	return r.LineOn(name)
}

// Record is the activity record a daemon or the hub sent, as the daemon's
// log holds it. A nil p gives the zero record.
func Record(p *agentdv1.ActivityRecord) activity.Record {
	r := activity.Record{
		Seq: p.GetSeq(), Actor: p.GetActor(), ClaimedActor: p.GetClaimedActor(), Client: p.GetClient(), Conversation: p.GetConversation(),
		Kind: p.GetKind(), Summary: p.GetSummary(), Command: p.GetCommand(), Cwd: p.GetCwd(), Path: p.GetPath(),
		Bytes: p.GetBytes(), Output: p.GetOutput(), Error: p.GetError(), ExitCode: int(p.GetExitCode()),
		Duration: p.GetDuration().AsDuration(), ObjectID: p.GetObjectId(),
	}
	if p.GetTime() != nil {
		r.Time = p.GetTime().AsTime()
	}
	switch p.GetOutcome() {
	case agentdv1.Outcome_OUTCOME_STARTED:
		r.Outcome = activity.Started
	case agentdv1.Outcome_OUTCOME_OK:
		r.Outcome = activity.OK
	case agentdv1.Outcome_OUTCOME_ERROR:
		r.Outcome = activity.Failed
	}
	return r
}
