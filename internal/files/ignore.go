package files

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"unicode"
	"unicode/utf8"
)

// This file implements .gitignore matching as gitignore(5) describes it.
// It is written here rather than taken from go-git because go-git's
// matcher comes with the whole go-git module graph, and its domain-path
// API would need adapting anyway; the format is small and fully specified.
//
// Supported: comments, escapes ("\#", "\!", "\ "), trailing-space
// trimming, negation ("!"), directory-only patterns (trailing "/"),
// anchoring (a "/" at the start or in the middle), "*", "?", "[...]"
// classes (with "!" or "^", ranges and [:class:] names), and "**" as a
// leading, trailing or middle component. Patterns come from .gitignore
// files in every directory walked, in the directories between the git
// work tree's root and the walk root, and from .git/info/exclude. Not
// supported: core.excludesFile (the user's global excludes), and
// core.ignoreCase.

// ignorePattern is one pattern line of a .gitignore file.
type ignorePattern struct {
	base     string   // absolute directory of the .gitignore file
	segs     []string // the pattern split at "/"
	negate   bool     // "!pattern": re-include
	dirOnly  bool     // "pattern/": directories only
	anchored bool     // relative to base, not matched at any depth
}

// parseIgnore parses the content of a .gitignore file in directory base.
func parseIgnore(data []byte, base string) []ignorePattern {
	var pats []ignorePattern
	for len(data) > 0 {
		line := data
		if i := bytes.IndexByte(data, '\n'); i >= 0 {
			line, data = data[:i], data[i+1:]
		} else {
			data = nil
		}
		if p, ok := parseIgnoreLine(string(line), base); ok {
			pats = append(pats, p)
		}
	}
	return pats
}

func parseIgnoreLine(line, base string) (ignorePattern, bool) {
	line = strings.TrimSuffix(line, "\r")
	if line == "" || line[0] == '#' {
		return ignorePattern{}, false
	}
	// Trailing spaces are dropped unless escaped with a backslash.
	for strings.HasSuffix(line, " ") && !strings.HasSuffix(line, "\\ ") {
		line = line[:len(line)-1]
	}
	p := ignorePattern{base: base}
	if line != "" && line[0] == '!' {
		p.negate = true
		line = line[1:]
	}
	if strings.HasSuffix(line, "/") {
		p.dirOnly = true
		line = strings.TrimRight(line, "/")
	}
	if strings.Contains(line, "/") {
		p.anchored = true
		line = strings.TrimLeft(line, "/")
	}
	if line == "" {
		return ignorePattern{}, false
	}
	p.segs = strings.Split(line, "/")
	return p, true
}

// match reports whether the pattern matches the entry at absolute path.
func (p *ignorePattern) match(path string, isDir bool) bool {
	if p.dirOnly && !isDir {
		return false
	}
	var rel string
	switch {
	case p.base == "/":
		rel = strings.TrimPrefix(path, "/")
	case strings.HasPrefix(path, p.base+"/"):
		rel = path[len(p.base)+1:]
	default:
		return false
	}
	if !p.anchored {
		return matchSegment(p.segs[0], rel[strings.LastIndexByte(rel, '/')+1:])
	}
	return matchSegments(p.segs, strings.Split(rel, "/"))
}

// matchSegments matches path components against pattern components where
// "**" stands for any number of components: zero or more when leading or
// in the middle, one or more when trailing (everything inside).
func matchSegments(pat, name []string) bool {
	for len(pat) > 0 {
		if pat[0] != "**" {
			if len(name) == 0 || !matchSegment(pat[0], name[0]) {
				return false
			}
			pat, name = pat[1:], name[1:]
			continue
		}
		for len(pat) > 1 && pat[1] == "**" {
			pat = pat[1:]
		}
		rest := pat[1:]
		if len(rest) == 0 {
			return len(name) > 0
		}
		for i := 0; i < len(name); i++ {
			if matchSegments(rest, name[i:]) {
				return true
			}
		}
		return false
	}
	return len(name) == 0
}

// matchSegment matches one path component against one pattern component:
// "*" is any run of characters, "?" any one character, "[...]" a class,
// "\x" the character x.
func matchSegment(pat, name string) bool {
	// Iterative matching with backtracking to the last "*".
	starPat, starName := -1, -1
	pi, ni := 0, 0
	for ni < len(name) {
		if pi < len(pat) {
			switch pat[pi] {
			case '*':
				for pi < len(pat) && pat[pi] == '*' {
					pi++
				}
				starPat, starName = pi, ni
				continue
			case '?':
				_, w := utf8.DecodeRuneInString(name[ni:])
				pi++
				ni += w
				continue
			case '[':
				r, w := utf8.DecodeRuneInString(name[ni:])
				if ok, end, valid := matchClass(pat[pi:], r); valid {
					if ok {
						pi += end
						ni += w
						continue
					}
					break
				}
				// An unclosed "[" is a literal.
				if name[ni] == '[' {
					pi++
					ni++
					continue
				}
			case '\\':
				if pi+1 < len(pat) && pat[pi+1] == name[ni] {
					pi += 2
					ni++
					continue
				}
			default:
				if pat[pi] == name[ni] {
					pi++
					ni++
					continue
				}
			}
		}
		if starPat < 0 {
			return false
		}
		// Let the last "*" swallow one more character and retry.
		_, w := utf8.DecodeRuneInString(name[starName:])
		starName += w
		pi, ni = starPat, starName
	}
	for pi < len(pat) && pat[pi] == '*' {
		pi++
	}
	return pi == len(pat)
}

// matchClass matches r against the class at the start of pat ("[...]").
// It returns whether r is in the class, the length of the class in pat,
// and whether pat starts with a well-formed class at all.
func matchClass(pat string, r rune) (ok bool, end int, valid bool) {
	i := 1
	negate := false
	if i < len(pat) && (pat[i] == '!' || pat[i] == '^') {
		negate = true
		i++
	}
	first := true
	for i < len(pat) {
		if pat[i] == ']' && !first {
			return ok != negate, i + 1, true
		}
		first = false
		if strings.HasPrefix(pat[i:], "[:") {
			if j := strings.Index(pat[i+2:], ":]"); j >= 0 {
				if classFunc(pat[i+2 : i+2+j])(r) {
					ok = true
				}
				i += j + 4
				continue
			}
		}
		lo, w := utf8.DecodeRuneInString(pat[i:])
		if lo == '\\' && i+w < len(pat) {
			i += w
			lo, w = utf8.DecodeRuneInString(pat[i:])
		}
		i += w
		hi := lo
		if i+1 < len(pat) && pat[i] == '-' && pat[i+1] != ']' {
			i++
			var w2 int
			hi, w2 = utf8.DecodeRuneInString(pat[i:])
			if hi == '\\' && i+w2 < len(pat) {
				i += w2
				hi, w2 = utf8.DecodeRuneInString(pat[i:])
			}
			i += w2
		}
		if lo <= r && r <= hi {
			ok = true
		}
	}
	return false, 0, false
}

func classFunc(name string) func(rune) bool {
	switch name {
	case "alnum":
		return func(r rune) bool { return unicode.IsLetter(r) || unicode.IsDigit(r) }
	case "alpha":
		return unicode.IsLetter
	case "blank":
		return func(r rune) bool { return r == ' ' || r == '\t' }
	case "cntrl":
		return unicode.IsControl
	case "digit":
		return unicode.IsDigit
	case "graph":
		return func(r rune) bool { return unicode.IsGraphic(r) && !unicode.IsSpace(r) }
	case "lower":
		return unicode.IsLower
	case "print":
		return unicode.IsPrint
	case "punct":
		return unicode.IsPunct
	case "space":
		return unicode.IsSpace
	case "upper":
		return unicode.IsUpper
	case "xdigit":
		return func(r rune) bool { return strings.ContainsRune("0123456789abcdefABCDEF", r) }
	}
	return func(rune) bool { return false }
}

// ignoreRules are the patterns in force in one directory: those of its
// ancestors first, its own last, so that the last match wins.
type ignoreRules []ignorePattern

// ignored reports whether the entry at path is ignored.
func (rs ignoreRules) ignored(path string, isDir bool) bool {
	for i := len(rs) - 1; i >= 0; i-- {
		if rs[i].match(path, isDir) {
			return !rs[i].negate
		}
	}
	return false
}

// with returns the rules of dir: rs plus the patterns of dir/.gitignore.
// rs is not modified.
func (rs ignoreRules) with(dir string) ignoreRules {
	data, err := os.ReadFile(filepath.Join(dir, ".gitignore"))
	if err != nil || len(data) == 0 {
		return rs
	}
	pats := parseIgnore(data, dir)
	if len(pats) == 0 {
		return rs
	}
	out := make(ignoreRules, 0, len(rs)+len(pats))
	return append(append(out, rs...), pats...)
}

// ancestorRules returns the rules that apply at root from outside it: if
// root is inside a git work tree, .git/info/exclude and the .gitignore
// files of the directories from the work tree's root down to root's
// parent. Without a work tree there are none.
func ancestorRules(root string) ignoreRules {
	var dirs []string
	top := ""
	for d := root; ; d = filepath.Dir(d) {
		if _, err := os.Lstat(filepath.Join(d, ".git")); err == nil {
			top = d
			break
		}
		if d == filepath.Dir(d) {
			break
		}
		dirs = append(dirs, d)
	}
	if top == "" {
		return nil
	}
	var rs ignoreRules
	if data, err := os.ReadFile(filepath.Join(top, ".git", "info", "exclude")); err == nil {
		rs = append(rs, parseIgnore(data, top)...)
	}
	if top == root {
		return rs
	}
	rs = rs.with(top)
	// dirs holds root and the directories between it and top, deepest
	// first; root's own .gitignore is read by the walk.
	for i := len(dirs) - 1; i >= 1; i-- {
		rs = rs.with(dirs[i])
	}
	return rs
}
