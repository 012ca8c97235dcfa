package hub_test

import (
	"strings"
	"testing"
	"time"

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
	// What the ring was judged by, for the failure message.
	Outline string `json:"outline"`
	Shadow  string `json:"shadow"`
	Sheets  int    `json:"sheets"`
	Ready   string `json:"ready"`
}

const focusedJS = `(() => { const e = document.activeElement; const s = getComputedStyle(e);
	return {tag: e.tagName.toLowerCase(), id: e.id, text: (e.textContent || "").trim(),
		visible: (s.outlineStyle !== "none" && parseFloat(s.outlineWidth) >= 2) || (s.boxShadow !== "none"),
		outline: s.outlineStyle + " " + s.outlineWidth, shadow: s.boxShadow,
		sheets: document.styleSheets.length, ready: document.readyState}; })()`

// styledJS is true once the page has loaded, its stylesheet included:
// an element can be visible (and focusable) before the stylesheet that
// draws its focus ring has arrived.
const styledJS = `document.readyState === "complete" && document.styleSheets.length > 0`

// tabTo presses Tab until the focused element's text is want (or its id,
// for an input), failing after limit presses; every element focused on
// the way must show a focus ring.
func (c *chromium) tabTo(want string, limit int) {
	c.t.Helper()
	if _, err := chromedp.Run(c.ctx, chromedp.Poll[bool](styledJS, chromedp.WithPollingTimeout(time.Minute))); err != nil {
		c.t.Fatalf("page never finished loading its stylesheet: %v", err)
	}
	for range limit {
		c.run("tab", chromedp.KeyEvent(kb.Tab))
		f, err := chromedp.Run(c.ctx, chromedp.Evaluate[focused](focusedJS))
		if err != nil {
			c.t.Fatal(err)
		}
		if !f.Visible {
			c.t.Errorf("<%s id=%q> %q has focus but no visible focus ring (outline %q, box-shadow %q; %d stylesheets, page %s)",
				f.Tag, f.ID, f.Text, f.Outline, f.Shadow, f.Sheets, f.Ready)
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
