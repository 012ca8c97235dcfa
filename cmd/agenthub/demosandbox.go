package main

import (
	"context"
	"fmt"
	"path/filepath"
	"time"

	"go.uber.org/zap"
	"google.golang.org/grpc/metadata"

	"github.com/devdepot-ai/agentd/internal/hub/sandboxes"
	"github.com/devdepot-ai/agentd/internal/sandbox"
	"github.com/devdepot-ai/agentd/internal/wire"
	hubv1 "github.com/devdepot-ai/agentd/proto/gen/agentd/hub/v1"
)

// demoConversation is the conversation of the demo's sandbox half.
const demoConversation = "demo-chat"

// demoSandboxes returns the demo hub's sandbox options: the built-in
// environment with network none (the demo installs no egress rules or
// network on the host), no warm pool, workspaces bounded at 1 GiB where
// they can be, all under dir. When sandboxes cannot run here it returns a
// zero Options and one line saying what the sandbox half needs.
func demoSandboxes(ctx context.Context, dir, agentd string) (sandboxes.Options, func(), string) {
	none := func() {}
	f := sandboxFlags{
		mode: "auto", agentd: agentd, dir: filepath.Join(dir, "sandboxes"), noNetwork: true,
		wsMax:  "1GiB",
		orgMax: sandboxes.DefaultOrgMaxSandboxes, tokenMax: sandboxes.DefaultTokenMaxSandboxes,
	}
	if canBoundWorkspaces(dockerHostName("")) != nil {
		// Not root, or a remote engine: the demo's few files go on the
		// engine's disk, and its sandboxes are removed when it ends.
		f.wsMax = "0"
	}
	// auto: no engine answering is a zero Options (no driver), not an error.
	// The store's path: archives go beside it, in the demo's directory.
	o, closeFn, err := f.options(ctx, filepath.Join(dir, "hub.db"), zap.NewNop())
	switch {
	case err != nil:
		return sandboxes.Options{}, none, "the sandbox half could not start: " + err.Error()
	case o.Driver == nil:
		return sandboxes.Options{}, none, "the sandbox half needs a Docker engine ($DOCKER_HOST or the local socket), and none answers here"
	}
	if _, err := o.Driver.Image(ctx, sandbox.BaseImage); err != nil {
		closeFn()
		return sandboxes.Options{}, none, fmt.Sprintf("the sandbox half needs the built-in image %s on this engine: 'make sandbox-base' builds it (root, debootstrap, a few minutes)", sandbox.BaseImage)
	}
	return o, closeFn, ""
}

// removeDemoSandboxes removes every sandbox of the demo's org, so that no
// container, volume or loop device outlives the demo. It runs on the way
// out, after Ctrl-C too, with a time limit of its own.
func removeDemoSandboxes(ctx context.Context, hubURL, token string) error {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
	defer cancel()
	cc, err := hubConn(hubURL)
	if err != nil {
		return err
	}
	defer cc.Close()
	ctx = metadata.AppendToOutgoingContext(ctx, wire.MDAuthorization, wire.BearerPrefix+token)
	ec := hubv1.NewEnvironmentServiceClient(cc)
	resp, err := ec.ListSandboxes(ctx, &hubv1.ListSandboxesRequest{})
	if err != nil {
		return fmt.Errorf("list the demo's sandboxes: %w", err)
	}
	for _, sb := range resp.GetSandboxes() {
		if _, err := ec.RemoveSandbox(ctx, &hubv1.RemoveSandboxRequest{Id: sb.GetId()}); err != nil {
			return fmt.Errorf("remove the demo's sandbox %s: %w", sb.GetId(), err)
		}
	}
	return nil
}
