package files

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"regexp"
	"regexp/syntax"
	"strings"
	"sync"
	"unicode"
	"unicode/utf8"

	"github.com/bmatcuk/doublestar/v4"

	"github.com/devdepot-ai/agentd/internal/errs"
)

// Limits of Search.
const (
	// DefaultMaxMatches is how many matches Search reports when not told.
	DefaultMaxMatches = 1_000
	// MaxMaxMatches is the most matches one Search may ask for.
	MaxMaxMatches = 100_000
	// MaxContextLines is the most context lines one Search may ask for.
	MaxContextLines = 100
	// SearchLineLen is how much of a matching or context line is shown;
	// longer lines are cut around the match, with a marker.
	SearchLineLen = 500

	maxPatternLen = 64 << 10
	maxGlobs      = 256
	maxLineBytes  = 64 << 20 // a longer line in a huge file ends its scan
)

// SearchOptions says what Search looks for and where.
type SearchOptions struct {
	// Pattern is an RE2 regular expression (see regexp/syntax), or a
	// literal string with Fixed. It is matched against each line.
	Pattern string
	// Path is the file or directory to search (empty: the workspace).
	Path string
	// Fixed takes Pattern literally.
	Fixed bool
	// IgnoreCase matches without regard to case.
	IgnoreCase bool
	// Include, if not empty, limits the search to files matching one of
	// these globs ("*.go", "src/**/*.ts"). A glob without "/" matches the
	// file's name, one with "/" its path relative to Path. A glob starting
	// with "!" excludes.
	Include []string
	// Exclude skips files and directories matching one of these globs,
	// matched as Include's.
	Exclude []string
	// Context is how many lines before and after each match to report.
	Context int
	// MaxMatches stops the search after this many matching lines
	// (0: DefaultMaxMatches).
	MaxMatches int
	// Hidden also searches names starting with "." (.git never).
	Hidden bool
	// NoIgnore does not honour .gitignore files.
	NoIgnore bool
	// Binary also searches files that look binary (a NUL byte in their
	// first 8 KiB).
	Binary bool
}

// Match is one matching line.
type Match struct {
	Path string // absolute path of the file
	Line int64  // 1-based line number
	Text string // the line, without newline, cut around the match if very long
	// Before and After are the context lines around the match. They never
	// repeat a line reported earlier for the same file (as a match or as
	// context) and stop before the next matching line, which comes as a
	// Match of its own: print them like grep -C, "--" between groups that
	// are not adjacent.
	Before []string
	After  []string
}

// Summary ends a search.
type Summary struct {
	FilesScanned int64 // files read
	FilesMatched int64 // files with at least one reported match
	Matches      int64 // matching lines reported
	FilesSkipped int64 // files skipped: binary, unreadable, or with a huge line
	Truncated    bool  // MaxMatches cut the search short
}

// Search finds the lines matching opts.Pattern in the files below
// opts.Path (or in that one file), honouring .gitignore files and skipping
// hidden and binary files unless told otherwise. Matches are handed to
// emit as they are found, in a deterministic order: files depth first by
// name, lines in order. Files are read in parallel. An error from emit
// stops the search and is returned as is.
func (f *FS) Search(ctx context.Context, opts SearchOptions, emit func(Match) error) (Summary, error) {
	s, root, rootInfo, err := f.newSearcher(opts)
	if err != nil {
		return Summary{}, err
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()

	if !rootInfo.IsDir() {
		fr := &fileResult{path: root}
		s.scan(fr, &scanBufs{})
		var sum Summary
		err := s.collect(fr, &sum, emit)
		if errors.Is(err, errStopWalk) {
			err = nil
		}
		return sum, err
	}

	// The walk hands batches of files, in walk order, both to the workers
	// and to this goroutine, which waits for each batch in turn and emits
	// its matches: files are read in parallel, matches come out in order.
	jobs := make(chan *searchBatch, f.workers)
	order := make(chan *searchBatch, f.workers*4)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		defer close(order)
		defer close(jobs)
		batch := &searchBatch{done: make(chan struct{})}
		size := 4 // batches grow, so that the first matches come quickly
		send := func() error {
			select {
			case order <- batch:
			case <-ctx.Done():
				return ctx.Err()
			}
			select {
			case jobs <- batch:
			case <-ctx.Done():
				return ctx.Err()
			}
			batch = &searchBatch{done: make(chan struct{})}
			size = min(size*2, maxBatch)
			return nil
		}
		wopts := walkOptions{hidden: opts.Hidden, noIgnore: opts.NoIgnore}
		err := walkTree(ctx, root, wopts, func(p, rel string, typ fs.FileMode) error {
			if typ.IsDir() {
				if s.excluded(rel) {
					return errSkipDir
				}
				return nil
			}
			if !typ.IsRegular() || s.excluded(rel) || !s.included(rel) {
				return nil
			}
			batch.files = append(batch.files, fileResult{path: p})
			if len(batch.files) < size {
				return nil
			}
			return send()
		})
		if err == nil && len(batch.files) > 0 {
			_ = send()
		}
	}()
	for range f.workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var bufs scanBufs
			for b := range jobs {
				for i := range b.files {
					if ctx.Err() != nil {
						break
					}
					s.scan(&b.files[i], &bufs)
				}
				close(b.done)
			}
		}()
	}
	defer func() {
		cancel()
		wg.Wait() // nothing outlives Search
	}()

	var sum Summary
	for b := range order {
		select {
		case <-b.done:
		case <-ctx.Done():
			return sum, ctx.Err()
		}
		for i := range b.files {
			if err := s.collect(&b.files[i], &sum, emit); err != nil {
				cancel()
				if errors.Is(err, errStopWalk) {
					return sum, nil
				}
				return sum, err
			}
		}
	}
	if err := ctx.Err(); err != nil {
		return sum, err
	}
	return sum, nil
}

// maxBatch is the most files one batch of a search holds.
const maxBatch = 64

// searchBatch is files to search, consecutive in walk order; once done
// is closed, each holds what was found in it.
type searchBatch struct {
	files []fileResult
	done  chan struct{}
}

// fileResult is what searching one file found.
type fileResult struct {
	path    string
	scanned bool
	skipped bool
	matches []Match
}

// collect adds a searched file to the summary and emits its matches; it
// returns errStopWalk when MaxMatches is reached.
func (s *searcher) collect(job *fileResult, sum *Summary, emit func(Match) error) error {
	if job.scanned {
		sum.FilesScanned++
	}
	if job.skipped {
		sum.FilesSkipped++
	}
	for i, m := range job.matches {
		if sum.Matches == int64(s.max) {
			sum.Truncated = true
			return errStopWalk
		}
		if i == 0 {
			sum.FilesMatched++
		}
		sum.Matches++
		if err := emit(m); err != nil {
			return err
		}
	}
	return nil
}

// searcher holds what every file of one search needs.
type searcher struct {
	m         *matcher
	ctxLines  int
	max       int
	binary    bool
	include   []string
	exclude   []string
	wholeFile int64
}

func (f *FS) newSearcher(opts SearchOptions) (*searcher, string, fs.FileInfo, error) {
	switch {
	case opts.Pattern == "":
		return nil, "", nil, errs.New(errs.Invalid, "pattern is empty; give a regular expression or, with fixed_string, a literal")
	case len(opts.Pattern) > maxPatternLen:
		return nil, "", nil, errs.New(errs.Invalid, "pattern is %d bytes; the limit is %d", len(opts.Pattern), maxPatternLen)
	case opts.Context < 0 || opts.Context > MaxContextLines:
		return nil, "", nil, errs.New(errs.Invalid, "context_lines %d is out of range: give 0 to %d", opts.Context, MaxContextLines)
	case opts.MaxMatches < 0 || opts.MaxMatches > MaxMaxMatches:
		return nil, "", nil, errs.New(errs.Invalid, "max_matches %d is out of range: give 0 (default %d) to %d", opts.MaxMatches, DefaultMaxMatches, MaxMaxMatches)
	case len(opts.Include)+len(opts.Exclude) > maxGlobs:
		return nil, "", nil, errs.New(errs.Invalid, "%d include/exclude globs; the limit is %d", len(opts.Include)+len(opts.Exclude), maxGlobs)
	}
	if opts.Fixed && strings.ContainsAny(opts.Pattern, "\n") {
		return nil, "", nil, errs.New(errs.Invalid, "pattern contains a newline, but search matches one line at a time; search for one line of it")
	}
	s := &searcher{ctxLines: opts.Context, max: opts.MaxMatches, binary: opts.Binary, wholeFile: f.searchWholeFile}
	if s.max == 0 {
		s.max = DefaultMaxMatches
	}
	for _, g := range opts.Include {
		if neg, ok := strings.CutPrefix(g, "!"); ok {
			s.exclude = append(s.exclude, neg)
		} else {
			s.include = append(s.include, g)
		}
	}
	s.exclude = append(s.exclude, opts.Exclude...)
	for i, globs := range [][]string{s.include, s.exclude} {
		for j, g := range globs {
			g = strings.TrimSuffix(strings.TrimPrefix(g, "/"), "/")
			if g == "" || !doublestar.ValidatePattern(g) {
				which := [...]string{"include", "exclude"}[i]
				return nil, "", nil, errs.New(errs.Invalid, "%s glob %q is not a valid pattern (use *, ?, [...], {a,b} and **)", which, globs[j])
			}
			globs[j] = g
		}
	}
	m, err := compileMatcher(opts.Pattern, opts.Fixed, opts.IgnoreCase)
	if err != nil {
		return nil, "", nil, err
	}
	s.m = m

	path := opts.Path
	if path == "" {
		path = f.workspace
	}
	root, err := f.Resolve(path)
	if err != nil {
		return nil, "", nil, err
	}
	fi, err := os.Stat(root)
	if err != nil {
		return nil, "", nil, f.pathError(root, err)
	}
	if !fi.IsDir() && !fi.Mode().IsRegular() {
		return nil, "", nil, errs.New(errs.Precondition, "%s is not a regular file or a directory; it cannot be searched", root)
	}
	return s, root, fi, nil
}

// globHit reports whether rel (or, for a glob without "/", its last
// component) matches one of globs.
func globHit(globs []string, rel string) bool {
	base := rel[strings.LastIndexByte(rel, '/')+1:]
	for _, g := range globs {
		target := rel
		if !strings.Contains(g, "/") {
			target = base
		}
		if doublestar.MatchUnvalidated(g, target) {
			return true
		}
	}
	return false
}

func (s *searcher) excluded(rel string) bool { return len(s.exclude) > 0 && globHit(s.exclude, rel) }
func (s *searcher) included(rel string) bool { return len(s.include) == 0 || globHit(s.include, rel) }

// matcher finds lines matching the pattern.
type matcher struct {
	re  *regexp.Regexp
	lit []byte // non-nil: the pattern is this literal; use bytes.Index
	// required is a literal every match contains: a buffer without it
	// cannot match (nil: none known).
	required []byte
	// requiredFold is, for a case-insensitive pattern, lower-case ASCII
	// text every match contains in some case: a buffer whose ASCII
	// lower-case form lacks it cannot match (nil: none known).
	requiredFold []byte
	// perLine: the pattern uses \A or \z, so matching the whole buffer
	// would differ from matching line by line.
	perLine bool
}

func compileMatcher(pattern string, fixed, ignoreCase bool) (*matcher, error) {
	expr := pattern
	if fixed {
		expr = regexp.QuoteMeta(pattern)
	}
	flags := "(?m)"
	if ignoreCase {
		flags = "(?mi)"
	}
	re, err := regexp.Compile(flags + expr)
	if err != nil {
		msg := strings.TrimPrefix(err.Error(), "error parsing regexp: ")
		return nil, errs.New(errs.Invalid, "invalid regular expression: %s (RE2 syntax; set fixed_string to search for the text literally)", msg)
	}
	m := &matcher{re: re}
	if fixed && !ignoreCase {
		m.lit = []byte(pattern)
		return m, nil
	}
	tree, err := syntax.Parse(flags+expr, syntax.Perl)
	if err != nil {
		return m, nil
	}
	tree = tree.Simplify()
	if tree.Op == syntax.OpLiteral && tree.Flags&syntax.FoldCase == 0 {
		m.lit = []byte(string(tree.Rune))
		return m, nil
	}
	m.required = requiredLiteral(tree)
	if m.required == nil {
		m.requiredFold = foldPrefilter(requiredFoldLiteral(tree))
	}
	m.perLine = hasTextAnchor(tree)
	return m, nil
}

// requiredLiteral returns a literal that every match of re contains, the
// longest it finds cheaply, or nil.
func requiredLiteral(re *syntax.Regexp) []byte {
	switch re.Op {
	case syntax.OpLiteral:
		if re.Flags&syntax.FoldCase != 0 {
			return nil
		}
		return []byte(string(re.Rune))
	case syntax.OpCapture, syntax.OpPlus:
		return requiredLiteral(re.Sub[0])
	case syntax.OpRepeat:
		if re.Min >= 1 {
			return requiredLiteral(re.Sub[0])
		}
	case syntax.OpConcat:
		var best []byte
		for _, sub := range re.Sub {
			if l := requiredLiteral(sub); len(l) > len(best) {
				best = l
			}
		}
		return best
	}
	return nil
}

// requiredFoldLiteral is requiredLiteral for case-insensitive literals:
// the runes of the longest one every match contains, in some case.
func requiredFoldLiteral(re *syntax.Regexp) []rune {
	switch re.Op {
	case syntax.OpLiteral:
		if re.Flags&syntax.FoldCase != 0 {
			return re.Rune
		}
	case syntax.OpCapture, syntax.OpPlus:
		return requiredFoldLiteral(re.Sub[0])
	case syntax.OpRepeat:
		if re.Min >= 1 {
			return requiredFoldLiteral(re.Sub[0])
		}
	case syntax.OpConcat:
		var best []rune
		for _, sub := range re.Sub {
			if l := requiredFoldLiteral(sub); len(l) > len(best) {
				best = l
			}
		}
		return best
	}
	return nil
}

// foldPrefilter picks from a case-insensitive literal the longest run that
// ASCII lower-casing matches exactly as (?i) does: ASCII only (é also
// matches É), and without k and s, which also match the Kelvin sign and
// the long s. It returns that run in lower case, or nil if it is too
// short to be worth checking.
func foldPrefilter(lit []rune) []byte {
	var best, cur []byte
	for _, r := range append(lit, 0) {
		lr := unicode.ToLower(r)
		if r == 0 || r >= utf8.RuneSelf || lr == 'k' || lr == 's' {
			if len(cur) > len(best) {
				best = cur
			}
			cur = nil
			continue
		}
		cur = append(cur, byte(lr))
	}
	if len(best) < 3 {
		return nil
	}
	return best
}

// asciiLower writes b with ASCII letters lower-cased into dst (reusing
// its capacity) and returns it.
func asciiLower(dst, b []byte) []byte {
	if cap(dst) < len(b) {
		dst = make([]byte, len(b), len(b)+len(b)/4)
	}
	dst = dst[:len(b)]
	for i, c := range b {
		if 'A' <= c && c <= 'Z' {
			c += 'a' - 'A'
		}
		dst[i] = c
	}
	return dst
}

func hasTextAnchor(re *syntax.Regexp) bool {
	if re.Op == syntax.OpBeginText || re.Op == syntax.OpEndText {
		return true
	}
	for _, sub := range re.Sub {
		if hasTextAnchor(sub) {
			return true
		}
	}
	return false
}

// index returns the position of the first match in b, or -1.
func (m *matcher) index(b []byte) (start, end int) {
	if m.lit != nil {
		i := bytes.Index(b, m.lit)
		if i < 0 {
			return -1, -1
		}
		return i, i + len(m.lit)
	}
	loc := m.re.FindIndex(b)
	if loc == nil {
		return -1, -1
	}
	return loc[0], loc[1]
}

func (m *matcher) matchLine(line []byte) bool {
	if m.lit != nil {
		return bytes.Contains(line, m.lit)
	}
	return m.re.Match(line)
}

// scanBufs are the buffers one worker reuses from file to file.
type scanBufs struct {
	data  []byte // the file's content
	lower []byte // its ASCII lower-case form, for requiredFold
}

// scan searches the file of job.
func (s *searcher) scan(job *fileResult, bufs *scanBufs) {
	limit := s.wholeFile
	if s.m.perLine {
		limit = -1 // every file is "big": scan it line by line
	}
	data, big, err := readSmall(job.path, bufs.data[:0], limit)
	if cap(data) > cap(bufs.data) {
		bufs.data = data
	}
	switch {
	case err != nil:
		job.skipped = true
		return
	case big:
		file, err := os.Open(job.path)
		if err != nil {
			job.skipped = true
			return
		}
		defer file.Close()
		s.scanLines(job, file)
		return
	}
	if !s.binary && bytes.IndexByte(data[:min(len(data), binarySniff)], 0) >= 0 {
		job.skipped = true
		return
	}
	job.scanned = true
	if s.m.required != nil && !bytes.Contains(data, s.m.required) {
		return
	}
	if s.m.requiredFold != nil {
		bufs.lower = asciiLower(bufs.lower, data)
		if !bytes.Contains(bufs.lower, s.m.requiredFold) {
			return
		}
	}
	job.matches = s.scanBuffer(job.path, data)
}

// lineRef is a matching line of a buffer: its number and its bounds.
type lineRef struct {
	no         int64
	start, end int // end is the index of its '\n', or len(buf)
}

// scanBuffer finds the matching lines of a whole file held in buf. It runs
// the pattern over the whole buffer, not line by line, and only checks a
// line on its own when a match crosses a newline.
func (s *searcher) scanBuffer(path string, buf []byte) []Match {
	var refs []lineRef
	pos, counted := 0, 0
	var no int64 = 1
	for pos < len(buf) && len(refs) <= s.max {
		ms, me := s.m.index(buf[pos:])
		if ms < 0 {
			break
		}
		ms, me = ms+pos, me+pos
		ls := bytes.LastIndexByte(buf[:ms], '\n') + 1
		if ms == len(buf) && ls == len(buf) {
			break // an empty match after the final newline: not a line
		}
		le := len(buf)
		if i := bytes.IndexByte(buf[ms:], '\n'); i >= 0 {
			le = ms + i
		}
		if me > le && !s.m.matchLine(buf[ls:le]) {
			pos = le + 1 // the match crossed a newline: not a line match
			continue
		}
		no += int64(bytes.Count(buf[counted:ls], []byte{'\n'}))
		counted = ls
		refs = append(refs, lineRef{no: no, start: ls, end: le})
		pos = le + 1
	}
	if len(refs) == 0 {
		return nil
	}
	matches := make([]Match, len(refs))
	var shown int64 // last line number reported, as match or context
	for i, r := range refs {
		m := Match{Path: path, Line: r.no, Text: s.show(buf[r.start:r.end], true)}
		if c := min(int64(s.ctxLines), r.no-1-shown); c > 0 {
			m.Before = make([]string, c)
			p := r.start
			for j := c - 1; j >= 0; j-- {
				e := p - 1
				st := bytes.LastIndexByte(buf[:e], '\n') + 1
				m.Before[j] = s.show(buf[st:e], false)
				p = st
			}
		}
		shown = r.no
		limit := int64(s.ctxLines)
		if i+1 < len(refs) {
			limit = min(limit, refs[i+1].no-r.no-1)
		}
		for p := r.end; int64(len(m.After)) < limit && p+1 < len(buf); {
			st := p + 1
			e := len(buf)
			if k := bytes.IndexByte(buf[st:], '\n'); k >= 0 {
				e = st + k
			}
			m.After = append(m.After, s.show(buf[st:e], false))
			shown++
			p = e
		}
		matches[i] = m
	}
	return matches
}

// scanLines searches a file line by line: for files too large to hold in
// memory and for patterns that must see one line at a time.
func (s *searcher) scanLines(job *fileResult, file *os.File) {
	br := bufio.NewReaderSize(file, 256<<10)
	if !s.binary {
		head, _ := br.Peek(binarySniff)
		if bytes.IndexByte(head, 0) >= 0 {
			job.skipped = true
			return
		}
	}
	job.scanned = true
	type ctxLine struct {
		no   int64
		text string
	}
	var ring []ctxLine // the last ctxLines lines, oldest first
	var pending *Match
	var shown int64
	var long []byte
	flush := func() {
		if pending != nil {
			job.matches = append(job.matches, *pending)
			pending = nil
		}
	}
	for no := int64(1); ; no++ {
		line, err := br.ReadSlice('\n')
		if errors.Is(err, bufio.ErrBufferFull) {
			long = append(long[:0], line...)
			for errors.Is(err, bufio.ErrBufferFull) {
				line, err = br.ReadSlice('\n')
				long = append(long, line...)
				if len(long) > maxLineBytes {
					flush()
					job.skipped = true
					return
				}
			}
			line = long
		}
		if len(line) == 0 && err != nil {
			break
		}
		line = bytes.TrimSuffix(line, []byte{'\n'})
		if s.m.matchLine(line) {
			flush()
			if len(job.matches) > s.max {
				return
			}
			m := Match{Path: job.path, Line: no, Text: s.show(line, true)}
			for _, c := range ring {
				if c.no > shown {
					m.Before = append(m.Before, c.text)
				}
			}
			shown = no
			pending = &m
		} else if pending != nil && len(pending.After) < s.ctxLines {
			pending.After = append(pending.After, s.show(line, false))
			shown = no
		} else if pending != nil {
			flush()
			if len(job.matches) > s.max {
				return
			}
		}
		if s.ctxLines > 0 {
			if len(ring) == s.ctxLines {
				ring = append(ring[:0], ring[1:]...)
			}
			ring = append(ring, ctxLine{no, s.show(line, false)})
		}
		if err != nil {
			break
		}
	}
	flush()
}

// show renders a line for a Match: without "\r", invalid UTF-8 replaced,
// and when longer than SearchLineLen cut around the first match (for a
// matching line) with markers saying how much was left out.
func (s *searcher) show(line []byte, matching bool) string {
	line = bytes.TrimSuffix(line, []byte{'\r'})
	if len(line) <= SearchLineLen {
		return strings.ToValidUTF8(string(line), "\uFFFD")
	}
	start := 0
	if matching {
		if ms, me := s.m.index(line); ms >= 0 && me > SearchLineLen {
			start = max(0, ms-SearchLineLen/4)
		}
	}
	for start > 0 && !utf8.RuneStart(line[start]) {
		start--
	}
	end := min(len(line), start+SearchLineLen)
	for end < len(line) && end > start && !utf8.RuneStart(line[end]) {
		end--
	}
	var sb strings.Builder
	if start > 0 {
		fmt.Fprintf(&sb, "[… %d bytes] ", start)
	}
	sb.WriteString(strings.ToValidUTF8(string(line[start:end]), "\uFFFD"))
	if end < len(line) {
		fmt.Fprintf(&sb, "… [line truncated, %d more bytes]", len(line)-end)
	}
	return sb.String()
}
