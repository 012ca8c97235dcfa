package ctl

import (
	"archive/tar"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/spf13/cobra"

	hubv1 "github.com/devdepot-ai/agentd/proto/gen/agentd/hub/v1"
	agentdv1 "github.com/devdepot-ai/agentd/proto/gen/agentd/v1"
)

// sandboxCreateCmd is agentctl sandbox create --env E --conversation C
// [--from FILE [--force]].
func (a *app) sandboxCreateCmd() *cobra.Command {
	var org, from string
	var force bool
	cmd := &cobra.Command{
		Use:   "create --env E --conversation C [--from FILE [--force]]",
		Short: "Create (or get) a conversation's sandbox, optionally starting its /workspace from a snapshot export",
		Long: `Create the sandbox of environment E (default: the org's default) for
conversation C, or get the one it has (resuming it if paused or stopped), wait
until it is online, and print its id alone on stdout.

With --from FILE, FILE (a snapshot export: 'agentctl snapshot export' on a
machine, or 'agentctl sandbox archive --export') is unpacked into its
/workspace: modes, symlinks and empty directories as the archive has them. A
new sandbox's /workspace becomes exactly the archive. An existing sandbox
whose /workspace holds files is refused, nothing touched, unless --force: then
its /workspace is replaced by the archive (files the archive lacks are
removed). FILE is read through before anything is made: one that is not a tar
archive, or is cut short, is refused and nothing changes.`,
		Example: `  agentctl sandbox create --env py --conversation chat-42
  agentctl --machine m-laptop snapshot create ~/proj    # on the laptop: s-…
  agentctl --machine m-laptop snapshot export s-… > proj.tar
  agentctl sandbox create --env py --conversation chat-42 --from proj.tar`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			conv := a.target.conv
			if strings.TrimSpace(conv) == "" {
				return usagef("sandbox create needs --conversation C: a sandbox serves one conversation")
			}
			if force && from == "" {
				return usagef("sandbox create --force goes with --from FILE")
			}
			var archive *os.File
			if from != "" {
				if from == "-" {
					return usagef("sandbox create --from: give a file (it is read through once to check it before anything is made)")
				}
				f, err := os.Open(from)
				if err != nil {
					return fmt.Errorf("--from: %w", err)
				}
				defer f.Close()
				if err := checkTar(f); err != nil {
					return fmt.Errorf("--from %s: %w; nothing was changed", from, err)
				}
				archive = f
			}
			var sb *hubv1.Sandbox
			var created bool
			err := a.envClient(cmd, func(ctx context.Context, ec hubv1.EnvironmentServiceClient) error {
				resp, err := ec.CreateSandbox(ctx, &hubv1.CreateSandboxRequest{Org: org, Environment: a.target.env, Conversation: conv})
				if err != nil {
					return err
				}
				sb, created = resp.GetSandbox(), resp.GetCreated()
				return nil
			})
			if err != nil {
				return err
			}
			if archive != nil {
				if err := a.importInto(cmd, sb.GetId(), archive, created || force); err != nil {
					if created {
						// The sandbox this command made goes with its failure
						// (an admin's token can; a member's leaves it empty).
						_ = a.envClient(cmd, func(ctx context.Context, ec hubv1.EnvironmentServiceClient) error {
							_, err := ec.RemoveSandbox(context.WithoutCancel(ctx), &hubv1.RemoveSandboxRequest{Id: sb.GetId(), Org: org})
							return err
						})
					}
					return err
				}
			}
			if a.json {
				return a.printJSON(sb)
			}
			fmt.Fprintln(a.io.Out, sb.GetId())
			return nil
		},
	}
	cmd.Flags().StringVar(&from, "from", "", "a snapshot export (tar) to unpack into the new sandbox's /workspace")
	cmd.Flags().BoolVar(&force, "force", false, "with --from: replace the /workspace of an existing sandbox that holds files")
	cmd.Flags().StringVar(&org, "org", "", "org (default: your token's)")
	return cmd
}

// importInto unpacks archive into sandbox id's workspace. Unless replace,
// a workspace that holds anything is refused first.
func (a *app) importInto(cmd *cobra.Command, id string, archive *os.File, replace bool) error {
	if _, err := archive.Seek(0, io.SeekStart); err != nil {
		return fmt.Errorf("--from: %w", err)
	}
	return a.sandboxCall(cmd, id, func(ctx context.Context, c *conn) error {
		if !replace {
			ls, err := agentdv1.NewFileServiceClient(c).List(ctx, &agentdv1.FileServiceListRequest{Path: "/workspace", Hidden: true, MaxEntries: 1})
			if err != nil {
				return err
			}
			if len(ls.GetEntries()) > 0 {
				return fmt.Errorf("sandbox %s has files in /workspace already; nothing was changed: --force replaces them with the archive (files it lacks are removed), or export them first with 'agentctl sandbox archive %s --export FILE'", id, id)
			}
		}
		snaps := agentdv1.NewSnapshotServiceClient(c)
		snap, err := snapImport(ctx, snaps, archive, &agentdv1.ImportHeader{Label: "sandbox create --from"})
		if err != nil {
			return err
		}
		defer func() {
			_, _ = snaps.Delete(context.WithoutCancel(ctx), &agentdv1.DeleteRequest{Id: snap.GetId()})
		}()
		_, err = a.snapRestore(ctx, snaps, &agentdv1.RestoreRequest{Id: snap.GetId(), DeleteExtra: true})
		return err
	})
}

// checkTar reads r through as a tar archive: not one, or cut short, is an
// error.
func checkTar(r io.Reader) error {
	tr := tar.NewReader(r)
	n := 0
	for {
		_, err := tr.Next()
		if errors.Is(err, io.EOF) {
			if n == 0 {
				// An empty file reads as an empty archive to archive/tar.
				if s, ok := r.(interface{ Stat() (os.FileInfo, error) }); ok {
					if fi, err := s.Stat(); err == nil && fi.Size() < 1024 {
						return errors.New("not a tar archive (a snapshot export): too short")
					}
				}
			}
			return nil
		}
		if err != nil {
			return fmt.Errorf("not a complete tar archive (a snapshot export): %w", err)
		}
		if _, err := io.Copy(io.Discard, tr); err != nil {
			return fmt.Errorf("not a complete tar archive (a snapshot export): %w", err)
		}
		n++
	}
}
