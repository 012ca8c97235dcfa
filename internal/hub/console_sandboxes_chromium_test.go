package hub_test

import (
	"testing"

	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"

	"github.com/devdepot-ai/agentd/internal/hub/sandboxes"
)

// TestConsoleSandboxesInChromium drives the Sandboxes page in a real
// headless Chromium: sign in, open Sandboxes from the navigation, pause
// one sandbox with its row's button, stop another through its
// confirmation page, and see the states the hub has (screenshot
// docs/screenshots/sandboxes.png with UPDATE_SCREENSHOTS=1). On a
// phone's screen the page is no wider than the screen. By keyboard alone
// (Tab, Enter) the paused one resumes.
func TestConsoleSandboxesInChromium(t *testing.T) {
	st, _ := openArchive(t)
	f := startFakeSandboxHub(t, func(o *sandboxes.Options) { o.Archive = st })
	var ids []string
	for _, conv := range []string{"chat-design", "chat-report", "chat-tests", "chat-2025-q4"} {
		id, err := f.info(conv)
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, id)
	}
	c := newChromium(t, f.h.URL, screenshotDir(t))
	c.signIn(f.h.Token)
	row := func(id string) string { return `#sb-row-` + id }

	c.run("open Sandboxes",
		chromedp.Click(chromedp.Search(`//nav//a[text()="Sandboxes"]`)),
		chromedp.WaitVisible(chromedp.Search(`//h1[text()="Sandboxes"]`)),
		c.contains(row(ids[0]), "running"), c.contains(row(ids[1]), "running"),
	)
	c.run("pause one",
		chromedp.Click(chromedp.Search(`//tr[@id="sb-row-`+ids[0]+`"]//button[text()="Pause"]`)),
		c.contains(`.notice`, "Sandbox "+ids[0]+" paused."),
		c.contains(row(ids[0]), "paused"),
	)
	if got := f.sandboxState(t, ids[0]); got != "paused" {
		t.Fatalf("after Pause %s is %q", ids[0], got)
	}
	c.run("archive one through its confirmation",
		chromedp.Click(chromedp.Search(`//tr[@id="sb-row-`+ids[3]+`"]//a[starts-with(text(),"Archive")]`)),
		chromedp.WaitVisible(chromedp.Search(`//h1[text()="Archive sandbox `+ids[3]+`?"]`)),
		chromedp.Click(chromedp.Search(`//button[text()="Archive sandbox `+ids[3]+`"]`)),
		c.contains(`.notice`, "Sandbox "+ids[3]+" archived."),
	)
	c.run("stop one through its confirmation",
		chromedp.Click(chromedp.Search(`//tr[@id="sb-row-`+ids[1]+`"]//a[starts-with(text(),"Stop")]`)),
		chromedp.WaitVisible(chromedp.Search(`//h1[text()="Stop sandbox `+ids[1]+`?"]`)),
	)
	if got := f.sandboxState(t, ids[1]); got != "running" {
		t.Fatalf("the confirmation page changed %s: %q", ids[1], got)
	}
	c.run("confirm",
		chromedp.Click(chromedp.Search(`//button[text()="Stop sandbox `+ids[1]+`"]`)),
		chromedp.WaitVisible(chromedp.Search(`//h1[text()="Sandboxes"]`)),
		c.contains(`.notice`, "Sandbox "+ids[1]+" stopped."),
		c.contains(row(ids[3]), "archived"),
		c.contains(row(ids[1]), "stopped"),
		c.contains(row(ids[0]), "paused"),
		c.contains(row(ids[2]), "running"),
		chromedp.EmulateViewport(1000, 1000), // every row in the screenshot
		c.shot("sandboxes"),
	)
	if got := f.sandboxState(t, ids[1]); got != "stopped" {
		t.Fatalf("after the confirmed Stop %s is %q", ids[1], got)
	}
	for _, size := range [][2]int64{{1000, 720}, {390, 844}} {
		c.run("the page at its width", chromedp.EmulateViewport(size[0], size[1]), chromedp.Reload(), chromedp.WaitVisible(chromedp.CSS(`#sandboxes`)))
		wide, err := chromedp.Run(c.ctx, chromedp.Evaluate[bool](`document.documentElement.scrollWidth > window.innerWidth + 1`))
		if err != nil {
			t.Fatal(err)
		}
		if wide {
			t.Errorf("the Sandboxes page is wider than a %d px screen", size[0])
		}
	}
	c.run("back to a desktop screen", chromedp.EmulateViewport(1000, 720), chromedp.Reload(), chromedp.WaitVisible(chromedp.CSS(`#sandboxes`)))
	c.tabTo("Resume", 40)
	c.run("resume by keyboard", chromedp.KeyEvent(kb.Enter), c.contains(`.notice`, "Sandbox "+ids[0]+" resumed."), c.contains(row(ids[0]), "running"))
	if got := f.sandboxState(t, ids[0]); got != "running" {
		t.Fatalf("after Resume by keyboard %s is %q", ids[0], got)
	}
}
