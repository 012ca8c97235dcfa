package ctl

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	"golang.org/x/term"
	"google.golang.org/grpc"

	"github.com/devdepot-ai/agentd/internal/units"
	"github.com/devdepot-ai/agentd/internal/wire"
	agentdv1 "github.com/devdepot-ai/agentd/proto/gen/agentd/v1"
)

// snapMaxRecv lets Get and Diff answers of large trees through (a
// manifest of 100,000 paths is some 15 MB; gRPC's default limit is 4 MB).
var snapMaxRecv = grpc.MaxCallRecvMsgSize(1 << 30)

// snapChunk is how many archive bytes one Import message carries.
const snapChunk = wire.ChunkSize

func (a *app) snapshotCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:     "snapshot",
		Aliases: []string{"snap"},
		Short:   "Checkpoint a directory tree and roll it back: create, list, diff, restore, export, import, rm",
		Long: `Snapshots are point-in-time copies of a directory tree kept by the daemon (in its
state directory): content-addressed, compressed and deduplicated, so a snapshot
of a tree that hardly changed costs almost nothing, and files that did not
change are not even read. Modes, symlinks (as links) and empty directories are
kept; sockets, devices and unreadable files are skipped and reported.

Paths are absolute or relative to the daemon's workspace (default ROOT: the
workspace itself).`,
		Example: `  id=$(agentctl snapshot create src --label 'before refactor' --exclude node_modules)
  agentctl snapshot diff "$id"                 # what changed since, in the live tree
  agentctl snapshot restore "$id" --delete-extra
  agentctl snapshot export "$id" > src.tar
  agentctl snapshot import src.tar --root /tmp/src-copy
  agentctl snapshot rm "$id"`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return cmd.Help() },
	}
	cmd.AddCommand(a.snapCreateCmd(), a.snapListCmd(), a.snapShowCmd(), a.snapDiffCmd(), a.snapRestoreCmd(),
		a.snapExportCmd(), a.snapImportCmd(), a.snapRmCmd())
	return cmd
}

func (a *app) snapCreateCmd() *cobra.Command {
	var label string
	var excludes []string
	cmd := &cobra.Command{
		Use:   "create [ROOT]",
		Short: "Snapshot a directory tree and print the new snapshot's id",
		Long: `Snapshot the tree at ROOT (default: the daemon's workspace) and print the new
snapshot's id alone on stdout. A progress bar goes to stderr when it is a
terminal; paths that were skipped are counted on stderr.

--exclude takes a glob: without a slash it matches a name at any depth
("node_modules", "*.o"); with one, a path from ROOT ("build/out", "**/*.tmp");
a trailing slash matches directories only. An excluded directory is left out
with everything below it, and restore --delete-extra leaves it alone.`,
		Example: `  agentctl snapshot create
  agentctl snapshot create ~/proj --label 'green tests' --exclude node_modules --exclude '*.log'`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			req := &agentdv1.CreateRequest{Label: label, Excludes: excludes}
			if len(args) == 1 {
				req.Root = args[0]
			}
			return a.call(cmd, func(ctx context.Context, c *conn) error {
				snap, err := a.snapCreate(ctx, agentdv1.NewSnapshotServiceClient(c), req)
				if err != nil {
					return err
				}
				if a.json {
					return a.printJSON(snap)
				}
				fmt.Fprintln(a.io.Out, snap.GetId())
				if n := len(snap.GetSkipped()); n > 0 {
					fmt.Fprintf(a.io.Err, "skipped %s (sockets, devices, unreadable): agentctl snapshot show %s\n", snapPlural(n, "path"), snap.GetId())
				}
				return nil
			})
		},
	}
	cmd.Flags().StringVar(&label, "label", "", "free text to recognise the snapshot by")
	cmd.Flags().StringArrayVar(&excludes, "exclude", nil, "glob of paths to leave out (repeatable)")
	return cmd
}

func (a *app) snapListCmd() *cobra.Command {
	return &cobra.Command{
		Use:     "list",
		Aliases: []string{"ls"},
		Short:   "List the snapshots, oldest first",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return a.call(cmd, func(ctx context.Context, c *conn) error {
				resp, err := agentdv1.NewSnapshotServiceClient(c).List(ctx, &agentdv1.SnapshotServiceListRequest{})
				if err != nil {
					return err
				}
				if a.json {
					return a.printJSON(resp)
				}
				tw := tabwriter.NewWriter(a.io.Out, 0, 4, 2, ' ', 0)
				fmt.Fprintln(tw, "ID\tCREATED\tFILES\tSIZE\tSTORED\tROOT\tLABEL")
				for _, s := range resp.GetSnapshots() {
					fmt.Fprintf(tw, "%s\t%s\t%d\t%s\t%s\t%s\t%s\n", s.GetId(),
						s.GetCreated().AsTime().Local().Format("2006-01-02 15:04:05"), s.GetFiles(),
						units.Bytes(s.GetTotalBytes()), units.Bytes(s.GetStoredBytes()), s.GetRoot(), s.GetLabel())
				}
				return tw.Flush()
			})
		},
	}
}

func (a *app) snapShowCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "show ID",
		Short: "Describe a snapshot and list every path in it",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return a.call(cmd, func(ctx context.Context, c *conn) error {
				resp, err := agentdv1.NewSnapshotServiceClient(c).Get(ctx, &agentdv1.GetRequest{Id: args[0]}, snapMaxRecv)
				if err != nil {
					return err
				}
				if a.json {
					return a.printJSON(resp)
				}
				s := resp.GetSnapshot()
				tw := tabwriter.NewWriter(a.io.Out, 0, 4, 1, ' ', 0)
				fmt.Fprintf(tw, "id:\t%s\n", s.GetId())
				if s.GetLabel() != "" {
					fmt.Fprintf(tw, "label:\t%s\n", s.GetLabel())
				}
				fmt.Fprintf(tw, "root:\t%s\n", s.GetRoot())
				fmt.Fprintf(tw, "created:\t%s\n", s.GetCreated().AsTime().Local().Format(time.RFC3339))
				fmt.Fprintf(tw, "contents:\t%s, %s, %s, %s\n", snapPlural(int(s.GetFiles()), "file"), snapPlural(int(s.GetDirectories()), "directory"),
					snapPlural(int(s.GetSymlinks()), "symlink"), units.Bytes(s.GetTotalBytes()))
				fmt.Fprintf(tw, "stored:\t%s new in the store\n", units.Bytes(s.GetStoredBytes()))
				for _, sk := range s.GetSkipped() {
					fmt.Fprintf(tw, "skipped:\t%s\n", sk)
				}
				if err := tw.Flush(); err != nil {
					return err
				}
				fmt.Fprintln(a.io.Out)
				tw = tabwriter.NewWriter(a.io.Out, 0, 4, 1, ' ', tabwriter.AlignRight)
				for _, e := range resp.GetEntries() {
					name := e.GetPath()
					switch e.GetType() {
					case agentdv1.FileType_FILE_TYPE_DIRECTORY:
						name += "/"
					case agentdv1.FileType_FILE_TYPE_SYMLINK:
						name += " -> " + e.GetSymlinkTarget()
					}
					fmt.Fprintf(tw, "%s\t%d\t %s\t %s\n", snapModeString(e), e.GetSize(), e.GetModified().AsTime().Local().Format("2006-01-02 15:04"), name)
				}
				return tw.Flush()
			})
		},
	}
}

func (a *app) snapDiffCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "diff A [B]",
		Short: "Show what changed between two snapshots, or since one in the live tree",
		Long: `Print one line per path that differs between snapshot A and snapshot B, or,
without B, between A and the tree at A's root as it is now:

  A path   added          D path   removed
  M path   modified (content, mode or link target)
  T path   changed type (a file became a directory, ...)

A different modification time alone is no change.`,
		Example: `  agentctl snapshot diff s-20260817-153012-9f3a1c2e
  agentctl snapshot diff "$before" "$after"`,
		Args: cobra.RangeArgs(1, 2),
		RunE: func(cmd *cobra.Command, args []string) error {
			req := &agentdv1.DiffRequest{FromId: args[0]}
			if len(args) == 2 {
				req.ToId = args[1]
			}
			return a.call(cmd, func(ctx context.Context, c *conn) error {
				resp, err := agentdv1.NewSnapshotServiceClient(c).Diff(ctx, req, snapMaxRecv)
				if err != nil {
					return err
				}
				if a.json {
					return a.printJSON(resp)
				}
				for _, ch := range resp.GetChanges() {
					fmt.Fprintln(a.io.Out, snapChangeLine(ch))
				}
				return nil
			})
		},
	}
}

// snapChangeLine renders a change like git diff --name-status, with the
// detail of a change that is not one of content.
func snapChangeLine(ch *agentdv1.DiffEntry) string {
	from, to := ch.GetFrom(), ch.GetTo()
	switch ch.GetKind() {
	case agentdv1.ChangeKind_CHANGE_KIND_ADDED:
		return "A " + ch.GetPath()
	case agentdv1.ChangeKind_CHANGE_KIND_REMOVED:
		return "D " + ch.GetPath()
	case agentdv1.ChangeKind_CHANGE_KIND_TYPE_CHANGED:
		return fmt.Sprintf("T %s (%s -> %s)", ch.GetPath(), snapTypeName(from.GetType()), snapTypeName(to.GetType()))
	}
	line := "M " + ch.GetPath()
	switch {
	case from.GetType() == agentdv1.FileType_FILE_TYPE_SYMLINK:
		line += fmt.Sprintf(" (-> %s, was -> %s)", to.GetSymlinkTarget(), from.GetSymlinkTarget())
	case from.GetSha256() == to.GetSha256() && from.GetMode() != to.GetMode():
		line += fmt.Sprintf(" (mode %04o -> %04o)", from.GetMode(), to.GetMode())
	}
	return line
}

func snapTypeName(t agentdv1.FileType) string {
	return strings.ToLower(strings.TrimPrefix(t.String(), "FILE_TYPE_"))
}

func (a *app) snapRestoreCmd() *cobra.Command {
	var deleteExtra bool
	cmd := &cobra.Command{
		Use:   "restore ID [TARGET]",
		Short: "Write a snapshot back, to its root or to TARGET",
		Long: `Write snapshot ID back into TARGET (default: the directory it was taken of).
Each file is replaced atomically; files already identical are left alone.
Paths the snapshot does not have stay, unless --delete-extra is given (paths
the snapshot excluded or skipped stay even then).

Prints what was done; a progress bar goes to stderr when it is a terminal.`,
		Example: `  agentctl snapshot restore s-20260817-153012-9f3a1c2e --delete-extra
  agentctl snapshot restore s-20260817-153012-9f3a1c2e /tmp/inspect`,
		Args: cobra.RangeArgs(1, 2),
		RunE: func(cmd *cobra.Command, args []string) error {
			req := &agentdv1.RestoreRequest{Id: args[0], DeleteExtra: deleteExtra}
			if len(args) == 2 {
				req.Target = args[1]
			}
			return a.call(cmd, func(ctx context.Context, c *conn) error {
				sum, err := a.snapRestore(ctx, agentdv1.NewSnapshotServiceClient(c), req)
				if err != nil {
					return err
				}
				if a.json {
					return a.printJSON(sum)
				}
				line := fmt.Sprintf("restored %s into %s: %s written, %d unchanged", args[0], sum.GetTarget(),
					snapPlural(int(sum.GetFilesWritten()), "file"), sum.GetFilesUnchanged())
				if deleteExtra {
					line += fmt.Sprintf(", %s removed", snapPlural(int(sum.GetPathsRemoved()), "path"))
				}
				fmt.Fprintln(a.io.Out, line)
				return nil
			})
		},
	}
	cmd.Flags().BoolVar(&deleteExtra, "delete-extra", false, "remove paths in the target that the snapshot does not have")
	return cmd
}

func (a *app) snapExportCmd() *cobra.Command {
	var output string
	cmd := &cobra.Command{
		Use:   "export ID > FILE.tar",
		Short: "Write a snapshot as a tar archive to stdout (or -o FILE)",
		Example: `  agentctl snapshot export s-20260817-153012-9f3a1c2e > src.tar
  agentctl snapshot export s-20260817-153012-9f3a1c2e | tar -tv`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			out := a.io.Out
			var file *os.File
			if output != "" && output != "-" {
				f, err := os.CreateTemp(filepath.Dir(output), "."+filepath.Base(output)+".*")
				if err != nil {
					return fmt.Errorf("-o: %w", err)
				}
				defer os.Remove(f.Name()) // after a successful rename, a no-op
				defer f.Close()
				file, out = f, f
			} else if f, ok := out.(*os.File); ok && term.IsTerminal(int(f.Fd())) {
				return usagef("refusing to write a tar archive to a terminal: redirect stdout (agentctl snapshot export %s > snapshot.tar) or use -o FILE", args[0])
			}
			err := a.call(cmd, func(ctx context.Context, c *conn) error {
				return snapExport(ctx, agentdv1.NewSnapshotServiceClient(c), args[0], out)
			})
			if err != nil || file == nil {
				return err
			}
			if err := file.Close(); err != nil {
				return err
			}
			return os.Rename(file.Name(), output)
		},
	}
	cmd.Flags().StringVarP(&output, "output", "o", "", "write the archive to FILE instead of stdout (replaced only once complete)")
	return cmd
}

func (a *app) snapImportCmd() *cobra.Command {
	var label, root string
	cmd := &cobra.Command{
		Use:   "import [FILE.tar]",
		Short: "Store a tar archive (FILE or stdin) as a new snapshot and print its id",
		Long: `Store an uncompressed tar archive as a new snapshot and print its id alone on
stdout. The archive is read from FILE, or from stdin when FILE is absent or "-".

--root is the directory restore writes the snapshot to by default (default:
the daemon's workspace). Archives with absolute paths, "..", or links that
point outside the archive are refused, and then nothing is stored.`,
		Example: `  agentctl snapshot import src.tar --root /tmp/src --label 'from the chat'
  curl -s https://example.com/site.tar | agentctl snapshot import --root site`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			in := a.io.In
			if len(args) == 1 && args[0] != "-" {
				f, err := os.Open(args[0])
				if err != nil {
					return err
				}
				defer f.Close()
				in = f
			} else if f, ok := a.stdinFile(); ok && term.IsTerminal(int(f.Fd())) {
				return usagef("import reads a tar archive from stdin, which is a terminal: give FILE.tar or redirect stdin")
			}
			return a.call(cmd, func(ctx context.Context, c *conn) error {
				snap, err := snapImport(ctx, agentdv1.NewSnapshotServiceClient(c), in, &agentdv1.ImportHeader{Label: label, Root: root})
				if err != nil {
					return err
				}
				if a.json {
					return a.printJSON(snap)
				}
				fmt.Fprintln(a.io.Out, snap.GetId())
				return nil
			})
		},
	}
	cmd.Flags().StringVar(&label, "label", "", "free text to recognise the snapshot by")
	cmd.Flags().StringVar(&root, "root", "", "directory restore writes to by default (default: the workspace)")
	return cmd
}

func (a *app) snapRmCmd() *cobra.Command {
	return &cobra.Command{
		Use:     "rm ID...",
		Aliases: []string{"delete"},
		Short:   "Delete snapshots and free the space only they used",
		Args:    cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return a.call(cmd, func(ctx context.Context, c *conn) error {
				client := agentdv1.NewSnapshotServiceClient(c)
				for _, id := range args {
					resp, err := client.Delete(ctx, &agentdv1.DeleteRequest{Id: id})
					if err != nil {
						return err
					}
					if a.json {
						if err := a.printJSON(resp); err != nil {
							return err
						}
						continue
					}
					fmt.Fprintf(a.io.Out, "deleted %s, freed %s\n", id, units.Bytes(resp.GetFreedBytes()))
				}
				return nil
			})
		},
	}
}

// snapBar draws progress on stderr when it is a terminal (and output is
// not JSON); otherwise it draws nothing.
type snapBar struct {
	w     io.Writer // nil: no bar
	verb  string
	drawn bool
}

func (a *app) snapProgressBar(verb string) *snapBar {
	b := &snapBar{verb: verb}
	if f, ok := a.io.Err.(*os.File); ok && !a.json && term.IsTerminal(int(f.Fd())) {
		b.w = f
	}
	return b
}

func (b *snapBar) update(p *agentdv1.Progress) {
	if b.w == nil || p.GetFilesTotal() == 0 && p.GetBytesTotal() == 0 {
		return
	}
	frac := 1.0
	if p.GetBytesTotal() > 0 {
		frac = float64(p.GetBytesDone()) / float64(p.GetBytesTotal())
	} else if p.GetFilesTotal() > 0 {
		frac = float64(p.GetFilesDone()) / float64(p.GetFilesTotal())
	}
	frac = min(max(frac, 0), 1)
	const width = 24
	fill := int(frac * width)
	fmt.Fprintf(b.w, "\r\033[K%s %3.0f%% [%s%s] %d/%d files  %s/%s", b.verb, frac*100,
		strings.Repeat("=", fill), strings.Repeat(" ", width-fill),
		p.GetFilesDone(), p.GetFilesTotal(), units.Bytes(p.GetBytesDone()), units.Bytes(p.GetBytesTotal()))
	b.drawn = true
}

// done clears the bar.
func (b *snapBar) done() {
	if b.drawn {
		fmt.Fprint(b.w, "\r\033[K")
		b.drawn = false
	}
}

func snapPlural(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	if strings.HasSuffix(noun, "y") {
		return fmt.Sprintf("%d %sies", n, strings.TrimSuffix(noun, "y"))
	}
	return fmt.Sprintf("%d %ss", n, noun)
}

// snapModeString renders an entry's type and permission bits like ls -l.
func snapModeString(e *agentdv1.SnapshotEntry) string {
	m := os.FileMode(e.GetMode() & 0o777)
	if e.GetMode()&0o4000 != 0 {
		m |= os.ModeSetuid
	}
	if e.GetMode()&0o2000 != 0 {
		m |= os.ModeSetgid
	}
	if e.GetMode()&0o1000 != 0 {
		m |= os.ModeSticky
	}
	switch e.GetType() {
	case agentdv1.FileType_FILE_TYPE_DIRECTORY:
		m |= os.ModeDir
	case agentdv1.FileType_FILE_TYPE_SYMLINK:
		m |= os.ModeSymlink
	}
	return m.String()
}

// snapCreate makes a snapshot on the connection's agentd as req says and
// returns it (progress on a terminal's stderr).
func (a *app) snapCreate(ctx context.Context, snaps agentdv1.SnapshotServiceClient, req *agentdv1.CreateRequest) (*agentdv1.Snapshot, error) {
	st, err := snaps.Create(ctx, req)
	if err != nil {
		return nil, err
	}
	bar := a.snapProgressBar("snapshot")
	defer bar.done()
	for {
		m, err := st.Recv()
		if err == io.EOF {
			return nil, errors.New("the daemon ended the snapshot without a result")
		}
		if err != nil {
			return nil, err
		}
		if p := m.GetProgress(); p != nil {
			bar.update(p)
			continue
		}
		if snap := m.GetSnapshot(); snap != nil {
			bar.done()
			return snap, nil
		}
	}
}

// snapRestore restores a snapshot as req says and returns what was done
// (progress on a terminal's stderr).
func (a *app) snapRestore(ctx context.Context, snaps agentdv1.SnapshotServiceClient, req *agentdv1.RestoreRequest) (*agentdv1.RestoreSummary, error) {
	st, err := snaps.Restore(ctx, req)
	if err != nil {
		return nil, err
	}
	bar := a.snapProgressBar("restore")
	defer bar.done()
	for {
		m, err := st.Recv()
		if err == io.EOF {
			return nil, errors.New("the daemon ended the restore without a result")
		}
		if err != nil {
			return nil, err
		}
		if p := m.GetProgress(); p != nil {
			bar.update(p)
			continue
		}
		if sum := m.GetSummary(); sum != nil {
			bar.done()
			return sum, nil
		}
	}
}

// snapExport writes snapshot id as a tar archive to out.
func snapExport(ctx context.Context, snaps agentdv1.SnapshotServiceClient, id string, out io.Writer) error {
	st, err := snaps.Export(ctx, &agentdv1.ExportRequest{Id: id})
	if err != nil {
		return err
	}
	for {
		m, err := st.Recv()
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return err
		}
		if _, err := out.Write(m.GetData()); err != nil {
			return fmt.Errorf("write the archive: %w", err)
		}
	}
}

// snapImport stores the tar archive r as a new snapshot with hdr and
// returns it; a failure stores nothing.
func snapImport(ctx context.Context, snaps agentdv1.SnapshotServiceClient, r io.Reader, hdr *agentdv1.ImportHeader) (*agentdv1.Snapshot, error) {
	st, err := snaps.Import(ctx)
	if err != nil {
		return nil, err
	}
	if err := st.Send(&agentdv1.ImportRequest{Msg: &agentdv1.ImportRequest_Header{Header: hdr}}); err != nil {
		_, err = st.CloseAndRecv() // the server's reason
		return nil, err
	}
	r = interruptible(ctx, r)
	buf := make([]byte, snapChunk)
	for {
		n, rerr := r.Read(buf)
		if n > 0 {
			if err := st.Send(&agentdv1.ImportRequest{Msg: &agentdv1.ImportRequest_Data{Data: buf[:n]}}); err != nil {
				_, err = st.CloseAndRecv() // the server's reason
				return nil, err
			}
		}
		if rerr == io.EOF {
			break
		}
		if rerr != nil {
			return nil, fmt.Errorf("read the archive: %w (nothing was stored)", rerr)
		}
	}
	resp, err := st.CloseAndRecv()
	if err != nil {
		return nil, err
	}
	return resp.GetSnapshot(), nil
}
