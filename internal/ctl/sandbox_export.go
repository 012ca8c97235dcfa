package ctl

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"
	"golang.org/x/term"

	agentdv1 "github.com/devdepot-ai/agentd/proto/gen/agentd/v1"
)

// The portable archive: a sandbox's /workspace as a snapshot export (the
// tar of agentd's SnapshotService.Export), made and read through the hub's
// routing to the sandbox (--machine sb-…), as any machine's snapshot is:
// what 'agentctl snapshot export' writes on a laptop, 'sandbox create
// --from' reads, and what 'sandbox archive --export' writes, 'snapshot
// import' reads.

// sandboxCall runs fn on a connection routed to sandbox id through the hub.
func (a *app) sandboxCall(cmd *cobra.Command, id string, fn func(ctx context.Context, c *conn) error) error {
	if a.target.hub == "" {
		return usagef("this command talks to the hub: give --hub URL (or set $AGENTD_HUB) and an API token in $AGENTD_TOKEN")
	}
	saved := a.target
	defer func() { a.target = saved }()
	a.target.addr, a.target.machine, a.target.env, a.target.conv = "", id, "", ""
	return a.call(cmd, fn)
}

// withExport gives sandbox archive (cmd) its --export FILE: the
// sandbox's /workspace written to FILE as a snapshot export, its state left
// alone, instead of archived into the hub's store.
func (a *app) withExport(cmd *cobra.Command) {
	var export string
	cmd.Use = "archive ID... [--org O] | archive ID --export FILE"
	cmd.Long += `

With --export FILE, the sandbox is not archived: its /workspace is written
to FILE ("-": stdout) as a snapshot export, the tar archive 'agentctl
snapshot export' writes, which 'agentctl snapshot import' reads on any
agentd (a laptop paired with the hub, another sandbox) and 'agentctl sandbox
create --from' starts a sandbox from. Modes, symlinks and empty directories
are kept. The sandbox's state is left alone, as docker export does: a paused
or stopped sandbox is brought back for the copy as any call for it is. FILE
appears only once complete (a failure leaves no half file); a progress bar
goes to stderr when it is a terminal. The snapshot made in the sandbox for
the export is deleted afterwards.`
	cmd.Example += `
  agentctl sandbox archive sb-1a2b3c --export work.tar
  agentctl --addr unix:///run/agentd.sock snapshot import work.tar --root ~/work   # on the laptop…
  agentctl snapshot restore s-…                                                   # …then restore it`
	args, run := cmd.Args, cmd.RunE
	cmd.Args = func(c *cobra.Command, ids []string) error {
		if export != "" && (len(ids) != 1 || strings.TrimSpace(ids[0]) == "") {
			return usagef("sandbox archive --export needs one sandbox id (sb-…); list them with 'agentctl sandbox ls'")
		}
		return args(c, ids)
	}
	cmd.RunE = func(c *cobra.Command, ids []string) error {
		if export != "" {
			return a.exportSandbox(c, ids[0], export)
		}
		return run(c, ids)
	}
	cmd.Flags().StringVar(&export, "export", "", `write the /workspace to FILE as a snapshot export ("-": stdout) instead of archiving it`)
}

// exportSandbox snapshots sandbox id's workspace, exports the snapshot to
// path (a temporary file renamed into place; "-": stdout) and deletes the
// snapshot.
func (a *app) exportSandbox(cmd *cobra.Command, id, path string) error {
	out := a.io.Out
	var file *os.File
	if path != "-" {
		f, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*")
		if err != nil {
			return fmt.Errorf("--export: %w", err)
		}
		defer os.Remove(f.Name()) // after the rename, a no-op
		defer f.Close()
		file, out = f, f
	} else if f, ok := out.(*os.File); ok && term.IsTerminal(int(f.Fd())) {
		return usagef("refusing to write a tar archive to a terminal: redirect stdout or give --export FILE")
	}
	err := a.sandboxCall(cmd, id, func(ctx context.Context, c *conn) error {
		snaps := agentdv1.NewSnapshotServiceClient(c)
		snap, err := a.snapCreate(ctx, snaps, &agentdv1.CreateRequest{Label: "sandbox archive --export"})
		if err != nil {
			return err
		}
		defer func() {
			// The export's own snapshot: not kept in the sandbox's store.
			_, _ = snaps.Delete(context.WithoutCancel(ctx), &agentdv1.DeleteRequest{Id: snap.GetId()})
		}()
		return snapExport(ctx, snaps, snap.GetId(), out)
	})
	if err != nil || file == nil {
		return err
	}
	if err := file.Sync(); err != nil {
		return fmt.Errorf("write the archive: %w", err)
	}
	if err := file.Close(); err != nil {
		return fmt.Errorf("write the archive: %w", err)
	}
	return os.Rename(file.Name(), path)
}
