package agentd

import (
	"context"

	agentdv1 "github.com/devdepot-ai/agentd/proto/gen/agentd/v1"
)

// pythonService serves agentdv1.PythonService. (stub: being implemented)
type pythonService struct {
	agentdv1.UnimplementedPythonServiceServer
}

func newPythonService(ctx context.Context, s *Server) (*pythonService, error) {
	return &pythonService{}, nil
}

// Close ends every session's interpreter.
func (p *pythonService) Close(ctx context.Context) error { return nil }
