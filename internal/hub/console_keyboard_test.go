package hub_test

import (
	"strings"
	"testing"

	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"
)

// focused describes the focused element: its tag, id and text, and
// whether a focus ring shows (an outline or a box shadow).
type focused struct {
	Tag     string `json:"tag"`
	ID      string `json:"id"`
	Text    string `json:"text"`
	Visible bool   `json:"visible"`
}

const focusedJS = `(() => { const e = document.activeElement; const s = getComputedStyle(e);
	return {tag: e.tagName.toLowerCase(), id: e.id, text: (e.textContent || "").trim(),
		visible: (s.outlineStyle !== "none" && parseFloat(s.outlineWidth) >= 2) || (s.boxShadow !== "none")}; })()`

// tabTo presses Tab until the focused element's text is want (or its id,
// for an input), failing after limit presses; every element focused on
// the way must show a focus ring.
func (c *chromium) tabTo(want string, limit int) {
	c.t.Helper()
	for range limit {
		c.run("tab", chromedp.KeyEvent(kb.Tab))
		f, err := chromedp.Run(c.ctx, chromedp.Evaluate[focused](focusedJS))
		if err != nil {
			c.t.Fatal(err)
		}
		if !f.Visible {
			c.t.Errorf("<%s id=%q> %q has focus but no visible focus ring", f.Tag, f.ID, f.Text)
		}
		if f.Text == want || f.ID == want {
			return
		}
	}
	c.t.Fatalf("%q not reached in %d presses of Tab", want, limit)
}

// TestConsoleKeyboardInChromium signs in and pairs a machine with the
// keyboard alone, in a real Chromium: Tab reaches the skip link first,
// then each control in order, each with a visible focus ring, and Enter
// submits.
func TestConsoleKeyboardInChromium(t *testing.T) {
	h := startHub(t)
	cr := newChromium(t, h.url, t.TempDir())
	cr.run("sign-in page", chromedp.WaitVisible(chromedp.CSS(`#token`)))

	cr.tabTo("Skip to content", 1)
	cr.tabTo("token", 1)
	cr.run("type the token", chromedp.KeyEvent(h.owner))
	cr.tabTo("Sign in", 1)
	cr.run("submit with Enter", chromedp.KeyEvent(kb.Enter), chromedp.WaitVisible(chromedp.Search(`//h1[text()="Machines"]`)))

	cr.tabTo("Skip to content", 1)
	cr.tabTo("Pair a machine", 12)
	cr.run("pair with Enter", chromedp.KeyEvent(kb.Enter), chromedp.WaitVisible(chromedp.CSS(`p.code`)))
	code, err := chromedp.Run(cr.ctx, chromedp.Text(chromedp.CSS(`p.code`)))
	if err != nil {
		t.Fatal(err)
	}
	if strings.TrimSpace(code) == "" {
		t.Error("the pairing page shows no code")
	}
	cr.tabTo("Back to machines", 12)
	cr.run("back with Enter", chromedp.KeyEvent(kb.Enter), chromedp.WaitVisible(chromedp.Search(`//h1[text()="Machines"]`)))
}
