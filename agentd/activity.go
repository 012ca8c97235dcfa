package agentd

import (
	"context"
	"strings"

	"google.golang.org/grpc/metadata"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/devdepot-ai/agentd/internal/activity"
	"github.com/devdepot-ai/agentd/internal/wire"
	agentdv1 "github.com/devdepot-ai/agentd/proto/gen/agentd/v1"
)

// record adds an activity record for an operation done for the caller in
// ctx: who asked comes from its connection (see actorOf), the
// conversation and the client program (unchecked, like a claim) from the
// call's metadata.
func (s *Server) record(ctx context.Context, r activity.Record) activity.Record {
	md, _ := metadata.FromIncomingContext(ctx)
	r.Actor, r.ClaimedActor = actorOf(ctx, firstMD(md, wire.MDActor))
	r.Client = cleanClaim(firstMD(md, wire.MDClient))
	r.Conversation = firstMD(md, wire.MDConversation)
	return s.activity.Add(r)
}

func firstMD(md metadata.MD, key string) string {
	if v := md.Get(key); len(v) > 0 {
		return strings.ToValidUTF8(v[0], "?")
	}
	return ""
}

// activityService serves agentdv1.ActivityService.
type activityService struct {
	agentdv1.UnimplementedActivityServiceServer
	log *activity.Log
}

var _ agentdv1.ActivityServiceServer = (*activityService)(nil)

// Watch replays retained records after since_seq and follows new ones.
func (a *activityService) Watch(req *agentdv1.WatchRequest, stream agentdv1.ActivityService_WatchServer) error {
	since := req.GetSinceSeq()
	if req.Tail != nil {
		since = max(since, a.log.SeqBefore(uint64(req.GetTail())))
	}
	err := a.log.Watch(stream.Context(), since, !req.GetNoFollow(), func(r activity.Record) error {
		return stream.Send(&agentdv1.WatchResponse{Record: recordToProto(r)})
	})
	if err != nil && stream.Context().Err() != nil {
		return nil // the watcher went away
	}
	return err
}

func recordToProto(r activity.Record) *agentdv1.ActivityRecord {
	p := &agentdv1.ActivityRecord{
		Seq:          r.Seq,
		Time:         timestamppb.New(r.Time),
		Actor:        r.Actor,
		ClaimedActor: r.ClaimedActor,
		Client:       r.Client,
		Conversation: r.Conversation,
		Kind:         r.Kind,
		Summary:      strings.ToValidUTF8(r.Summary, "\uFFFD"),
		Command:      strings.ToValidUTF8(r.Command, "\uFFFD"),
		Cwd:          strings.ToValidUTF8(r.Cwd, "\uFFFD"),
		Path:         strings.ToValidUTF8(r.Path, "\uFFFD"),
		Bytes:        r.Bytes,
		Output:       r.Output,
		Error:        strings.ToValidUTF8(r.Error, "\uFFFD"),
		ExitCode:     int32(r.ExitCode),
		ObjectId:     r.ObjectID,
	}
	if r.Duration > 0 {
		p.Duration = durationpb.New(r.Duration)
	}
	switch r.Outcome {
	case activity.Started:
		p.Outcome = agentdv1.Outcome_OUTCOME_STARTED
	case activity.OK:
		p.Outcome = agentdv1.Outcome_OUTCOME_OK
	case activity.Failed:
		p.Outcome = agentdv1.Outcome_OUTCOME_ERROR
	}
	return p
}
