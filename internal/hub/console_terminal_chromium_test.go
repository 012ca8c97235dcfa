package hub_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/input"
	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"
)

// typeKeys types s as a person's key presses do: one keyDown carrying the
// text, then keyUp. (chromedp.KeyEvent sends a separate "char" event,
// which fires keypress even when the page cancelled the keydown: xterm
// would see each Enter twice.)
func typeKeys(s string) chromedp.Action[chromedp.Void] {
	return chromedp.Func(func(ctx context.Context, tg *chromedp.Target) error {
		for _, r := range s {
			var down, up *input.DispatchKeyEventParams
			for _, k := range kb.Encode(r) {
				switch k.Type {
				case kb.KeyDown:
					down = k
				case kb.KeyChar:
					down.Text, down.UnmodifiedText = k.Text, k.UnmodifiedText
				case kb.KeyUp:
					up = k
				}
			}
			for _, k := range []*input.DispatchKeyEventParams{down, up} {
				if _, err := cdp.Call(ctx, tg, input.DispatchKeyEvent, *k); err != nil {
					return err
				}
			}
		}
		return nil
	})
}

// promptJS is true once the shell's prompt is on the terminal's last line.
const promptJS = termRowsJS + `.filter(r => r !== '').some(r => /[$#] ?$/.test(r))`

// termRowsJS is the terminal's lines as its screen-reader tree has them.
const termRowsJS = `Array.from(document.querySelectorAll('.xterm-accessibility-tree > div')).map(d => d.textContent.replace(/\u00a0/g, ' ').trim())`

// termHasRow waits until a line of the terminal is exactly want.
func (c *chromium) termHasRow(what, want string) {
	c.t.Helper()
	if _, err := chromedp.Run(c.ctx, chromedp.Poll[bool](termRowsJS+`.includes(`+jsString(want)+`)`, chromedp.WithPollingTimeout(time.Minute))); err != nil {
		rows, _ := chromedp.Run(c.ctx, chromedp.Evaluate[[]string](termRowsJS))
		c.t.Fatalf("%s: no line %q in the terminal: %v\n%q", what, want, err, rows)
	}
}

// tabIntoTerminal presses Tab until the terminal has the focus, as a
// keyboard user does, and checks the terminal shows that it has it.
func (c *chromium) tabIntoTerminal(limit int) {
	c.t.Helper()
	if _, err := chromedp.Run(c.ctx, chromedp.Poll[bool](styledJS, chromedp.WithPollingTimeout(time.Minute))); err != nil {
		c.t.Fatal(err)
	}
	for range limit {
		c.run("tab", chromedp.KeyEvent(kb.Tab))
		in, err := chromedp.Run(c.ctx, chromedp.Evaluate[bool](`document.activeElement.classList.contains('xterm-helper-textarea')`))
		if err != nil {
			c.t.Fatal(err)
		}
		if in {
			ring, err := chromedp.Run(c.ctx, chromedp.Evaluate[string](`getComputedStyle(document.querySelector('.terminal')).outlineStyle`))
			if err != nil || ring == "none" {
				c.t.Errorf("the terminal has the focus but shows no focus ring (outline %q, %v)", ring, err)
			}
			return
		}
	}
	c.t.Fatalf("Tab never reached the terminal in %d presses", limit)
}

// useTerminal is the browser half of the terminal tests: on the terminal
// page, Tab into it, type echo hi + Enter, see hi; reload, see the
// scrollback (replayed), Tab in, type again and see it; Shift+Tab leaves.
func useTerminal(t *testing.T, c *chromium, shot string) {
	c.run("connected", c.contains(`#term-status`, "Connected to process"))
	c.tabIntoTerminal(30)
	if _, err := chromedp.Run(c.ctx, chromedp.Poll[bool](promptJS, chromedp.WithPollingTimeout(time.Minute))); err != nil {
		t.Fatalf("no prompt: %v", err)
	}
	c.run("type", typeKeys("echo hi\r"))
	c.termHasRow("after echo hi", "hi")
	url, err := chromedp.Run(c.ctx, chromedp.Location())
	if err != nil || !strings.Contains(url, "?p=") {
		t.Fatalf("the address does not name the process to come back to: %q %v", url, err)
	}

	c.run("reload", chromedp.Reload(), c.contains(`#term-status`, "Connected to process"))
	c.termHasRow("scrollback after the reload", "hi")
	c.tabIntoTerminal(30)
	c.run("type again", typeKeys("echo again-$((20+22))\r"))
	c.termHasRow("after the second command", "again-42")
	c.run("screenshot", c.shot(shot))

	// Shift+Tab leaves the terminal for the page's controls.
	c.run("shift+tab", chromedp.KeyEvent(kb.Tab, chromedp.KeyModifiers(chromedp.ModifierShift)))
	id, err := chromedp.Run(c.ctx, chromedp.Evaluate[string](`document.activeElement.id`))
	if err != nil || id != "term-end" {
		t.Errorf("Shift+Tab in the terminal focused %q (%v), want the End session button", id, err)
	}
	// The shell ends on the hang-up: killed by it (bash) or exiting 129
	// from its own handler (dash); either way the page says it ended.
	c.run("end session", chromedp.KeyEvent(kb.Enter), c.contains(`#term-status`, "Open a new terminal to start another"))
}

// TestConsoleTerminalSandboxInChromium opens a terminal in a builtin
// sandbox (the real engine) from the environments page.
func TestConsoleTerminalSandboxInChromium(t *testing.T) {
	h := startSandboxHub(t, nil)
	if out, code, err := h.run(h.ctx("builtin", "term-chat"), "true"); err != nil || code != 0 {
		t.Fatalf("make the sandbox: %v %d %s", err, code, out)
	}
	c := newChromium(t, h.URL, screenshotDir(t))
	c.signIn(h.Token)
	c.run("environments", chromedp.Navigate(h.URL+"/console/environments"), c.contains(`main`, "term-chat"),
		chromedp.Click(chromedp.Search(`//a[text()="Open terminal"]`)),
		chromedp.WaitVisible(chromedp.Search(`//h1[starts-with(text(),"Terminal on sandbox")]`)))
	useTerminal(t, c, "terminal")
}

// TestConsoleTerminalMachineInChromium opens a terminal on a paired
// machine from the machines page.
func TestConsoleTerminalMachineInChromium(t *testing.T) {
	h := startHub(t)
	h.startShellMachine(h.owner)
	c := newChromium(t, h.url, screenshotDir(t))
	c.signIn(h.owner)
	c.run("machines", c.contains(`#machines`, "online"),
		chromedp.Click(chromedp.Search(`//a[text()="Open terminal"]`)),
		chromedp.WaitVisible(chromedp.Search(`//h1[starts-with(text(),"Terminal on machine")]`)))
	useTerminal(t, c, "terminal-machine")
}
