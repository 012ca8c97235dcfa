package mcpserver

import (
	"context"
	"errors"
	"fmt"
	"io"
	"path"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/devdepot-ai/agentd/internal/wire"
	agentdv1 "github.com/devdepot-ai/agentd/proto/gen/agentd/v1"
)

// Limits of the file tools' results, within what a client passes to a
// model whole (see headBytes).
const (
	defaultLines   = 500
	maxLines       = 2000
	defaultMatches = 200
	defaultEntries = 1000
	textLimit      = 32 << 10
)

const readDoc = `Read lines of a text file, numbered like cat -n ("   12\tline"). By default the first 500 lines; give
from_line and count for another range (at most 2000 lines). The result says how many lines the file has and
whether more follow, and the file's sha256 (pass it to write_file or edit_file as expected_sha256 to be sure
nobody changed it meanwhile). Lines longer than 2000 bytes are cut and marked.`

const writeDoc = `Create or replace a file with the given content (atomically: readers see the old file or the new one);
parent directories are created. An existing file keeps its mode. Returns its size and sha256.`

const editDoc = `Replace old_string with new_string in a file. old_string must occur exactly once unless replace_all is
set (include surrounding lines to make it unique); the edit is atomic, and nothing changes when it fails.
Returns a unified diff of the change.`

const listDoc = `List a directory's entries: type (d directory, - file, l symlink), size and name; subdirectories end in /.
depth 2 or more descends. Hidden entries (.name) only with hidden.`

const grepDoc = `Search file contents for a regular expression (RE2 syntax; fixed_string for plain text) under a directory
(default the workspace), skipping what .gitignore ignores, hidden files and binary files. Prints path:line:text,
at most max_matches (default 200) matches.`

const globDoc = `Find files whose path matches a glob pattern ("**/*.go", "src/*.ts") under a directory (default the
workspace), skipping what .gitignore ignores and hidden files. Returns the paths, at most max_results (default 1000).`

// ReadInput is read_file's arguments.
type ReadInput struct {
	Path     string `json:"path" jsonschema:"the file; relative to the workspace, or absolute"`
	FromLine int64  `json:"from_line,omitempty" jsonschema:"first line to return, 1-based (default 1)"`
	Count    int64  `json:"count,omitempty" jsonschema:"how many lines at most (default 500, at most 2000)"`
}

// ReadResult is read_file's structured result.
type ReadResult struct {
	Path       string `json:"path"`
	FromLine   int64  `json:"from_line" jsonschema:"line number of the first line returned"`
	Lines      int    `json:"lines" jsonschema:"lines returned"`
	TotalLines int64  `json:"total_lines" jsonschema:"lines in the whole file"`
	More       bool   `json:"more" jsonschema:"lines follow the range returned"`
	SHA256     string `json:"sha256" jsonschema:"the whole file's sha256, for expected_sha256"`
}

func (s *Server) readFile(ctx context.Context, _ *mcp.CallToolRequest, in ReadInput) (*mcp.CallToolResult, ReadResult, error) {
	if in.Path == "" {
		return nil, ReadResult{}, errors.New("path is empty")
	}
	if in.FromLine < 0 || in.Count < 0 {
		return nil, ReadResult{}, errors.New("from_line and count must not be negative")
	}
	count := in.Count
	if count == 0 {
		count = defaultLines
	}
	count = min(count, maxLines)
	resp, err := agentdv1.NewFileServiceClient(s.conn).ReadLines(ctx, &agentdv1.ReadLinesRequest{Path: in.Path, FromLine: in.FromLine, Count: count})
	if err != nil {
		return nil, ReadResult{}, err
	}
	var b strings.Builder
	n := resp.GetFromLine()
	shown := 0
	for i, l := range resp.GetLines() {
		line := fmt.Sprintf("%6d\t%s\n", n+int64(i), l)
		if b.Len()+len(line) > textLimit && shown > 0 {
			break
		}
		b.WriteString(line)
		shown++
	}
	more := resp.GetMore() || shown < len(resp.GetLines())
	last := n + int64(shown) - 1
	switch {
	case resp.GetTotalLines() == 0:
		b.WriteString("[empty file]\n")
	case more:
		fmt.Fprintf(&b, "[lines %d–%d of %d; more follow: from_line %d]\n", n, last, resp.GetTotalLines(), last+1)
	default:
		fmt.Fprintf(&b, "[lines %d–%d of %d]\n", n, last, resp.GetTotalLines())
	}
	return text(b.String()), ReadResult{Path: in.Path, FromLine: n, Lines: shown, TotalLines: resp.GetTotalLines(), More: more, SHA256: resp.GetSha256()}, nil
}

// WriteInput is write_file's arguments.
type WriteInput struct {
	Path           string `json:"path" jsonschema:"the file; relative to the workspace, or absolute"`
	Content        string `json:"content" jsonschema:"the file's whole new content"`
	Append         bool   `json:"append,omitempty" jsonschema:"add content at the end of the file instead of replacing it"`
	ExpectedSHA256 string `json:"expected_sha256,omitempty" jsonschema:"write only if the file's sha256 (from read_file) is still this"`
}

// WriteResult is write_file's structured result.
type WriteResult struct {
	Path    string `json:"path"`
	Size    int64  `json:"size"`
	SHA256  string `json:"sha256"`
	Created bool   `json:"created" jsonschema:"the file did not exist before"`
}

func (s *Server) writeFile(ctx context.Context, _ *mcp.CallToolRequest, in WriteInput) (*mcp.CallToolResult, WriteResult, error) {
	if in.Path == "" {
		return nil, WriteResult{}, errors.New("path is empty")
	}
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	st, err := agentdv1.NewFileServiceClient(s.conn).Write(wctx)
	if err != nil {
		return nil, WriteResult{}, err
	}
	hdr := &agentdv1.WriteHeader{Path: in.Path, CreateParents: true, Append: in.Append, ExpectedSha256: in.ExpectedSHA256}
	if err := st.Send(&agentdv1.WriteRequest{Msg: &agentdv1.WriteRequest_Header{Header: hdr}}); err != nil && err != io.EOF {
		return nil, WriteResult{}, err
	}
	data := []byte(in.Content)
	for len(data) > 0 {
		n := min(len(data), wire.ChunkSize)
		if err := st.Send(&agentdv1.WriteRequest{Msg: &agentdv1.WriteRequest_Data{Data: data[:n]}}); err != nil {
			break // the server ended the stream: CloseAndRecv says why
		}
		data = data[n:]
	}
	resp, err := st.CloseAndRecv()
	if err != nil {
		return nil, WriteResult{}, err
	}
	verb := "wrote"
	if resp.GetCreated() {
		verb = "created"
	}
	return text(fmt.Sprintf("%s %s: %d bytes, sha256 %s", verb, resp.GetPath(), resp.GetSize(), resp.GetSha256())),
		WriteResult{Path: resp.GetPath(), Size: resp.GetSize(), SHA256: resp.GetSha256(), Created: resp.GetCreated()}, nil
}

// EditInput is edit_file's arguments.
type EditInput struct {
	Path           string `json:"path" jsonschema:"the file; relative to the workspace, or absolute"`
	OldString      string `json:"old_string" jsonschema:"the exact text to replace, whitespace included; must occur once unless replace_all"`
	NewString      string `json:"new_string" jsonschema:"the text to put in its place"`
	ReplaceAll     bool   `json:"replace_all,omitempty" jsonschema:"replace every occurrence of old_string"`
	ExpectedSHA256 string `json:"expected_sha256,omitempty" jsonschema:"edit only if the file's sha256 (from read_file) is still this"`
}

// EditResult is edit_file's structured result.
type EditResult struct {
	Path         string `json:"path"`
	Replacements int32  `json:"replacements"`
	SHA256       string `json:"sha256" jsonschema:"the file's new sha256"`
}

func (s *Server) editFile(ctx context.Context, _ *mcp.CallToolRequest, in EditInput) (*mcp.CallToolResult, EditResult, error) {
	if in.Path == "" {
		return nil, EditResult{}, errors.New("path is empty")
	}
	resp, err := agentdv1.NewFileServiceClient(s.conn).Edit(ctx, &agentdv1.EditRequest{
		Path:           in.Path,
		Edits:          []*agentdv1.Replacement{{OldString: in.OldString, NewString: in.NewString, ReplaceAll: in.ReplaceAll}},
		ExpectedSha256: in.ExpectedSHA256,
	})
	if err != nil {
		return nil, EditResult{}, err
	}
	diff := resp.GetDiff()
	if len(diff) > textLimit {
		diff = diff[:textLimit] + "\n[… diff cut …]\n"
	}
	return text(fmt.Sprintf("%d replacement(s) in %s\n%s", resp.GetReplacements(), resp.GetPath(), diff)),
		EditResult{Path: resp.GetPath(), Replacements: resp.GetReplacements(), SHA256: resp.GetSha256()}, nil
}

// ListInput is list_dir's arguments.
type ListInput struct {
	Path   string `json:"path,omitempty" jsonschema:"the directory; relative to the workspace, or absolute (default the workspace)"`
	Depth  int32  `json:"depth,omitempty" jsonschema:"levels to descend (default 1: the directory's own entries)"`
	Hidden bool   `json:"hidden,omitempty" jsonschema:"include entries whose name starts with a dot"`
}

// ListResult is list_dir's structured result.
type ListResult struct {
	Entries   int  `json:"entries"`
	Truncated bool `json:"truncated" jsonschema:"more entries exist than were listed"`
}

func (s *Server) listDir(ctx context.Context, _ *mcp.CallToolRequest, in ListInput) (*mcp.CallToolResult, ListResult, error) {
	if in.Depth < 0 {
		return nil, ListResult{}, errors.New("depth must not be negative")
	}
	p := in.Path
	if p == "" {
		p = "."
	}
	resp, err := agentdv1.NewFileServiceClient(s.conn).List(ctx, &agentdv1.FileServiceListRequest{Path: p, Depth: in.Depth, Hidden: in.Hidden, MaxEntries: defaultEntries})
	if err != nil {
		return nil, ListResult{}, err
	}
	var b strings.Builder
	for _, e := range resp.GetEntries() {
		kind, name := "-", e.GetPath()
		switch e.GetType() {
		case agentdv1.FileType_FILE_TYPE_DIRECTORY:
			kind, name = "d", name+"/"
		case agentdv1.FileType_FILE_TYPE_SYMLINK:
			kind, name = "l", name+" -> "+e.GetSymlinkTarget()
		case agentdv1.FileType_FILE_TYPE_OTHER:
			kind = "?"
		}
		fmt.Fprintf(&b, "%s %10d  %s\n", kind, e.GetSize(), name)
	}
	if resp.GetTruncated() {
		fmt.Fprintf(&b, "[listing cut at %d entries]\n", defaultEntries)
	}
	if len(resp.GetEntries()) == 0 {
		b.WriteString("[empty directory]\n")
	}
	return text(b.String()), ListResult{Entries: len(resp.GetEntries()), Truncated: resp.GetTruncated()}, nil
}

// GrepInput is grep's arguments.
type GrepInput struct {
	Pattern      string   `json:"pattern" jsonschema:"an RE2 regular expression, or plain text with fixed_string"`
	Path         string   `json:"path,omitempty" jsonschema:"directory or file to search (default the workspace)"`
	FixedString  bool     `json:"fixed_string,omitempty" jsonschema:"pattern is plain text, not a regular expression"`
	IgnoreCase   bool     `json:"ignore_case,omitempty" jsonschema:"match without regard to case"`
	Include      []string `json:"include,omitempty" jsonschema:"search only files matching these globs, e.g. [\"*.go\"]"`
	ContextLines int32    `json:"context_lines,omitempty" jsonschema:"lines of context before and after each match"`
	MaxMatches   int32    `json:"max_matches,omitempty" jsonschema:"stop after this many matches (default 200)"`
}

// GrepResult is grep's structured result.
type GrepResult struct {
	Matches   int64 `json:"matches"`
	Files     int64 `json:"files_scanned"`
	Truncated bool  `json:"truncated" jsonschema:"max_matches stopped the search"`
}

func (s *Server) grep(ctx context.Context, _ *mcp.CallToolRequest, in GrepInput) (*mcp.CallToolResult, GrepResult, error) {
	if in.Pattern == "" {
		return nil, GrepResult{}, errors.New("pattern is empty")
	}
	if in.MaxMatches < 0 || in.ContextLines < 0 {
		return nil, GrepResult{}, errors.New("max_matches and context_lines must not be negative")
	}
	if in.MaxMatches == 0 {
		in.MaxMatches = defaultMatches
	}
	gctx, cancel := context.WithCancel(ctx)
	defer cancel()
	st, err := agentdv1.NewFileServiceClient(s.conn).Search(gctx, &agentdv1.SearchRequest{
		Pattern: in.Pattern, Path: in.Path, FixedString: in.FixedString, IgnoreCase: in.IgnoreCase,
		Include: in.Include, ContextLines: in.ContextLines, MaxMatches: in.MaxMatches,
	})
	if err != nil {
		return nil, GrepResult{}, err
	}
	var b strings.Builder
	var res GrepResult
	cut := false
	for {
		m, err := st.Recv()
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, GrepResult{}, err
		}
		if sum := m.GetSummary(); sum != nil {
			res = GrepResult{Matches: sum.GetMatches(), Files: sum.GetFilesScanned(), Truncated: sum.GetTruncated()}
			continue
		}
		mt := m.GetMatch()
		if mt == nil || cut {
			continue
		}
		var e strings.Builder
		for i, l := range mt.GetBefore() {
			fmt.Fprintf(&e, "%s-%d-%s\n", mt.GetPath(), mt.GetLineNumber()-int64(len(mt.GetBefore())-i), l)
		}
		fmt.Fprintf(&e, "%s:%d:%s\n", mt.GetPath(), mt.GetLineNumber(), mt.GetLine())
		for i, l := range mt.GetAfter() {
			fmt.Fprintf(&e, "%s-%d-%s\n", mt.GetPath(), mt.GetLineNumber()+int64(i)+1, l)
		}
		if b.Len()+e.Len() > textLimit {
			cut = true
			continue
		}
		b.WriteString(e.String())
	}
	switch {
	case res.Matches == 0:
		b.WriteString("[no matches]\n")
	case cut:
		fmt.Fprintf(&b, "[%d matches; the rest not shown: narrow path, include or the pattern]\n", res.Matches)
	case res.Truncated:
		fmt.Fprintf(&b, "[stopped at %d matches: raise max_matches or narrow the search]\n", res.Matches)
	}
	return text(b.String()), res, nil
}

// GlobInput is glob's arguments.
type GlobInput struct {
	Pattern    string `json:"pattern" jsonschema:"a glob: * within a name, ** across directories, e.g. \"**/*_test.go\""`
	Path       string `json:"path,omitempty" jsonschema:"directory to search under (default the workspace)"`
	MaxResults int32  `json:"max_results,omitempty" jsonschema:"at most this many paths (default 1000)"`
}

// GlobResult is glob's structured result.
type GlobResult struct {
	Paths     []string `json:"paths"`
	Truncated bool     `json:"truncated" jsonschema:"more paths match than were returned"`
}

func (s *Server) glob(ctx context.Context, _ *mcp.CallToolRequest, in GlobInput) (*mcp.CallToolResult, GlobResult, error) {
	if in.Pattern == "" {
		return nil, GlobResult{}, errors.New("pattern is empty")
	}
	if in.MaxResults < 0 {
		return nil, GlobResult{}, errors.New("max_results must not be negative")
	}
	if in.MaxResults == 0 {
		in.MaxResults = defaultEntries
	}
	resp, err := agentdv1.NewFileServiceClient(s.conn).Glob(ctx, &agentdv1.GlobRequest{Pattern: in.Pattern, Path: in.Path, MaxResults: in.MaxResults})
	if err != nil {
		return nil, GlobResult{}, err
	}
	t := strings.Join(resp.GetPaths(), "\n")
	switch {
	case len(resp.GetPaths()) == 0:
		t = "[no files match " + path.Clean(in.Pattern) + "]"
	case resp.GetTruncated():
		t += fmt.Sprintf("\n[stopped at %d paths: raise max_results or narrow the pattern]", len(resp.GetPaths()))
	}
	paths := resp.GetPaths()
	if paths == nil {
		paths = []string{}
	}
	return text(t), GlobResult{Paths: paths, Truncated: resp.GetTruncated()}, nil
}
