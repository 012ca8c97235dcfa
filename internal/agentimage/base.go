package agentimage

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"regexp"
	"strings"
)

// customBase is a user's Dockerfile split where the runner needs it: the
// last FROM becomes the runner's parent and the instructions after it run in
// the runner stage; everything before it is kept as written.
type customBase struct {
	directives []string // parser directives (# syntax=…), first in the file
	prelude    string   // before the first FROM: global ARGs, comments
	earlier    string   // the stages before the last one, verbatim
	flags      []string // the last FROM's flags (--platform=…)
	ref        string   // the last FROM's image (or stage)
	body       string   // the last stage's instructions, verbatim
	sum        string   // "sha256:…" of the whole text
}

var (
	directiveRE = regexp.MustCompile(`^#\s*(?i:(syntax|escape|check))\s*=\s*(.*?)\s*$`)
	heredocRE   = regexp.MustCompile(`<<(-?)["']?([A-Za-z_][A-Za-z0-9_]*)["']?`)
)

// instruction is one logical instruction of a Dockerfile: lines [start, end).
type instruction struct {
	start, end int
	words      []string
}

// parseBase splits a user's Dockerfile. It understands what can hide a FROM
// from a line-by-line reading: continuation lines (with comment lines inside
// them) and heredocs of RUN, COPY and ADD.
func parseBase(text string) (customBase, error) {
	text = strings.ReplaceAll(text, "\r\n", "\n")
	sum := sha256.Sum256([]byte(text))
	b := customBase{sum: "sha256:" + hex.EncodeToString(sum[:])}
	lines := strings.Split(strings.TrimRight(text, "\n"), "\n")

	i := 0
	for ; i < len(lines); i++ {
		m := directiveRE.FindStringSubmatch(lines[i])
		if m == nil {
			break
		}
		if strings.EqualFold(m[1], "escape") && m[2] != `\` {
			return customBase{}, fmt.Errorf("base Dockerfile: the escape directive %q is not supported (only \\)", m[2])
		}
		b.directives = append(b.directives, lines[i])
	}
	var froms []instruction
	for i < len(lines) {
		if t := strings.TrimSpace(lines[i]); t == "" || strings.HasPrefix(t, "#") {
			i++
			continue
		}
		in, err := scanInstruction(lines, i)
		if err != nil {
			return customBase{}, err
		}
		if strings.EqualFold(in.words[0], "FROM") {
			froms = append(froms, in)
		}
		i = in.end
	}
	if len(froms) == 0 {
		return customBase{}, errors.New("base Dockerfile: no FROM")
	}
	for _, f := range froms {
		if n := stageName(f.words); strings.HasPrefix(strings.ToLower(n), "agentd-") {
			return customBase{}, fmt.Errorf("base Dockerfile line %d: the stage name %s is reserved (agentd-… names agentd's stages)", f.start+1, n)
		}
	}
	last := froms[len(froms)-1]
	words := last.words[1:]
	for len(words) > 0 && strings.HasPrefix(words[0], "--") {
		b.flags = append(b.flags, words[0])
		words = words[1:]
	}
	if len(words) != 1 && (len(words) != 3 || !strings.EqualFold(words[1], "AS")) {
		return customBase{}, fmt.Errorf("base Dockerfile line %d: want FROM [--platform=…] IMAGE [AS NAME]", last.start+1)
	}
	b.ref = words[0]
	b.prelude = joinLines(lines[len(b.directives):froms[0].start])
	b.earlier = joinLines(lines[froms[0].start:last.start])
	b.body = joinLines(lines[last.end:])
	return b, nil
}

// scanInstruction reads the instruction that starts at lines[i].
func scanInstruction(lines []string, i int) (instruction, error) {
	in := instruction{start: i}
	var logical strings.Builder
	var docs [][]string
	for ; i < len(lines); i++ {
		t := strings.TrimSpace(lines[i])
		if i > in.start && (t == "" || strings.HasPrefix(t, "#")) {
			continue // a comment or blank line inside a continuation
		}
		part := strings.TrimRight(lines[i], " \t")
		cont := strings.HasSuffix(part, `\`)
		logical.WriteString(strings.TrimSuffix(part, `\`))
		logical.WriteByte(' ')
		docs = append(docs, heredocRE.FindAllStringSubmatch(part, -1)...)
		if !cont {
			i++
			break
		}
	}
	in.words = strings.Fields(logical.String())
	switch strings.ToUpper(in.words[0]) {
	case "RUN", "COPY", "ADD":
	default:
		docs = nil
	}
	for _, d := range docs {
		for ; i < len(lines); i++ {
			l := lines[i]
			if d[1] == "-" {
				l = strings.TrimLeft(l, "\t")
			}
			if l == d[2] {
				break
			}
		}
		if i == len(lines) {
			return instruction{}, fmt.Errorf("base Dockerfile line %d: the heredoc <<%s has no end", in.start+1, d[2])
		}
		i++
	}
	in.end = i
	return in, nil
}

// stageName is the AS name of a FROM instruction's words, or "".
func stageName(words []string) string {
	for j := 2; j+1 < len(words); j++ {
		if strings.EqualFold(words[j], "AS") {
			return words[j+1]
		}
	}
	return ""
}

// joinLines joins lines without the blank ones at either end; "" or text
// ending in a newline.
func joinLines(lines []string) string {
	s := strings.Trim(strings.Join(lines, "\n"), "\n")
	if strings.TrimSpace(s) == "" {
		return ""
	}
	return s + "\n"
}
