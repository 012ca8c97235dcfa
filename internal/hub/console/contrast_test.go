package console

import (
	"fmt"
	"math"
	"regexp"
	"strconv"
	"testing"
)

// luminance is a #rrggbb colour's relative luminance (WCAG 2).
func luminance(t *testing.T, hex string) float64 {
	t.Helper()
	if len(hex) != 7 || hex[0] != '#' {
		t.Fatalf("colour %q: want #rrggbb", hex)
	}
	var l [3]float64
	for i := range l {
		v, err := strconv.ParseUint(hex[1+2*i:3+2*i], 16, 8)
		if err != nil {
			t.Fatalf("colour %q: %v", hex, err)
		}
		c := float64(v) / 255
		if c <= 0.03928 {
			l[i] = c / 12.92
		} else {
			l[i] = math.Pow((c+0.055)/1.055, 2.4)
		}
	}
	return 0.2126*l[0] + 0.7152*l[1] + 0.0722*l[2]
}

func contrast(t *testing.T, a, b string) float64 {
	la, lb := luminance(t, a), luminance(t, b)
	return (max(la, lb) + 0.05) / (min(la, lb) + 0.05)
}

// TestContrast checks the colour pairs the console's CSS and plots use
// against WCAG AA: 4.5:1 for text, 3:1 for focus rings, input borders and
// plot bars. The colours are read from the files served.
func TestContrast(t *testing.T) {
	t.Parallel()
	css, err := staticFS.ReadFile("static/console.css")
	if err != nil {
		t.Fatal(err)
	}
	vars := map[string]string{"white": "#ffffff"}
	for _, m := range regexp.MustCompile(`--([a-z0-9-]+):\s*(#[0-9a-fA-F]{6})`).FindAllStringSubmatch(string(css), -1) {
		vars[m[1]] = m[2]
	}
	lit := func(re string) string {
		m := regexp.MustCompile(re).FindSubmatch(css)
		if m == nil {
			t.Fatalf("console.css lacks %s", re)
		}
		return string(m[1])
	}
	vars["gap-bg"] = lit(`\.gap \{[^}]*background: (#[0-9a-fA-F]{6})`)
	vars["input-border"] = lit(`input, select \{[^}]*border: 1px solid (#[0-9a-fA-F]{6})`)

	type pair struct {
		what, fg, bg string
		min          float64
	}
	pairs := []pair{
		{"text", "fg", "white", 4.5}, {"muted text", "muted", "white", 4.5}, {"muted on a card", "muted", "bg2", 4.5},
		{"links", "accent", "white", 4.5}, {"links on a card", "accent", "bg2", 4.5},
		{"online", "ok", "white", 4.5}, {"online on a card", "ok", "bg2", 4.5},
		{"errors", "bad", "white", 4.5}, {"errors on a card", "bad", "bg2", 4.5},
		{"warnings", "warn", "white", 4.5}, {"warnings on a card", "warn", "bg2", 4.5}, {"an output gap", "warn", "gap-bg", 4.5},
		{"buttons", "white", "accent", 4.5}, {"danger buttons", "white", "bad", 4.5}, {"header", "white", "head", 4.5},
		{"focus ring", "focus", "white", 3}, {"focus ring on a card", "focus", "bg2", 3}, {"focus ring in the header", "focus-dark", "head", 3},
		{"input border", "input-border", "white", 3},
	}
	plotTmpl, err := templateFS.ReadFile("templates/_plot.html")
	if err != nil {
		t.Fatal(err)
	}
	for i, m := range regexp.MustCompile(`<(text|rect)[^>]*fill="(#[0-9a-fA-F]{6})"`).FindAllSubmatch(plotTmpl, -1) {
		name := fmt.Sprintf("plot %s %d", m[1], i)
		vars[name] = string(m[2])
		need := 4.5
		if string(m[1]) == "rect" {
			need = 3
		}
		pairs = append(pairs, pair{name, name, "white", need})
	}
	for _, p := range pairs {
		fg, okf := vars[p.fg]
		bg, okb := vars[p.bg]
		if !okf || !okb {
			t.Errorf("%s: console.css has no colour %s or %s", p.what, p.fg, p.bg)
			continue
		}
		if c := contrast(t, fg, bg); c < p.min {
			t.Errorf("%s: %s on %s has contrast %.2f, want at least %.1f", p.what, fg, bg, c, p.min)
		}
	}
}
