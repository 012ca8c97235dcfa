package agentd

import (
	"context"

	agentdv1 "github.com/devdepot-ai/agentd/proto/gen/agentd/v1"
)

// processService serves agentdv1.ProcessService. (stub: being implemented)
type processService struct {
	agentdv1.UnimplementedProcessServiceServer
}

func newProcessService(ctx context.Context, s *Server) (*processService, error) {
	return &processService{}, nil
}

// Close stops every running process: SIGTERM, grace, SIGKILL.
func (p *processService) Close(ctx context.Context) error { return nil }
