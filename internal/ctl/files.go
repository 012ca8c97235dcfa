package ctl

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/devdepot-ai/agentd/internal/wire"
	agentdv1 "github.com/devdepot-ai/agentd/proto/gen/agentd/v1"
)

// call dials the target and runs fn with a context carrying its metadata.
func (a *app) call(cmd *cobra.Command, fn func(ctx context.Context, c *conn) error) error {
	c, err := a.dial()
	if err != nil {
		return err
	}
	defer c.Close()
	return fn(c.ctx(cmd.Context()), c)
}

func (a *app) readCmd() *cobra.Command {
	var offset, limit int64
	cmd := &cobra.Command{
		Use:   "read PATH",
		Short: "Write a file's bytes to stdout (binary-safe, any size)",
		Example: `  agentctl read notes.txt
  agentctl read big.log --offset 1048576 --limit 4096
  agentctl read image.png > image.png`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if offset < 0 || limit < 0 {
				return usagef("--offset and --limit must not be negative")
			}
			return a.call(cmd, func(ctx context.Context, c *conn) error {
				st, err := agentdv1.NewFileServiceClient(c).Read(ctx, &agentdv1.ReadRequest{Path: args[0], Offset: offset, Limit: limit})
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
					if a.json {
						if err := a.printJSON(m); err != nil {
							return err
						}
						continue
					}
					if _, err := a.io.Out.Write(m.GetData()); err != nil {
						return err
					}
				}
			})
		},
	}
	cmd.Flags().Int64Var(&offset, "offset", 0, "first byte to read")
	cmd.Flags().Int64Var(&limit, "limit", 0, "bytes to read at most (default: to the end)")
	return cmd
}

func (a *app) linesCmd() *cobra.Command {
	var from, count int64
	var number bool
	cmd := &cobra.Command{
		Use:   "lines PATH",
		Short: "Print a range of lines of a text file",
		Long: `Print a range of lines of a text file. Very long lines are cut with a marker;
a note on stderr says when more lines follow. Binary files are refused (use read).`,
		Example: `  agentctl lines main.go --from 40 --count 20
  agentctl lines -n main.go          # with line numbers`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if from < 0 || count < 0 {
				return usagef("--from and --count must not be negative")
			}
			return a.call(cmd, func(ctx context.Context, c *conn) error {
				resp, err := agentdv1.NewFileServiceClient(c).ReadLines(ctx, &agentdv1.ReadLinesRequest{Path: args[0], FromLine: from, Count: count})
				if err != nil {
					return err
				}
				if a.json {
					return a.printJSON(resp)
				}
				for i, l := range resp.GetLines() {
					if number {
						fmt.Fprintf(a.io.Out, "%6d\t%s\n", resp.GetFromLine()+int64(i), l)
					} else {
						fmt.Fprintln(a.io.Out, l)
					}
				}
				if resp.GetMore() {
					last := resp.GetFromLine() + int64(len(resp.GetLines())) - 1
					fmt.Fprintf(a.io.Err, "[lines %d-%d of %d; more with --from %d]\n", resp.GetFromLine(), last, resp.GetTotalLines(), last+1)
				}
				return nil
			})
		},
	}
	cmd.Flags().Int64Var(&from, "from", 1, "first line, 1-based")
	cmd.Flags().Int64Var(&count, "count", 0, "lines at most (default 2000)")
	cmd.Flags().BoolVarP(&number, "number", "n", false, "prefix each line with its number")
	return cmd
}

func (a *app) writeCmd() *cobra.Command {
	var (
		mode            string
		parents, append bool
		expect          string
	)
	cmd := &cobra.Command{
		Use:   "write PATH",
		Short: "Write stdin to a file, atomically",
		Long: `Write stdin to a file. The file is replaced atomically (temp file, fsync,
rename): readers never see half a file, and nothing changes if the transfer
breaks. An existing file keeps its mode unless --mode is given.

--expect-sha256 HASH only writes when the file's current sha256 is HASH
("absent": only when it does not exist) — an optimistic lock against
overwriting someone else's change.`,
		Example: `  echo 'hello' | agentctl write notes/hello.txt -p
  agentctl write run.sh --mode 0755 < run.sh
  agentctl write config.json --expect-sha256 "$(agentctl --json stat config.json | jq -r .sha256)" < new.json`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			var perm uint64
			if mode != "" {
				var err error
				perm, err = strconv.ParseUint(mode, 8, 32)
				if err != nil || perm > 0o7777 {
					return usagef("--mode %q: want octal permission bits such as 0644", mode)
				}
			}
			return a.call(cmd, func(ctx context.Context, c *conn) error {
				st, err := agentdv1.NewFileServiceClient(c).Write(ctx)
				if err != nil {
					return err
				}
				hdr := &agentdv1.WriteHeader{Path: args[0], Mode: uint32(perm), CreateParents: parents, Append: append, ExpectedSha256: expect}
				if err := st.Send(&agentdv1.WriteRequest{Msg: &agentdv1.WriteRequest_Header{Header: hdr}}); err != nil {
					_, err = st.CloseAndRecv() // the server's reason
					return err
				}
				in := interruptible(ctx, a.io.In)
				buf := make([]byte, wire.ChunkSize)
				for {
					n, rerr := in.Read(buf)
					if n > 0 {
						if err := st.Send(&agentdv1.WriteRequest{Msg: &agentdv1.WriteRequest_Data{Data: buf[:n]}}); err != nil {
							_, err = st.CloseAndRecv() // the server's reason
							return err
						}
					}
					if rerr == io.EOF {
						break
					}
					if rerr != nil {
						return fmt.Errorf("read stdin: %w (nothing was written)", rerr)
					}
				}
				return a.quiet(st.CloseAndRecv())
			})
		},
	}
	f := cmd.Flags()
	f.StringVar(&mode, "mode", "", "permission bits, octal (default: keep the existing file's, 0644 for a new one)")
	f.BoolVarP(&parents, "parents", "p", false, "create missing parent directories")
	f.BoolVar(&append, "append", false, "append to the file instead of replacing it")
	f.StringVar(&expect, "expect-sha256", "", `write only if the file's sha256 is this ("absent": only if it does not exist)`)
	return cmd
}

func (a *app) editCmd() *cobra.Command {
	var (
		oldS, newS  string
		all, dryRun bool
		expect      string
	)
	cmd := &cobra.Command{
		Use:   "edit PATH --old TEXT --new TEXT",
		Short: "Replace an exact string in a file and print the diff",
		Long: `Replace exact text in a file, atomically, and print a unified diff.
--old must occur exactly once unless --all is given: an ambiguous or missing
string is an error that names the lines, and nothing changes.`,
		Example: `  agentctl edit main.go --old 'fmt.Println("hi")' --new 'fmt.Println("hello")'
  agentctl edit go.mod --old 'go 1.22' --new 'go 1.26'
  agentctl edit notes.txt --old TODO --new DONE --all`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if !cmd.Flags().Changed("old") {
				return usagef("edit needs --old TEXT (and --new TEXT)")
			}
			if !cmd.Flags().Changed("new") {
				return usagef("edit needs --new TEXT (use --new '' to delete)")
			}
			return a.call(cmd, func(ctx context.Context, c *conn) error {
				resp, err := agentdv1.NewFileServiceClient(c).Edit(ctx, &agentdv1.EditRequest{
					Path:           args[0],
					Edits:          []*agentdv1.Replacement{{OldString: oldS, NewString: newS, ReplaceAll: all}},
					ExpectedSha256: expect,
					DryRun:         dryRun,
				})
				if err != nil {
					return err
				}
				if a.json {
					return a.printJSON(resp)
				}
				fmt.Fprint(a.io.Out, resp.GetDiff())
				return nil
			})
		},
	}
	f := cmd.Flags()
	f.StringVar(&oldS, "old", "", "exact text to replace")
	f.StringVar(&newS, "new", "", "replacement text")
	f.BoolVar(&all, "all", false, "replace every occurrence")
	f.BoolVar(&dryRun, "dry-run", false, "print the diff, change nothing")
	f.StringVar(&expect, "expect-sha256", "", "edit only if the file's sha256 is this")
	return cmd
}

func (a *app) lsCmd() *cobra.Command {
	var recursive, all bool
	var depth int32
	cmd := &cobra.Command{
		Use:   "ls [PATH]",
		Short: "List a directory (mode, size, time, name)",
		Example: `  agentctl ls
  agentctl ls src -R
  agentctl ls -a ~`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			path := "."
			if len(args) == 1 {
				path = args[0]
			}
			if recursive && depth == 0 {
				depth = 64
			}
			return a.call(cmd, func(ctx context.Context, c *conn) error {
				resp, err := agentdv1.NewFileServiceClient(c).List(ctx, &agentdv1.FileServiceListRequest{Path: path, Depth: depth, Hidden: all})
				if err != nil {
					return err
				}
				if a.json {
					return a.printJSON(resp)
				}
				tw := tabwriter.NewWriter(a.io.Out, 0, 4, 1, ' ', tabwriter.AlignRight)
				base := ""
				if len(resp.GetEntries()) > 0 && depth > 1 {
					base = commonDir(resp.GetEntries())
				}
				for _, e := range resp.GetEntries() {
					name := e.GetName()
					if base != "" {
						name = strings.TrimPrefix(e.GetPath(), base)
					}
					if e.GetType() == agentdv1.FileType_FILE_TYPE_DIRECTORY {
						name += "/"
					}
					if t := e.GetSymlinkTarget(); t != "" {
						name += " -> " + t
					}
					fmt.Fprintf(tw, "%s\t%d\t %s\t %s\n", modeString(e), e.GetSize(), e.GetModified().AsTime().Local().Format("2006-01-02 15:04"), name)
				}
				if err := tw.Flush(); err != nil {
					return err
				}
				if resp.GetTruncated() {
					fmt.Fprintln(a.io.Err, "[listing truncated]")
				}
				return nil
			})
		},
	}
	cmd.Flags().BoolVarP(&recursive, "recursive", "R", false, "list subdirectories too")
	cmd.Flags().Int32Var(&depth, "depth", 0, "levels to descend (default 1; 64 with -R)")
	cmd.Flags().BoolVarP(&all, "all", "a", false, "include names starting with a dot")
	return cmd
}

// commonDir is the directory prefix (with trailing slash) shared by a
// recursive listing's first level, so nested names print relative to it.
func commonDir(es []*agentdv1.FileInfo) string {
	p := es[0].GetPath()
	if i := strings.LastIndexByte(p, '/'); i >= 0 {
		return p[:i+1]
	}
	return ""
}

// modeString renders type and permission bits like ls -l.
func modeString(e *agentdv1.FileInfo) string {
	m := fs.FileMode(e.GetMode() & 0o777)
	if e.GetMode()&0o4000 != 0 {
		m |= fs.ModeSetuid
	}
	if e.GetMode()&0o2000 != 0 {
		m |= fs.ModeSetgid
	}
	if e.GetMode()&0o1000 != 0 {
		m |= fs.ModeSticky
	}
	switch e.GetType() {
	case agentdv1.FileType_FILE_TYPE_DIRECTORY:
		m |= fs.ModeDir
	case agentdv1.FileType_FILE_TYPE_SYMLINK:
		m |= fs.ModeSymlink
	case agentdv1.FileType_FILE_TYPE_OTHER:
		m |= fs.ModeIrregular
	}
	return m.String()
}

func (a *app) statCmd() *cobra.Command {
	return &cobra.Command{
		Use:     "stat PATH",
		Short:   "Describe a path: type, size, mode, owner, time",
		Example: `  agentctl stat go.mod`,
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return a.call(cmd, func(ctx context.Context, c *conn) error {
				resp, err := agentdv1.NewFileServiceClient(c).Stat(ctx, &agentdv1.StatRequest{Path: args[0]})
				if err != nil {
					return err
				}
				if a.json {
					return a.printJSON(resp.GetInfo())
				}
				i := resp.GetInfo()
				tw := tabwriter.NewWriter(a.io.Out, 0, 4, 1, ' ', 0)
				fmt.Fprintf(tw, "path:\t%s\n", i.GetPath())
				fmt.Fprintf(tw, "type:\t%s\n", strings.ToLower(strings.TrimPrefix(i.GetType().String(), "FILE_TYPE_")))
				fmt.Fprintf(tw, "size:\t%d\n", i.GetSize())
				fmt.Fprintf(tw, "mode:\t%04o (%s)\n", i.GetMode(), modeString(i))
				fmt.Fprintf(tw, "owner:\t%d:%d\n", i.GetUid(), i.GetGid())
				fmt.Fprintf(tw, "modified:\t%s\n", i.GetModified().AsTime().Local().Format(time.RFC3339))
				if t := i.GetSymlinkTarget(); t != "" {
					fmt.Fprintf(tw, "target:\t%s\n", t)
				}
				return tw.Flush()
			})
		},
	}
}

func (a *app) rmCmd() *cobra.Command {
	var recursive bool
	cmd := &cobra.Command{
		Use:   "rm PATH",
		Short: "Remove a file, a symlink or an empty directory (-r: a whole tree)",
		Example: `  agentctl rm notes/old.txt
  agentctl rm -r build/`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return a.call(cmd, func(ctx context.Context, c *conn) error {
				return a.quiet(agentdv1.NewFileServiceClient(c).Remove(ctx, &agentdv1.RemoveRequest{Path: args[0], Recursive: recursive}))
			})
		},
	}
	cmd.Flags().BoolVarP(&recursive, "recursive", "r", false, "remove a directory and everything below it")
	return cmd
}

func (a *app) mvCmd() *cobra.Command {
	var force bool
	cmd := &cobra.Command{
		Use:   "mv SRC DST",
		Short: "Rename or move a file or directory",
		Long: `Rename SRC to DST. DST is the new name (an existing directory is not moved
into). An existing DST is only replaced with --force.`,
		Example: `  agentctl mv draft.md final.md
  agentctl mv -f new.conf app.conf`,
		Args: cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			return a.call(cmd, func(ctx context.Context, c *conn) error {
				return a.quiet(agentdv1.NewFileServiceClient(c).Move(ctx, &agentdv1.MoveRequest{Source: args[0], Destination: args[1], Overwrite: force}))
			})
		},
	}
	cmd.Flags().BoolVarP(&force, "force", "f", false, "replace an existing destination")
	return cmd
}

func (a *app) mkdirCmd() *cobra.Command {
	var parents bool
	cmd := &cobra.Command{
		Use:   "mkdir PATH",
		Short: "Create a directory (-p: with its parents; no error if it exists)",
		Example: `  agentctl mkdir build
  agentctl mkdir -p src/internal/store`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return a.call(cmd, func(ctx context.Context, c *conn) error {
				return a.quiet(agentdv1.NewFileServiceClient(c).MakeDir(ctx, &agentdv1.MakeDirRequest{Path: args[0], Parents: parents}))
			})
		},
	}
	cmd.Flags().BoolVarP(&parents, "parents", "p", false, "create missing parents; succeed if it exists")
	return cmd
}

func (a *app) grepCmd() *cobra.Command {
	var (
		globs, excludes           []string
		ignoreCase, fixed, hidden bool
		noIgnore                  bool
		ctxLines                  int32
		max                       int32
	)
	cmd := &cobra.Command{
		Use:   "grep PATTERN [PATH]",
		Short: "Search files for a regular expression (RE2), honouring .gitignore",
		Long: `Search a file or a tree for lines matching PATTERN (RE2 syntax; -F for a
literal string). Prints path:line:text like grep -rn; context lines as
path-line-text. Honours .gitignore and skips binary and hidden files unless
told otherwise. Exit 0 when something matched, 1 when nothing did, 2 on error.`,
		Example: `  agentctl grep 'func main' .
  agentctl grep -i todo src --glob '*.go' --glob '*.py'
  agentctl grep -F 'a.b(c)' -C 2
  agentctl grep password --no-ignore --hidden /etc`,
		Args: cobra.RangeArgs(1, 2),
		RunE: func(cmd *cobra.Command, args []string) error {
			a.failCode = ExitUsage
			req := &agentdv1.SearchRequest{Pattern: args[0], FixedString: fixed, IgnoreCase: ignoreCase,
				Include: globs, Exclude: excludes, ContextLines: ctxLines, MaxMatches: max, Hidden: hidden, NoIgnore: noIgnore}
			if len(args) == 2 {
				req.Path = args[1]
			}
			if ctxLines < 0 || max < 0 {
				return usagef("-C and --max must not be negative")
			}
			var matched, printed bool
			err := a.call(cmd, func(ctx context.Context, c *conn) error {
				st, err := agentdv1.NewFileServiceClient(c).Search(ctx, req)
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
					if a.json {
						if err := a.printJSON(m); err != nil {
							return err
						}
					}
					if x := m.GetMatch(); x != nil {
						matched = true
						if !a.json {
							if ctxLines > 0 && printed {
								fmt.Fprintln(a.io.Out, "--") // between groups, like grep -C
							}
							printMatch(a.io.Out, x)
							printed = true
						}
					}
					if s := m.GetSummary(); s != nil && s.GetTruncated() && !a.json {
						fmt.Fprintf(a.io.Err, "[stopped after %d matches; raise --max or narrow the search]\n", s.GetMatches())
					}
				}
			})
			if err != nil {
				return err
			}
			if !matched {
				return &exitError{code: 1}
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.StringArrayVarP(&globs, "glob", "g", nil, "only files matching this glob, e.g. '*.go' (repeatable)")
	f.StringArrayVar(&excludes, "exclude", nil, "skip files and directories matching this glob (repeatable)")
	f.BoolVarP(&ignoreCase, "ignore-case", "i", false, "match regardless of case")
	f.BoolVarP(&fixed, "fixed-strings", "F", false, "PATTERN is a literal string, not a regular expression")
	f.Int32VarP(&ctxLines, "context", "C", 0, "lines of context around each match")
	f.Int32Var(&max, "max", 0, "stop after this many matches (default 1000)")
	f.BoolVar(&hidden, "hidden", false, "search hidden files and directories too")
	f.BoolVar(&noIgnore, "no-ignore", false, "do not honour .gitignore")
	return cmd
}

func printMatch(w io.Writer, m *agentdv1.SearchMatch) {
	n := m.GetLineNumber()
	for i, l := range m.GetBefore() {
		fmt.Fprintf(w, "%s-%d-%s\n", m.GetPath(), n-int64(len(m.GetBefore())-i), l)
	}
	fmt.Fprintf(w, "%s:%d:%s\n", m.GetPath(), n, m.GetLine())
	for i, l := range m.GetAfter() {
		fmt.Fprintf(w, "%s-%d-%s\n", m.GetPath(), n+int64(i)+1, l)
	}
}

func (a *app) globCmd() *cobra.Command {
	var noIgnore, hidden bool
	var max int32
	cmd := &cobra.Command{
		Use:   "glob PATTERN [PATH]",
		Short: "List paths matching a glob pattern (** for any depth)",
		Example: `  agentctl glob '**/*_test.go'
  agentctl glob '*.{yaml,yml}' deploy
  agentctl glob '**/*.o' --no-ignore`,
		Args: cobra.RangeArgs(1, 2),
		RunE: func(cmd *cobra.Command, args []string) error {
			req := &agentdv1.GlobRequest{Pattern: args[0], NoIgnore: noIgnore, Hidden: hidden, MaxResults: max}
			if len(args) == 2 {
				req.Path = args[1]
			}
			if max < 0 {
				return usagef("--max must not be negative")
			}
			return a.call(cmd, func(ctx context.Context, c *conn) error {
				resp, err := agentdv1.NewFileServiceClient(c).Glob(ctx, req)
				if err != nil {
					return err
				}
				if a.json {
					return a.printJSON(resp)
				}
				for _, p := range resp.GetPaths() {
					fmt.Fprintln(a.io.Out, p)
				}
				if resp.GetTruncated() {
					fmt.Fprintln(a.io.Err, "[results truncated; raise --max]")
				}
				return nil
			})
		},
	}
	cmd.Flags().BoolVar(&noIgnore, "no-ignore", false, "do not honour .gitignore")
	cmd.Flags().BoolVar(&hidden, "hidden", false, "match names starting with a dot too")
	cmd.Flags().Int32Var(&max, "max", 0, "results at most (default 1000)")
	return cmd
}

func (a *app) watchCmd() *cobra.Command {
	var noIgnore, hidden bool
	var coalesce time.Duration
	cmd := &cobra.Command{
		Use:   "watch [PATH]",
		Short: "Print changes below a directory as they happen, until Ctrl-C",
		Long: `Watch a directory (default: the workspace) and everything below it, printing
each change as it happens: created, written, removed, renamed (moved away; the
new name, if inside, is created) or attributes. Directories end in "/". Changes
are gathered for --coalesce and printed once per path: a file created and then
written in one window is printed once, as created.

Names starting with a dot and paths .gitignore files exclude are left out
unless --hidden or --no-ignore; .git is never watched. If the kernel's event
queue overflows, agentctl says so on stderr (changes were lost: list the
directory again) and keeps watching.

With --json, each message is one JSON line: {"ready":…}, then {"batch":…} and
{"overflow":…}. Ctrl-C (SIGINT) or SIGTERM stops watching (exit 130 or 143).`,
		Example: `  agentctl watch
  agentctl watch src --coalesce 1s
  agentctl watch . --json | jq -c '.batch.events[]?'`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if coalesce < 0 || coalesce > 10*time.Second {
				return usagef("--coalesce %s: want 0 (100ms) to 10s", coalesce)
			}
			req := &agentdv1.WatchFilesRequest{NoIgnore: noIgnore, Hidden: hidden}
			if coalesce > 0 {
				req.Coalesce = durationpb.New(coalesce)
			}
			if len(args) == 1 {
				req.Path = args[0]
			}
			return a.call(cmd, func(ctx context.Context, c *conn) error {
				st, err := agentdv1.NewFileServiceClient(c).WatchFiles(ctx, req)
				if err != nil {
					return err
				}
				for {
					m, err := st.Recv()
					if err != nil {
						if a.interrupted() {
							return nil
						}
						if errors.Is(err, io.EOF) {
							return errors.New("the watch ended on the daemon's side")
						}
						return err
					}
					if a.json {
						if err := a.printJSON(m); err != nil {
							return err
						}
						continue
					}
					switch r := m.GetResult().(type) {
					case *agentdv1.WatchFilesResponse_Ready:
						fmt.Fprintf(a.io.Err, "watching %s (%d directories); Ctrl-C stops\n", r.Ready.GetPath(), r.Ready.GetDirectories())
					case *agentdv1.WatchFilesResponse_Batch:
						for _, e := range r.Batch.GetEvents() {
							p := e.GetPath()
							if e.GetDirectory() {
								p += "/"
							}
							fmt.Fprintf(a.io.Out, "%-10s %s\n", fileEventName(e.GetKind()), p)
						}
					case *agentdv1.WatchFilesResponse_Overflow:
						fmt.Fprintf(a.io.Err, "agentctl: changes were lost (%s); list the directory again to catch up\n", r.Overflow.GetReason())
					}
				}
			})
		},
	}
	cmd.Flags().BoolVar(&noIgnore, "no-ignore", false, "report paths .gitignore excludes too")
	cmd.Flags().BoolVar(&hidden, "hidden", false, "report names starting with a dot too")
	cmd.Flags().DurationVar(&coalesce, "coalesce", 0, "gather changes this long before printing them (default 100ms, at most 10s)")
	return cmd
}

// fileEventName is how watch prints a change's kind.
func fileEventName(k agentdv1.FileEventKind) string {
	switch k {
	case agentdv1.FileEventKind_FILE_EVENT_KIND_CREATED:
		return "created"
	case agentdv1.FileEventKind_FILE_EVENT_KIND_WRITTEN:
		return "written"
	case agentdv1.FileEventKind_FILE_EVENT_KIND_REMOVED:
		return "removed"
	case agentdv1.FileEventKind_FILE_EVENT_KIND_RENAMED:
		return "renamed"
	case agentdv1.FileEventKind_FILE_EVENT_KIND_ATTRIBUTES:
		return "attributes"
	}
	return "changed"
}
