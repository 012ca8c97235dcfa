package hub_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/devdepot-ai/agentd/agentd"
	"github.com/devdepot-ai/agentd/internal/hub/store"
	hubv1 "github.com/devdepot-ai/agentd/proto/gen/agentd/hub/v1"
)

const chromiumPath = "/usr/bin/chromium"

// screenshotDir is where the browser test saves its screenshots: the
// repository's docs/screenshots with UPDATE_SCREENSHOTS=1, else a
// temporary directory.
func screenshotDir(t *testing.T) string {
	if os.Getenv("UPDATE_SCREENSHOTS") == "1" {
		return filepath.Join("..", "..", "docs", "screenshots")
	}
	return t.TempDir()
}

// TestConsoleInChromium drives the console in a real headless Chromium:
// sign in, pair a real agentd through the page and see it come online,
// watch agentctl's command arrive live on Activity, open its output,
// revoke the machine, see an environment's report.
func TestConsoleInChromium(t *testing.T) {
	if _, err := os.Stat(chromiumPath); err != nil {
		t.Skipf("no Chromium at %s (Debian's chromium package): %v", chromiumPath, err)
	}
	h := startHub(t)
	shots := screenshotDir(t)

	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(chromiumPath), chromedp.NoSandbox, chromedp.WindowSize(1000, 720),
		chromedp.DisableGPU, chromedp.UserDataDir(t.TempDir()))
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	defer cancelAlloc()
	browser, cancelTab := chromedp.NewContext(actx)
	defer cancelTab()
	// The first call starts the browser, which lives as long as its
	// context: no timeout on that one.
	if err := chromedp.Do(browser, chromedp.Navigate(h.url+"/console/")); err != nil {
		t.Fatalf("start Chromium: %v", err)
	}
	ctx, cancel := context.WithTimeout(browser, 90*time.Second)
	defer cancel()

	run := func(what string, actions ...chromedp.Action[chromedp.Void]) {
		t.Helper()
		if err := chromedp.Do(ctx, actions...); err != nil {
			t.Fatalf("%s: %v", what, err)
		}
	}
	shot := func(name string) chromedp.Action[chromedp.Void] {
		return chromedp.Func(func(ctx context.Context, tg *chromedp.Target) error {
			png, err := chromedp.CaptureScreenshot()(ctx, tg)
			if err != nil {
				return err
			}
			return os.WriteFile(filepath.Join(shots, name+".png"), png, 0o644)
		})
	}
	// contains waits until the element's text contains want (no sleeps:
	// chromedp polls the page).
	contains := func(sel, want string) chromedp.Action[chromedp.Void] {
		return chromedp.Func(func(ctx context.Context, tg *chromedp.Target) error {
			_, err := chromedp.Poll[bool](`(document.querySelector(`+jsString(sel)+`)||{textContent:""}).textContent.includes(`+jsString(want)+`)`,
				chromedp.WithPollingTimeout(30*time.Second))(ctx, tg)
			return err
		})
	}

	// Sign in.
	run("sign in",
		chromedp.WaitVisible(chromedp.CSS(`#token`)),
		shot("signin"),
		chromedp.SendKeys(chromedp.CSS(`#token`), h.owner),
		chromedp.Submit(chromedp.CSS(`#token`)),
		chromedp.WaitVisible(chromedp.Search(`//h1[text()="Machines"]`)),
	)

	// Pair a machine through the page.
	run("pair page",
		chromedp.Click(chromedp.Search(`//button[text()="Pair a machine"]`)),
		chromedp.WaitVisible(chromedp.CSS(`p.code`)),
		shot("pair"),
	)
	code, err := chromedp.Run(ctx, chromedp.Text(chromedp.CSS(`p.code`)))
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	mc := &machine{ws: filepath.Join(dir, "ws"), cfg: filepath.Join(dir, "config")}
	if err := os.Mkdir(mc.ws, 0o755); err != nil {
		t.Fatal(err)
	}
	pm, err := agentd.Pair(t.Context(), agentd.PairOptions{Hub: h.url, Code: strings.TrimSpace(code), ConfigDir: mc.cfg, Name: "laptop"})
	if err != nil {
		t.Fatal(err)
	}
	mc.id = pm.MachineID
	h.run(h.owner, mc, filepath.Join(dir, "state"))
	run("the pairing page flips", contains(`#pair-status`, "is paired and online"), shot("paired"))

	// A command run with agentctl arrives live on Activity.
	run("activity page", chromedp.Navigate(h.url+"/console/activity"), chromedp.WaitVisible(chromedp.CSS(`#activity-rows`)))
	done := make(chan string, 1)
	go func() {
		code, out, errs := h.agentctl(h.owner, mc.id, "sh", "echo hello-browser; seq 1 3")
		if code != 0 {
			done <- out + errs
		}
		close(done)
	}()
	run("live activity", contains(`#activity-rows`, "hello-browser"))
	if msg, ok := <-done; ok {
		t.Fatalf("agentctl: %s", msg)
	}
	run("activity after a reload (the plot counts the command)", chromedp.Reload(), chromedp.WaitVisible(chromedp.CSS(`svg`)), shot("activity"))
	run("output page",
		chromedp.Click(chromedp.Search(`//a[text()="output"]`)),
		chromedp.WaitVisible(chromedp.CSS(`.output`)),
		contains(`.output`, "hello-browser"),
		shot("output"),
	)

	// Machines, then revoke with confirmation.
	run("machines", chromedp.Navigate(h.url+"/console/machines"), contains(`#machines`, "online"), shot("machines"))
	run("revoke",
		chromedp.Click(chromedp.Search(`//a[contains(text(),"Revoke")]`)),
		chromedp.WaitVisible(chromedp.Search(`//h1[starts-with(text(),"Revoke")]`)),
		chromedp.Click(chromedp.Search(`//button[starts-with(text(),"Revoke")]`)),
		chromedp.WaitVisible(chromedp.Search(`//h1[text()="Machines"]`)),
		contains(`#machines`, "revoked"),
	)
	h.waitStatus(h.owner, mc.id, hubv1.MachineStatus_MACHINE_STATUS_REVOKED)

	// An environment's report (this hub runs no sandboxes, so the report
	// is one a validation stored).
	now := time.Now()
	e, err := h.store.CreateEnvironment(t.Context(), store.Environment{OrgID: h.hub.Org.ID, Name: "acme", Image: "ghcr.io/acme/sandbox:v1", Network: "public", CreatedAt: now})
	if err != nil {
		t.Fatal(err)
	}
	report := `[{"id":"reference.host","status":"pass","title":"the reference names an allowed registry host"},
		{"id":"base.marker","status":"warn","title":"built on the current base image","breaks":"tools older than the current base's","fix":"rebuild FROM ghcr.io/devdepot-ai/sandbox-base:1"},
		{"id":"agent.python","status":"pass","title":"Python cells run as uid 1000"}]`
	if _, err := h.store.FinishValidation(t.Context(), h.hub.Org.ID, e.Name, e.Generation, store.Environment{State: store.EnvReady,
		Pinned: "ghcr.io/acme/sandbox@sha256:" + strings.Repeat("5e", 32), Report: []byte(report),
		Inventory: []byte(`{"tools":["az","terraform"],"python_packages":["pandas==2.2.0"]}`)}, now); err != nil {
		t.Fatal(err)
	}
	run("environments",
		chromedp.Navigate(h.url+"/console/environments"),
		contains(`main`, "acme"),
		shot("environments"),
		chromedp.Click(chromedp.Search(`//a[text()="acme"]`)),
		chromedp.WaitVisible(chromedp.Search(`//h1[text()="Environment acme"]`)),
		contains(`main`, "Python cells run"),
		shot("environment"),
	)
	run("tokens", chromedp.Navigate(h.url+"/console/tokens"), contains(`main`, "tester"), shot("tokens"))
	run("sign out", chromedp.Click(chromedp.Search(`//button[text()="Sign out"]`)), chromedp.WaitVisible(chromedp.CSS(`#token`)))
}

// jsString quotes s for JavaScript.
func jsString(s string) string {
	return "'" + strings.NewReplacer(`\`, `\\`, `'`, `\'`).Replace(s) + "'"
}
