package hub_test

import (
	"context"
	"errors"
	"io"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	agentdv1 "github.com/devdepot-ai/agentd/proto/gen/agentd/v1"
)

// TestSandboxLookupCache checks, in a real sandbox, that the agentd's
// remembered PATH lookups (on the read-only root) never hide a program
// that appears later in a directory of another mount: a name not found
// is found once it is written to the workspace, and a program of the
// workspace that shadows one of the image is the one run.
func TestSandboxLookupCache(t *testing.T) {
	h := startSandboxHub(t, nil)
	ctx := h.ctx("builtin", "lookup")
	path := map[string]string{"PATH": "/workspace/bin:/usr/local/bin:/usr/bin:/bin"}
	type step struct {
		name string
		argv []string
		want string // stdout, or the status code of the call's error
	}
	for _, s := range []step{
		{"image's true", []string{"true"}, ""},
		{"unknown name", []string{"lookup-tool"}, codes.NotFound.String()},
		{"write the tool and a true", []string{"sh", "-c",
			"mkdir -p /workspace/bin && printf '#!/bin/sh\\necho %s\\n' tool > /workspace/bin/lookup-tool && " +
				"printf '#!/bin/sh\\necho %s\\n' shadow > /workspace/bin/true && chmod +x /workspace/bin/*"}, ""},
		{"the tool, found now", []string{"lookup-tool"}, "tool\n"},
		{"true, shadowed now", []string{"true"}, "shadow\n"},
		{"the image's true by path", []string{"/usr/bin/true"}, ""},
	} {
		got := runEnv(ctx, t, h, s.argv, path)
		if diff := cmp.Diff(got, s.want); diff != "" {
			t.Errorf("%s: %v (-got +want):\n%s", s.name, s.argv, diff)
		}
	}
}

// runEnv runs argv with env in ctx's sandbox: its stdout, or the status
// code of the call's error; a non-zero exit fails the test.
func runEnv(ctx context.Context, t *testing.T, h *sandboxHub, argv []string, env map[string]string) string {
	t.Helper()
	st, err := agentdv1.NewProcessServiceClient(h.cc).Start(ctx, &agentdv1.StartRequest{Argv: argv, Env: env})
	if err != nil {
		return status.Code(err).String()
	}
	var out strings.Builder
	for {
		r, err := st.Recv()
		switch {
		case errors.Is(err, io.EOF):
			t.Fatalf("%v: no exit event", argv)
		case err != nil:
			return status.Code(err).String()
		}
		if o := r.GetEvent().GetOutput(); o != nil {
			out.Write(o.GetData())
		}
		if x := r.GetEvent().GetExited(); x != nil {
			if x.GetExitCode() != 0 {
				t.Fatalf("%v: exit %d: %s", argv, x.GetExitCode(), out.String())
			}
			return out.String()
		}
	}
}
