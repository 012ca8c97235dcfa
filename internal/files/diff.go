package files

import (
	"fmt"
	"strings"
)

// MaxDiffBytes bounds the unified diff Edit returns; a longer diff is cut
// with a note saying how many lines were left out.
const MaxDiffBytes = 256 << 10

// diffContext is the number of unchanged lines around each hunk.
const diffContext = 3

type opKind byte

const (
	opEqual  opKind = ' '
	opDelete opKind = '-'
	opInsert opKind = '+'
)

// diffOp is one line of an edit script: a line of a kept, a line of a
// deleted, or a line of b inserted. ai and bi are the positions in a and b
// at this point of the script.
type diffOp struct {
	kind   opKind
	ai, bi int
}

// splitLines splits s into lines, each keeping its "\n"; the last line
// lacks one when s does not end with a newline.
func splitLines(s string) []string {
	if s == "" {
		return nil
	}
	lines := make([]string, 0, strings.Count(s, "\n")+1)
	for len(s) > 0 {
		i := strings.IndexByte(s, '\n')
		if i < 0 {
			lines = append(lines, s)
			break
		}
		lines = append(lines, s[:i+1])
		s = s[i+1:]
	}
	return lines
}

// lineDiff returns an edit script turning a into b: the common prefix and
// suffix are kept, and the middle is diffed with Myers' O(ND) algorithm. If
// the middle needs more edits than is affordable, it is replaced whole: the
// script is still correct, only not minimal.
func lineDiff(a, b []string) []diffOp { return lineDiffMax(a, b, 2000) }

// lineDiffMax is lineDiff with a cap on the number of edits Myers' algorithm
// may look for (lowered further for long inputs).
func lineDiffMax(a, b []string, maxD int) []diffOp {
	// Intern lines so that comparisons are integer compares.
	ids := make(map[string]int32, len(a)+len(b))
	intern := func(lines []string) []int32 {
		out := make([]int32, len(lines))
		for i, l := range lines {
			id, ok := ids[l]
			if !ok {
				id = int32(len(ids))
				ids[l] = id
			}
			out[i] = id
		}
		return out
	}
	x, y := intern(a), intern(b)

	pre := 0
	for pre < len(x) && pre < len(y) && x[pre] == y[pre] {
		pre++
	}
	suf := 0
	for suf < len(x)-pre && suf < len(y)-pre && x[len(x)-1-suf] == y[len(y)-1-suf] {
		suf++
	}
	ops := make([]diffOp, 0, len(a)+len(b))
	for i := range pre {
		ops = append(ops, diffOp{opEqual, i, i})
	}
	mx, my := x[pre:len(x)-suf], y[pre:len(y)-suf]
	// Keep the work near 50M steps and the trace near 4M entries.
	if n := len(mx) + len(my); n > 0 {
		maxD = min(maxD, max(50_000_000/n, 64))
	}
	mid, ok := myers(mx, my, maxD)
	if !ok {
		mid = mid[:0]
		for i := range mx {
			mid = append(mid, diffOp{opDelete, i, 0})
		}
		for j := range my {
			mid = append(mid, diffOp{opInsert, len(mx), j})
		}
	}
	for _, op := range mid {
		ops = append(ops, diffOp{op.kind, op.ai + pre, op.bi + pre})
	}
	for i := range suf {
		ops = append(ops, diffOp{opEqual, len(x) - suf + i, len(y) - suf + i})
	}
	return ops
}

// myers computes a shortest edit script from a to b, giving up (ok false)
// when it needs more than maxD insertions and deletions.
func myers(a, b []int32, maxD int) (ops []diffOp, ok bool) {
	n, m := len(a), len(b)
	maxD = min(maxD, n+m)
	off := maxD + 1
	v := make([]int32, 2*maxD+3)
	var trace [][]int32 // trace[d] is v[-d..d] at the start of round d
	for d := 0; d <= maxD; d++ {
		snap := make([]int32, 2*d+1)
		copy(snap, v[off-d:off+d+1])
		trace = append(trace, snap)
		for k := -d; k <= d; k += 2 {
			var xi int
			if k == -d || (k != d && v[off+k-1] < v[off+k+1]) {
				xi = int(v[off+k+1])
			} else {
				xi = int(v[off+k-1]) + 1
			}
			yi := xi - k
			for xi < n && yi < m && a[xi] == b[yi] {
				xi++
				yi++
			}
			v[off+k] = int32(xi)
			if xi >= n && yi >= m {
				return backtrack(trace, n, m, d), true
			}
		}
	}
	return nil, false
}

func backtrack(trace [][]int32, n, m, D int) []diffOp {
	var rev []diffOp
	x, y := n, m
	for d := D; d > 0; d-- {
		v := trace[d]
		at := func(k int) int { return int(v[k+d]) }
		k := x - y
		var pk int
		if k == -d || (k != d && at(k-1) < at(k+1)) {
			pk = k + 1
		} else {
			pk = k - 1
		}
		px := at(pk)
		py := px - pk
		for x > px && y > py {
			x--
			y--
			rev = append(rev, diffOp{opEqual, x, y})
		}
		if x == px {
			y--
			rev = append(rev, diffOp{opInsert, x, y})
		} else {
			x--
			rev = append(rev, diffOp{opDelete, x, y})
		}
	}
	for x > 0 && y > 0 {
		x--
		y--
		rev = append(rev, diffOp{opEqual, x, y})
	}
	ops := make([]diffOp, len(rev))
	for i, op := range rev {
		ops[len(rev)-1-i] = op
	}
	return ops
}

// unifiedDiff returns the unified diff (diff -u style, 3 lines of context)
// from old to new, both labelled path; "" when they are equal. A diff
// longer than MaxDiffBytes is cut with a note.
func unifiedDiff(path, old, new string) string {
	if old == new {
		return ""
	}
	a, b := splitLines(old), splitLines(new)
	return formatDiff(path, a, b, lineDiff(a, b))
}

// formatDiff renders an edit script from a to b as a unified diff.
func formatDiff(path string, a, b []string, ops []diffOp) string {

	var sb strings.Builder
	fmt.Fprintf(&sb, "--- %s\n+++ %s\n", path, path)
	cut := false
	written := 0 // diff lines written, to report how many were cut
	totalLines := 0
	line := func(kind opKind, text string) {
		totalLines++
		if cut {
			return
		}
		if sb.Len()+len(text)+2 > MaxDiffBytes {
			cut = true
			return
		}
		sb.WriteByte(byte(kind))
		sb.WriteString(text)
		if !strings.HasSuffix(text, "\n") {
			sb.WriteString("\n\\ No newline at end of file\n")
		}
		written++
	}

	for i := 0; i < len(ops); {
		// Find the next change.
		for i < len(ops) && ops[i].kind == opEqual {
			i++
		}
		if i == len(ops) {
			break
		}
		start := max(i-diffContext, 0)
		// Extend the hunk while changes are within 2*context of each other.
		end := i
		for j := i; j < len(ops); j++ {
			if ops[j].kind != opEqual {
				end = j
				continue
			}
			if j-end > 2*diffContext {
				break
			}
		}
		stop := min(end+diffContext+1, len(ops))
		var na, nb int
		for _, op := range ops[start:stop] {
			if op.kind != opInsert {
				na++
			}
			if op.kind != opDelete {
				nb++
			}
		}
		header := fmt.Sprintf("@@ -%s +%s @@\n", hunkRange(ops[start].ai, na), hunkRange(ops[start].bi, nb))
		if !cut && sb.Len()+len(header) > MaxDiffBytes {
			cut = true
		}
		if !cut {
			sb.WriteString(header)
		}
		for _, op := range ops[start:stop] {
			switch op.kind {
			case opEqual, opDelete:
				line(op.kind, a[op.ai])
			case opInsert:
				line(op.kind, b[op.bi])
			}
		}
		i = stop
	}
	if cut {
		fmt.Fprintf(&sb, "… diff cut at %d KiB; %d more lines not shown\n", MaxDiffBytes>>10, totalLines-written)
	}
	return sb.String()
}

// hunkRange formats the start,count of a hunk header the way diff -u does:
// 1-based start, count omitted when 1, and start the line before when the
// range is empty.
func hunkRange(start, count int) string {
	switch count {
	case 0:
		return fmt.Sprintf("%d,0", start)
	case 1:
		return fmt.Sprintf("%d", start+1)
	}
	return fmt.Sprintf("%d,%d", start+1, count)
}
