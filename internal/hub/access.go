package hub

import (
	"context"
	"errors"

	"github.com/devdepot-ai/agentd/internal/errs"
	"github.com/devdepot-ai/agentd/internal/hub/store"
)

// sandboxAccess decides whether c may call the org's sandbox id (route
// found it in c's org). A sandbox that holds an agent run's resolved
// secrets is for admins and the token that started the run: anyone else
// who can run a command in it can print them (echo $OPENAI_API_KEY, or the
// secrets directory). What decides it is stored with the sandbox, so the
// rule holds after a restart and on every replica.
func (s *Server) sandboxAccess(ctx context.Context, c *caller, id string) error {
	if !isSandboxID(id) || c.token.Role == store.RoleAdmin {
		return nil
	}
	sb, err := s.store.Sandbox(ctx, id)
	switch {
	case errors.Is(err, store.ErrNotFound):
		// Its record is gone (removed): nothing says what it holds.
		return errs.New(errs.NotFound, "sandbox %s not found in org %s; list them with 'agentctl sandbox ls'", id, c.org.Name)
	case err != nil:
		return errs.New(errs.Unavailable, "sandbox lookup: %v", err)
	}
	if !sb.HoldsSecrets || (sb.Token != "" && sb.Token == c.token.ID) {
		return nil
	}
	return errs.New(errs.Permission,
		"sandbox %s holds secrets of an agent run started by another token; only admins or the starting token may call it", id)
}
