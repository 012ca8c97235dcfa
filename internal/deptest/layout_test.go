package deptest

import (
	"bytes"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// The hub's shape (issue 20, "one room per job"): a composition root that
// stays small, files that fit a reading, a Server that wires subsystems
// rather than holding their state, and status errors made at the edge.
const (
	maxHubRootLines = 3500 // non-test lines of internal/hub itself
	maxFileLines    = 600  // non-test lines of any one file under internal/hub/...
	maxServerFields = 18   // fields of hub.Server
)

// statusAllowed lists the only files (module paths) under the directories
// statusDirs that may build a gRPC status with status.Error or
// status.Errorf; everything else returns domain errors (internal/errs) and
// rpcerr's interceptors make the status at the edge.
var statusAllowed = map[string]string{
	"internal/rpcerr/rpcerr.go": "the one mapping of domain errors to status codes, run outermost on every server",
	"internal/hub/fleet/proxy.go": "the raw proxy answers in a machine's place: a method it cannot route is " +
		"UNIMPLEMENTED, which no domain error kind means, and the statuses of forwarded streams pass through",
}

// statusDirs are the directories (and everything below them) whose
// status.Error calls are checked.
var statusDirs = []string{"internal/hub", "internal/rpcerr"}

// root is the module's directory, from this package's.
var root = filepath.Join("..", "..")

// goFiles returns the non-test .go files under dir (module path), as
// module paths. A directory whose name ends in "test" (hubtest, storetest,
// pgtest) is test support, not the hub's code, and is left out.
func goFiles(t *testing.T, dir string, recurse bool) []string {
	t.Helper()
	var files []string
	err := filepath.WalkDir(filepath.Join(root, dir), func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		rel = filepath.ToSlash(rel)
		if d.IsDir() {
			if rel != dir && (!recurse || strings.HasSuffix(d.Name(), "test")) {
				return filepath.SkipDir
			}
			return nil
		}
		if strings.HasSuffix(p, ".go") && !strings.HasSuffix(p, "_test.go") {
			files = append(files, rel)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return files
}

func lines(t *testing.T, file string) int {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(root, file))
	if err != nil {
		t.Fatal(err)
	}
	return bytes.Count(b, []byte("\n"))
}

func TestHubLayout(t *testing.T) {
	t.Parallel()

	total := 0
	for _, f := range goFiles(t, "internal/hub", false) {
		total += lines(t, f)
	}
	t.Logf("internal/hub root: %d non-test lines (at most %d)", total, maxHubRootLines)
	if total > maxHubRootLines {
		t.Errorf("internal/hub has %d non-test lines, more than %d: move a job into its own package", total, maxHubRootLines)
	}

	for _, f := range goFiles(t, "internal/hub", true) {
		if n := lines(t, f); n > maxFileLines {
			t.Errorf("%s has %d lines, more than %d", f, n, maxFileLines)
		}
	}

	fields, err := serverFields()
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("hub.Server: %d fields (at most %d)", fields, maxServerFields)
	if fields > maxServerFields {
		t.Errorf("hub.Server has %d fields, more than %d: a subsystem's state belongs in the subsystem", fields, maxServerFields)
	}

	sites := 0
	for _, dir := range statusDirs {
		for _, f := range goFiles(t, dir, true) {
			n, err := statusCalls(f)
			if err != nil {
				t.Fatal(err)
			}
			sites += n
			if _, ok := statusAllowed[f]; n > 0 && !ok {
				t.Errorf("%s builds a status %d times (status.Error/Errorf): return a domain error (internal/errs) instead", f, n)
			}
		}
	}
	t.Logf("status.Error/Errorf calls under %s: %d", strings.Join(statusDirs, ", "), sites)
}

// serverFields counts the fields of internal/hub's Server (an embedded
// field counts once, a, b T twice).
func serverFields() (int, error) {
	fset := token.NewFileSet()
	dir := filepath.Join(root, "internal", "hub")
	entries, err := os.ReadDir(dir)
	if err != nil {
		return 0, err
	}
	for _, e := range entries {
		if !strings.HasSuffix(e.Name(), ".go") || strings.HasSuffix(e.Name(), "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, filepath.Join(dir, e.Name()), nil, parser.SkipObjectResolution)
		if err != nil {
			return 0, err
		}
		for _, d := range f.Decls {
			g, ok := d.(*ast.GenDecl)
			if !ok || g.Tok != token.TYPE {
				continue
			}
			for _, s := range g.Specs {
				ts := s.(*ast.TypeSpec)
				st, ok := ts.Type.(*ast.StructType)
				if ts.Name.Name != "Server" || !ok {
					continue
				}
				n := 0
				for _, fl := range st.Fields.List {
					n += max(1, len(fl.Names))
				}
				return n, nil
			}
		}
	}
	return 0, os.ErrNotExist
}

// statusCalls counts the calls of status.Error and status.Errorf (the
// package google.golang.org/grpc/status, under whatever name) in file.
func statusCalls(file string) (int, error) {
	f, err := parser.ParseFile(token.NewFileSet(), filepath.Join(root, file), nil, parser.SkipObjectResolution)
	if err != nil {
		return 0, err
	}
	name := ""
	for _, imp := range f.Imports {
		if p, _ := strconv.Unquote(imp.Path.Value); p == "google.golang.org/grpc/status" {
			name = "status"
			if imp.Name != nil {
				name = imp.Name.Name
			}
		}
	}
	if name == "" {
		return 0, nil
	}
	n := 0
	ast.Inspect(f, func(node ast.Node) bool {
		call, ok := node.(*ast.CallExpr)
		if !ok {
			return true
		}
		sel, ok := call.Fun.(*ast.SelectorExpr)
		if !ok {
			return true
		}
		if id, ok := sel.X.(*ast.Ident); ok && id.Name == name && slices.Contains([]string{"Error", "Errorf"}, sel.Sel.Name) {
			n++
		}
		return true
	})
	return n, nil
}
