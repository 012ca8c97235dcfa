package files

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"slices"
	"strings"

	"github.com/devdepot-ai/agentd/internal/errs"
)

// MaxEdits is the most replacements one Edit call may carry.
const MaxEdits = 1_000

// Replacement is one exact string replacement.
type Replacement struct {
	// Old is the text to find, exactly, whitespace included. Not empty.
	Old string
	// New is the text to put in its place.
	New string
	// ReplaceAll replaces every occurrence; otherwise Old must occur
	// exactly once.
	ReplaceAll bool
}

// EditOptions qualifies an Edit.
type EditOptions struct {
	// ExpectedSHA256, if set, is the hex sha256 the file must have before
	// the edit; otherwise the edit fails with errs.Precondition.
	ExpectedSHA256 string
	// DryRun computes the result and the diff but changes nothing.
	DryRun bool
}

// EditResult tells what an edit changed.
type EditResult struct {
	Path         string // absolute path of the file
	Replacements int    // occurrences replaced, over all edits
	Diff         string // unified diff of the change (cut past MaxDiffBytes)
	SHA256       string // hex sha256 of the file after the edit
}

// Edit applies exact string replacements to the text file at path, in
// order, each seeing the result of the previous ones, and writes the
// result atomically (as Write does): all of them or none. Each Old must
// occur exactly once unless ReplaceAll is set. When an Old is missing the
// error names the closest line and says if whitespace or line endings are
// what differs; when it is ambiguous the error gives the lines it is on.
func (f *FS) Edit(ctx context.Context, path string, edits []Replacement, opts EditOptions) (EditResult, error) {
	p, err := f.Resolve(path)
	if err != nil {
		return EditResult{}, err
	}
	if len(edits) == 0 {
		return EditResult{}, errs.New(errs.Invalid, "no edits given: pass at least one old_string/new_string pair")
	}
	if len(edits) > MaxEdits {
		return EditResult{}, errs.New(errs.Invalid, "%d edits in one request; the limit is %d", len(edits), MaxEdits)
	}
	for i, e := range edits {
		switch {
		case e.Old == "":
			return EditResult{}, errs.New(errs.Invalid, "%sold_string is empty; give the exact text to replace (to create or overwrite a file, use Write)", editPrefix(i, len(edits)))
		case e.Old == e.New:
			return EditResult{}, errs.New(errs.Invalid, "%sold_string and new_string are the same; nothing would change", editPrefix(i, len(edits)))
		}
	}
	expected, err := checkExpected(opts.ExpectedSHA256)
	if err != nil {
		return EditResult{}, err
	}
	target, fi, err := f.followLinks(p)
	if err != nil {
		return EditResult{}, err
	}
	if fi == nil {
		return EditResult{}, errs.New(errs.NotFound, "%s does not exist; use Write to create it", p)
	}
	if fi.IsDir() || !fi.Mode().IsRegular() || !opts.DryRun {
		if err := f.checkWritableFile(target, fi); err != nil {
			return EditResult{}, err
		}
	}
	if fi.Size() > MaxEditSize {
		return EditResult{}, errs.New(errs.Exhausted, "%s is %d bytes; Edit works on files up to %d MiB: use Write to replace it", p, fi.Size(), MaxEditSize>>20)
	}
	data, err := os.ReadFile(target)
	if err != nil {
		return EditResult{}, f.pathError(target, err)
	}
	if i := bytes.IndexByte(data[:min(len(data), binarySniff)], 0); i >= 0 {
		return EditResult{}, errs.New(errs.Precondition, "%s looks like a binary file (NUL byte at offset %d); Edit works on text: use Write to replace it", p, i)
	}
	sum := sha256.Sum256(data)
	if expected == Absent {
		return EditResult{}, errs.New(errs.Precondition, "%s exists but expected_sha256 says it must be absent", p)
	}
	if expected != "" && hex.EncodeToString(sum[:]) != expected {
		return EditResult{}, errs.New(errs.Precondition, "%s has changed: its sha256 is %s, not the expected %s; read it again before editing", p, hex.EncodeToString(sum[:]), expected)
	}

	old := string(data)
	content, count, err := applyEdits(p, old, edits)
	if err != nil {
		return EditResult{}, err
	}
	newSum := sha256.Sum256([]byte(content))
	res := EditResult{
		Path:         p,
		Replacements: count,
		Diff:         unifiedDiff(p, old, content),
		SHA256:       hex.EncodeToString(newSum[:]),
	}
	if opts.DryRun || content == old {
		return res, nil
	}
	if err := ctx.Err(); err != nil {
		return EditResult{}, err
	}
	tmp, err := f.createTemp(target)
	if err != nil {
		return EditResult{}, err
	}
	defer tmp.abort()
	if _, err := tmp.Write([]byte(content)); err != nil {
		return EditResult{}, err
	}
	if err := tmp.commit(fi.Mode()&modeBits, fi, true, false); err != nil {
		return EditResult{}, err
	}
	return res, nil
}

// applyEdits applies edits to content in order, with the semantics of
// strings.Replace: n = 1 for a unique Old, -1 with ReplaceAll.
func applyEdits(path, content string, edits []Replacement) (string, int, error) {
	total := 0
	for i, e := range edits {
		n := strings.Count(content, e.Old)
		switch {
		case n == 0:
			return "", 0, notFoundError(path, content, e.Old, editPrefix(i, len(edits)), i > 0)
		case n > 1 && !e.ReplaceAll:
			return "", 0, errs.New(errs.Precondition, "%sold_string occurs %d times in %s (%s); add surrounding lines to make it unique, or set replace_all",
				editPrefix(i, len(edits)), n, path, occurrenceLines(content, e.Old))
		}
		if e.ReplaceAll {
			content = strings.ReplaceAll(content, e.Old, e.New)
		} else {
			content = strings.Replace(content, e.Old, e.New, 1)
		}
		total += n
	}
	return content, total, nil
}

func editPrefix(i, n int) string {
	if n == 1 {
		return ""
	}
	return fmt.Sprintf("edit %d of %d: ", i+1, n)
}

// occurrenceLines lists the line numbers where old occurs (non-overlapping,
// as strings.Count counts), at most 10 of them: "lines 4, 19, 40".
func occurrenceLines(content, old string) string {
	var nums []string
	line, pos := 1, 0
	for len(nums) < 10 {
		i := strings.Index(content[pos:], old)
		if i < 0 {
			break
		}
		line += strings.Count(content[pos:pos+i], "\n")
		if n := fmt.Sprint(line); len(nums) == 0 || nums[len(nums)-1] != n {
			nums = append(nums, n)
		}
		line += strings.Count(old, "\n")
		pos += i + len(old)
	}
	s := strings.Join(nums, ", ")
	if strings.Contains(content[pos:], old) {
		s += ", …"
	}
	if len(nums) == 1 {
		return "all on line " + s
	}
	return "lines " + s
}

// notFoundError explains why old is not in content and what is closest.
func notFoundError(path, content, old, prefix string, afterEarlier bool) error {
	msg := prefix + "old_string not found in " + path
	note := ""
	if afterEarlier {
		note = " (line numbers are after the earlier edits of this request)"
	}
	lines := strings.Split(content, "\n")

	// Line endings.
	if strings.Contains(content, "\r\n") && strings.Contains(old, "\n") && !strings.Contains(old, "\r\n") &&
		strings.Contains(content, strings.ReplaceAll(old, "\n", "\r\n")) {
		return errs.New(errs.NotFound, "%s: the file has Windows line endings (\\r\\n) but old_string uses \\n; use \\r\\n in old_string and new_string", msg)
	}
	oldLines := strings.Split(strings.Trim(old, "\n"), "\n")
	if strings.Trim(old, "\n") == "" {
		return errs.New(errs.NotFound, "%s (old_string is only newlines)", msg)
	}

	// Whitespace.
	if at, n := matchIgnoringSpace(lines, oldLines); at >= 0 {
		return errs.New(errs.NotFound, "%s, but it matches %s if whitespace is ignored%s: check indentation (tabs or spaces) and trailing spaces. The file has:\n%s",
			msg, lineSpan(at, n), note, quoteLines(lines, at, n))
	}

	// Closest lines.
	at, n, score := closestLines(lines, oldLines)
	if at < 0 || score < 0.4 {
		return errs.New(errs.NotFound, "%s, and no line resembles it%s; read the file again (ReadLines) to see its current content", msg, strings.Replace(note, "line numbers are after", "compared after", 1))
	}
	return errs.New(errs.NotFound, "%s; closest match at %s (%.0f%% similar)%s:\n%s", msg, lineSpan(at, n), score*100, note, quoteLines(lines, at, n))
}

func lineSpan(at, n int) string {
	if n <= 1 {
		return fmt.Sprintf("line %d", at+1)
	}
	return fmt.Sprintf("lines %d-%d", at+1, at+n)
}

// quoteLines shows lines[at:at+n] (at most 6, each cut to 200 bytes) with
// their numbers.
func quoteLines(lines []string, at, n int) string {
	var sb strings.Builder
	for i := at; i < at+min(n, 6) && i < len(lines); i++ {
		fmt.Fprintf(&sb, "%6d\t%s\n", i+1, shorten(strings.ToValidUTF8(strings.TrimSuffix(lines[i], "\r"), "\uFFFD"), 200))
	}
	if n > 6 {
		fmt.Fprintf(&sb, "   …(%d more lines)\n", n-6)
	}
	return strings.TrimSuffix(sb.String(), "\n")
}

// squash collapses every run of whitespace to one space and trims the ends.
func squash(s string) string { return strings.Join(strings.Fields(s), " ") }

// matchIgnoringSpace finds where old (split in lines) matches lines when
// runs of whitespace count as one space: the first old line must end a
// file line, the last must start one, the ones between must equal. It
// returns the first line's index and the number of lines, or -1.
func matchIgnoringSpace(lines, old []string) (int, int) {
	k := len(old)
	if k > len(lines) {
		return -1, 0
	}
	sq := make([]string, k)
	for i, l := range old {
		sq[i] = squash(l)
	}
	if k == 1 && sq[0] == "" {
		return -1, 0
	}
	fileSq := make([]string, len(lines))
	for i, l := range lines {
		fileSq[i] = squash(l)
	}
	for at := 0; at+k <= len(lines); at++ {
		if k == 1 {
			if strings.Contains(fileSq[at], sq[0]) {
				return at, 1
			}
			continue
		}
		if !strings.HasSuffix(fileSq[at], sq[0]) || !strings.HasPrefix(fileSq[at+k-1], sq[k-1]) {
			continue
		}
		if slices.Equal(fileSq[at+1:at+k-1], sq[1:k-1]) {
			return at, k
		}
	}
	return -1, 0
}

// closestLines finds the window of len(old) lines most similar to old,
// line by line (bigram similarity of the trimmed lines). On a large file
// with a long old_string only the first non-blank line of old is compared,
// to bound the work.
func closestLines(lines, old []string) (at, n int, score float64) {
	k := len(old)
	first := 0
	for first < k && strings.TrimSpace(old[first]) == "" {
		first++
	}
	if first == k {
		return -1, 0, 0
	}
	if len(lines)*k > 2_000_000 {
		old, k = old[first:first+1], 1
		first = 0
	}
	oldGrams := make([][]uint16, k)
	for i, l := range old {
		oldGrams[i] = bigrams(strings.TrimSpace(l))
	}
	fileGrams := make([][]uint16, len(lines))
	for i, l := range lines {
		fileGrams[i] = bigrams(strings.TrimSpace(l))
	}
	at, score = -1, -1
	for i := 0; i+k <= len(lines) || (i == 0 && k > len(lines)); i++ {
		var sum float64
		for j := 0; j < k && i+j < len(lines); j++ {
			sum += dice(fileGrams[i+j], oldGrams[j])
		}
		if s := sum / float64(k); s > score {
			at, score = i, s
		}
	}
	if at < 0 {
		return -1, 0, 0
	}
	return at, min(k, len(lines)-at), score
}

// bigrams returns the sorted byte pairs of s; a one-byte s is one
// "pair" of itself, so that short lines still compare.
func bigrams(s string) []uint16 {
	if len(s) == 0 {
		return nil
	}
	if len(s) == 1 {
		return []uint16{uint16(s[0])}
	}
	g := make([]uint16, len(s)-1)
	for i := range g {
		g[i] = uint16(s[i])<<8 | uint16(s[i+1])
	}
	slices.Sort(g)
	return g
}

// dice is the Sørensen–Dice coefficient of two sorted bigram multisets:
// 1 for equal strings, 0 for nothing in common.
func dice(a, b []uint16) float64 {
	if len(a) == 0 && len(b) == 0 {
		return 1
	}
	common := 0
	for i, j := 0, 0; i < len(a) && j < len(b); {
		switch {
		case a[i] == b[j]:
			common++
			i++
			j++
		case a[i] < b[j]:
			i++
		default:
			j++
		}
	}
	return 2 * float64(common) / float64(len(a)+len(b))
}
