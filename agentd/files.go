package agentd

import (
	"context"

	agentdv1 "github.com/devdepot-ai/agentd/proto/gen/agentd/v1"
)

// fileService serves agentdv1.FileService. (stub: being implemented)
type fileService struct {
	agentdv1.UnimplementedFileServiceServer
}

func newFileService(ctx context.Context, s *Server) (*fileService, error) {
	return &fileService{}, nil
}
