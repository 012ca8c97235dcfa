package deptest

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"go/importer"
	"go/token"
	"go/types"
	"io"
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"
)

// publicPackages are the module's Go API for others (docs/design.md, "Public
// and internal packages"): nothing they export may name a type from an
// internal package, which another module could not import.
var publicPackages = []string{"agentd", "runner", "runner/pyrun", "transport", "install"}

// exportData maps each package that pkgs link to its compiled export data
// (go list -export), for go/importer.
func exportData(t *testing.T, pkgs []string) map[string]string {
	t.Helper()
	args := []string{"list", "-export", "-deps", "-f", "{{.ImportPath}}\t{{.Export}}"}
	for _, p := range pkgs {
		args = append(args, module+p)
	}
	out, err := exec.Command("go", args...).Output()
	if err != nil {
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			t.Fatalf("go list -export: %v\n%s", err, ee.Stderr)
		}
		t.Fatalf("go list -export: %v", err)
	}
	m := map[string]string{}
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		path, file, _ := strings.Cut(sc.Text(), "\t")
		if file != "" {
			m[path] = file
		}
	}
	return m
}

// TestPublicAPINamesNoInternalType type-checks the public packages' export
// data and fails for every exported name whose signature, fields or methods
// mention a type declared under internal/.
func TestPublicAPINamesNoInternalType(t *testing.T) {
	t.Parallel()
	files := exportData(t, publicPackages)
	imp := importer.ForCompiler(token.NewFileSet(), "gc", func(path string) (io.ReadCloser, error) {
		f, ok := files[path]
		if !ok {
			return nil, fmt.Errorf("no export data for %s", path)
		}
		return os.Open(f)
	})
	for _, p := range publicPackages {
		pkg, err := imp.Import(module + p)
		if err != nil {
			t.Fatalf("import %s: %v", p, err)
		}
		var leaks []string
		for _, name := range pkg.Scope().Names() {
			obj := pkg.Scope().Lookup(name)
			if !obj.Exported() {
				continue
			}
			for _, l := range internalTypes(obj) {
				leaks = append(leaks, fmt.Sprintf("%s.%s names %s", p, name, l))
			}
		}
		slices.Sort(leaks)
		leaks = slices.Compact(leaks)
		for _, l := range leaks {
			t.Errorf("%s: a public API must not expose an internal type (make it public, or keep the name unexported)", l)
		}
	}
}

// internalTypes lists the internal named types an exported object shows to
// its users: a func's signature; a type's exported fields and methods (and
// what it is, for a non-struct); a var's or const's type.
func internalTypes(obj types.Object) []string {
	w := &walker{seen: map[types.Type]bool{}}
	switch o := obj.(type) {
	case *types.TypeName:
		named, ok := o.Type().(*types.Named)
		if !ok {
			w.walk(o.Type())
			break
		}
		if st, ok := named.Underlying().(*types.Struct); ok {
			for f := range st.Fields() {
				if f.Exported() {
					w.walk(f.Type())
				}
			}
		} else {
			w.walk(named.Underlying())
		}
		for m := range named.Methods() {
			if m.Exported() {
				w.walk(m.Type())
			}
		}
	default:
		w.walk(obj.Type())
	}
	return w.found
}

type walker struct {
	seen  map[types.Type]bool
	found []string
}

// walk records internal named types reachable through t's structure (not
// through the fields of other named types: those are checked as their own
// package's API, or are internal already).
func (w *walker) walk(t types.Type) {
	if t == nil || w.seen[t] {
		return
	}
	w.seen[t] = true
	switch t := t.(type) {
	case *types.Named:
		if p := t.Obj().Pkg(); p != nil && strings.Contains(p.Path()+"/", "/internal/") {
			w.found = append(w.found, p.Path()+"."+t.Obj().Name())
		}
		if args := t.TypeArgs(); args != nil {
			for a := range args.Types() {
				w.walk(a)
			}
		}
	case *types.Alias:
		w.walk(types.Unalias(t))
	case *types.Pointer:
		w.walk(t.Elem())
	case *types.Slice:
		w.walk(t.Elem())
	case *types.Array:
		w.walk(t.Elem())
	case *types.Map:
		w.walk(t.Key())
		w.walk(t.Elem())
	case *types.Chan:
		w.walk(t.Elem())
	case *types.Signature:
		for v := range t.Params().Variables() {
			w.walk(v.Type())
		}
		for v := range t.Results().Variables() {
			w.walk(v.Type())
		}
	case *types.Struct:
		for f := range t.Fields() {
			if f.Exported() || f.Embedded() {
				w.walk(f.Type())
			}
		}
	case *types.Interface:
		for m := range t.Methods() {
			if m.Exported() {
				w.walk(m.Type())
			}
		}
	}
}
