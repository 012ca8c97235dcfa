package agentd

import (
	"context"

	agentdv1 "github.com/devdepot-ai/agentd/proto/gen/agentd/v1"
)

// snapshotService serves agentdv1.SnapshotService. (stub: being implemented)
type snapshotService struct {
	agentdv1.UnimplementedSnapshotServiceServer
}

func newSnapshotService(ctx context.Context, s *Server) (*snapshotService, error) {
	return &snapshotService{}, nil
}
