package files

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/devdepot-ai/agentd/internal/errs"
)

func TestGlob(t *testing.T) {
	t.Parallel()
	f, ws := newTestFS(t)
	writeFiles(t, ws, map[string]string{
		".gitignore":            "vendor/\n*.tmp\n",
		"main.go":               "",
		"main_test.go":          "",
		"a.tmp":                 "",
		"cmd/tool/tool.go":      "",
		"cmd/tool/tool_test.go": "",
		"internal/x/x.go":       "",
		"vendor/dep/dep.go":     "",
		".github/ci.yml":        "",
		".env":                  "",
		"docs/a.md":             "",
		"docs/b.md":             "",
		"link.go":               "->main.go",
		".git/HEAD":             "",
	})
	rel := func(paths []string) []string {
		out := []string{}
		for _, p := range paths {
			out = append(out, strings.TrimPrefix(p, ws+"/"))
		}
		return out
	}
	tests := []struct {
		name      string
		opts      GlobOptions
		want      []string
		truncated bool
	}{
		{name: "recursive", opts: GlobOptions{Pattern: "**/*.go"},
			want: []string{"cmd/tool/tool.go", "cmd/tool/tool_test.go", "internal/x/x.go", "link.go", "main.go", "main_test.go"}},
		{name: "top level", opts: GlobOptions{Pattern: "*.go"}, want: []string{"link.go", "main.go", "main_test.go"}},
		{name: "tests", opts: GlobOptions{Pattern: "**/*_test.go"}, want: []string{"cmd/tool/tool_test.go", "main_test.go"}},
		{name: "static prefix", opts: GlobOptions{Pattern: "cmd/**/*.go"}, want: []string{"cmd/tool/tool.go", "cmd/tool/tool_test.go"}},
		{name: "alternatives", opts: GlobOptions{Pattern: "{docs,internal}/**"}, want: []string{"docs", "docs/a.md", "docs/b.md", "internal", "internal/x", "internal/x/x.go"}},
		{name: "no ignore", opts: GlobOptions{Pattern: "**/*.{go,tmp}", NoIgnore: true},
			want: []string{"a.tmp", "cmd/tool/tool.go", "cmd/tool/tool_test.go", "internal/x/x.go", "link.go", "main.go", "main_test.go", "vendor/dep/dep.go"}},
		{name: "hidden by flag", opts: GlobOptions{Pattern: "**/*.yml", Hidden: true}, want: []string{".github/ci.yml"}},
		{name: "hidden not matched by *", opts: GlobOptions{Pattern: "*"}, want: []string{"cmd", "docs", "internal", "link.go", "main.go", "main_test.go"}},
		{name: "hidden by pattern", opts: GlobOptions{Pattern: ".env"}, want: []string{".env"}},
		{name: "hidden dir by pattern", opts: GlobOptions{Pattern: ".github/*"}, want: []string{".github/ci.yml"}},
		{name: "dirs only", opts: GlobOptions{Pattern: "*/"}, want: []string{"cmd", "docs", "internal"}},
		{name: "from path", opts: GlobOptions{Pattern: "*.md", Path: "docs"}, want: []string{"docs/a.md", "docs/b.md"}},
		{name: "absolute", opts: GlobOptions{Pattern: ws + "/docs/*.md", Path: "/ignored"}, want: []string{"docs/a.md", "docs/b.md"}},
		{name: "truncated", opts: GlobOptions{Pattern: "**/*.go", MaxResults: 2}, want: []string{"cmd/tool/tool.go", "cmd/tool/tool_test.go"}, truncated: true},
		{name: "static missing", opts: GlobOptions{Pattern: "nope/*.go"}, want: []string{}},
		{name: "never .git", opts: GlobOptions{Pattern: "**/HEAD", Hidden: true, NoIgnore: true}, want: []string{}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			got, err := f.Glob(t.Context(), tc.opts)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(rel(got.Paths), tc.want); diff != "" {
				t.Errorf("Glob(%q) (-got +want):\n%s", tc.opts.Pattern, diff)
			}
			if got.Truncated != tc.truncated {
				t.Errorf("Truncated = %v, want %v", got.Truncated, tc.truncated)
			}
		})
	}

	t.Run("errors", func(t *testing.T) {
		t.Parallel()
		_, err := f.Glob(t.Context(), GlobOptions{})
		wantKind(t, err, errs.Invalid, "pattern is empty")
		_, err = f.Glob(t.Context(), GlobOptions{Pattern: "[abc"})
		wantKind(t, err, errs.Invalid, "not a valid glob")
		_, err = f.Glob(t.Context(), GlobOptions{Pattern: "*", Path: "missing"})
		wantKind(t, err, errs.NotFound, "missing does not exist")
		_, err = f.Glob(t.Context(), GlobOptions{Pattern: "*", Path: "main.go"})
		wantKind(t, err, errs.Precondition, "not a directory")
		_, err = f.Glob(t.Context(), GlobOptions{Pattern: "*", MaxResults: -1})
		wantKind(t, err, errs.Invalid, "max_results")
	})
}
