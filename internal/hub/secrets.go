package hub

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"time"

	"github.com/devdepot-ai/agentd/internal/errs"
	"github.com/devdepot-ai/agentd/internal/rpcerr"
	"github.com/devdepot-ai/agentd/internal/wire"
	agentdv1 "github.com/devdepot-ai/agentd/proto/gen/agentd/v1"
)

// SecretResolver turns a secret reference ("team/openai", the part after
// "ref:") into its value, on the hub's host. Implementations never put the
// value in an error.
type SecretResolver interface {
	Resolve(ctx context.Context, ref string) ([]byte, error)
}

// ErrNoSecret is returned (wrapped) for a reference the provider does not
// have.
var ErrNoSecret = errors.New("no such secret")

var secretRefRE = regexp.MustCompile(`^[A-Za-z0-9_.-]+(/[A-Za-z0-9_.-]+)*$`)

// checkSecretRef refuses references that are not a relative path of plain
// names ("..", absolute paths, odd characters).
func checkSecretRef(ref string) error {
	if len(ref) > 256 || !secretRefRE.MatchString(ref) {
		return fmt.Errorf("secret reference %q: want names of letters, digits, '.', '_' and '-' joined by '/'", truncateRunes(ref, 80))
	}
	for part := range strings.SplitSeq(ref, "/") {
		if part == "." || part == ".." {
			return fmt.Errorf("secret reference %q: no '.' or '..'", truncateRunes(ref, 80))
		}
	}
	return nil
}

// DirSecrets resolves a reference to the content of the file of that path
// under Dir (less one trailing newline).
type DirSecrets struct{ Dir string }

// Resolve reads Dir/ref.
func (d DirSecrets) Resolve(_ context.Context, ref string) ([]byte, error) {
	if err := checkSecretRef(ref); err != nil {
		return nil, err
	}
	f, err := os.Open(filepath.Join(d.Dir, filepath.FromSlash(ref)))
	if errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("secret %s: %w in %s", ref, ErrNoSecret, d.Dir)
	}
	if err != nil {
		return nil, fmt.Errorf("secret %s: %w", ref, err)
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, wire.MaxSecretBytes+1))
	if err != nil {
		return nil, fmt.Errorf("secret %s: %w", ref, err)
	}
	return bytes.TrimSuffix(b, []byte("\n")), nil
}

// CommandSecrets resolves a reference by running Argv with the reference
// as its last argument and taking its stdout (less one trailing newline),
// like a credential helper: `pass show`, `vault kv get -field=value`, ….
type CommandSecrets struct {
	Argv []string
	// Timeout bounds one run. Default 10 s.
	Timeout time.Duration
}

// Resolve runs the command for ref.
func (c CommandSecrets) Resolve(ctx context.Context, ref string) ([]byte, error) {
	if err := checkSecretRef(ref); err != nil {
		return nil, err
	}
	if len(c.Argv) == 0 {
		return nil, errors.New("secret command: none given")
	}
	timeout := c.Timeout
	if timeout <= 0 {
		timeout = 10 * time.Second
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, c.Argv[0], append(c.Argv[1:len(c.Argv):len(c.Argv)], ref)...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		// Its stderr, not its stdout: a helper prints the value on stdout.
		msg := strings.TrimSpace(truncateRunes(stderr.String(), 200))
		return nil, fmt.Errorf("secret %s: %s failed: %w (%s)", ref, c.Argv[0], err, msg)
	}
	if stdout.Len() > wire.MaxSecretBytes {
		return nil, fmt.Errorf("secret %s: longer than %d bytes", ref, wire.MaxSecretBytes)
	}
	return bytes.TrimSuffix(stdout.Bytes(), []byte("\n")), nil
}

// resolveSecrets checks and resolves a run's secrets (NAME → "ref:PATH")
// before anything is made.
func (s *Server) resolveSecrets(ctx context.Context, refs map[string]string) (map[string][]byte, error) {
	if len(refs) == 0 {
		return nil, nil
	}
	if s.opts.Secrets == nil {
		return nil, errs.New(errs.Precondition,
			"this hub has no secret provider: start agenthub serve with --secret-dir DIR or --secret-command CMD")
	}
	if len(refs) > 32 {
		return nil, errs.New(errs.Invalid, "%d secrets: at most 32", len(refs))
	}
	out := make(map[string][]byte, len(refs))
	for name, v := range refs {
		ref, ok := strings.CutPrefix(v, "ref:")
		switch {
		case !wire.ValidSecretName(name):
			return nil, errs.New(errs.Invalid, "secret name %q: want a variable name (letters, digits, '_'), not AGENTD_* nor one that changes what programs run or load (LD_*, PATH, PYTHON*, NODE_*, the proxy variables …)", truncateRunes(name, 80))
		case !ok:
			// Never echo what was given: it may be the value itself.
			return nil, errs.New(errs.Invalid, "secret %s: give a reference, ref:PATH (e.g. ref:team/openai), never the value", name)
		}
		if err := checkSecretRef(ref); err != nil {
			return nil, errs.New(errs.Invalid, "secret %s: %v", name, err)
		}
		b, err := s.opts.Secrets.Resolve(ctx, ref)
		switch {
		case errors.Is(err, ErrNoSecret):
			return nil, errs.New(errs.NotFound, "secret %s: %v", name, err)
		case err != nil:
			return nil, errs.New(errs.Precondition, "secret %s: %v", name, err)
		case len(b) > wire.MaxSecretBytes || bytes.IndexByte(b, 0) >= 0:
			return nil, errs.New(errs.Precondition, "secret %s: the value is longer than %d bytes or holds a NUL byte", name, wire.MaxSecretBytes)
		}
		out[name] = b
	}
	return out, nil
}

// deliverSecrets writes the values into the sandbox's secrets directory
// through its tunnel (FileService.Write: atomic, mode 0600, on its tmpfs).
func (s *Server) deliverSecrets(ctx context.Context, sandboxID string, values map[string][]byte) error {
	cc, ok := s.fleet.Get(sandboxID)
	if !ok {
		return errs.New(errs.Unavailable, "sandbox %s went offline before its secrets were delivered", sandboxID)
	}
	files := agentdv1.NewFileServiceClient(cc)
	for name, v := range values {
		w, err := files.Write(ctx)
		if err != nil {
			return errs.New(errs.Unavailable, "deliver secret %s: %v", name, err)
		}
		header := &agentdv1.WriteRequest{Msg: &agentdv1.WriteRequest_Header{Header: &agentdv1.WriteHeader{
			Path: wire.SandboxSecretsDir + "/" + name, Mode: 0o600, CreateParents: true}}}
		chunk := &agentdv1.WriteRequest{Msg: &agentdv1.WriteRequest_Data{Data: v}}
		// A failed Send shows as CloseAndRecv's error, which says why.
		if w.Send(header) == nil {
			_ = w.Send(chunk)
		}
		if _, err := w.CloseAndRecv(); err != nil {
			return errs.New(errs.Unavailable, "deliver secret %s: %v", name, rpcerr.Message(err))
		}
	}
	return nil
}
