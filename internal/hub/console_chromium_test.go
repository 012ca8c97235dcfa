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
	"github.com/devdepot-ai/agentd/internal/hub/sandboxes"
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
	h := startHub(t)
	shots := screenshotDir(t)

	cr := newChromium(t, h.url, shots)
	run, shot, contains := cr.run, cr.shot, cr.contains
	ctx := cr.ctx

	// Sign in.
	run("sign-in page", chromedp.WaitVisible(chromedp.CSS(`#token`)), shot("signin"))
	cr.signIn(h.owner)

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
	// The live row can be the hub's record of the call; the plot counts
	// the daemon's process.start, which may be stored a moment later: a
	// page rendered before it shows "Nothing to plot yet" for good.
	run("activity after a reload (the plot counts the command)", reloadUntil(`svg`), shot("activity"))
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
	// On a phone's screen nothing is wider than the screen.
	run("phone", chromedp.EmulateViewport(390, 844, chromedp.EmulateMobile), chromedp.Navigate(h.url+"/console/activity"),
		contains(`#activity-rows`, "hello-browser"), shot("activity-phone"))
	for _, path := range []string{"/console/activity", "/console/machines", "/console/environments", "/console/tokens"} {
		run(path, chromedp.Navigate(h.url+path), chromedp.WaitVisible(chromedp.CSS(`h1`)))
		wide, err := chromedp.Run(ctx, chromedp.Evaluate[bool](`document.documentElement.scrollWidth > window.innerWidth + 1`))
		if err != nil {
			t.Fatal(err)
		}
		if wide {
			t.Errorf("%s is wider than a phone's screen", path)
		}
	}
	run("sign out", chromedp.Click(chromedp.Search(`//button[text()="Sign out"]`)), chromedp.WaitVisible(chromedp.CSS(`#token`)))
}

// chromium is a headless Chromium tab for one test.
type chromium struct {
	t     *testing.T
	ctx   context.Context
	shots string
}

// newChromium starts Chromium on base's console (skipping the test when
// Chromium is absent); it stops when the test ends.
func newChromium(t *testing.T, base, shots string, extra ...chromedp.ExecAllocatorOption) *chromium {
	t.Helper()
	if _, err := os.Stat(chromiumPath); err != nil {
		t.Skipf("no Chromium at %s (Debian's chromium package): %v", chromiumPath, err)
	}
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(chromiumPath), chromedp.NoSandbox, chromedp.WindowSize(1000, 720),
		chromedp.DisableGPU, chromedp.UserDataDir(t.TempDir()))
	opts = append(opts, extra...)
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	t.Cleanup(cancelAlloc)
	browser, cancelTab := chromedp.NewContext(actx)
	t.Cleanup(cancelTab)
	// The first call starts the browser, which lives as long as its
	// context: no timeout on that one.
	if err := chromedp.Do(browser, chromedp.Navigate(base+"/console/")); err != nil {
		t.Fatalf("start Chromium: %v", err)
	}
	ctx, cancel := context.WithTimeout(browser, 3*time.Minute)
	t.Cleanup(cancel)
	return &chromium{t: t, ctx: ctx, shots: shots}
}

func (c *chromium) run(what string, actions ...chromedp.Action[chromedp.Void]) {
	c.t.Helper()
	if err := chromedp.Do(c.ctx, actions...); err != nil {
		c.t.Fatalf("%s: %v", what, err)
	}
}

// shot saves a screenshot of the viewport as name.png.
func (c *chromium) shot(name string) chromedp.Action[chromedp.Void] {
	return chromedp.Func(func(ctx context.Context, tg *chromedp.Target) error {
		png, err := chromedp.CaptureScreenshot()(ctx, tg)
		if err != nil {
			return err
		}
		return os.WriteFile(filepath.Join(c.shots, name+".png"), png, 0o644)
	})
}

// contains waits until the element's text contains want (no sleeps:
// chromedp polls the page). A page that reloads itself meanwhile (a
// validation's end) is polled again.
func (c *chromium) contains(sel, want string) chromedp.Action[chromedp.Void] {
	return chromedp.Func(func(ctx context.Context, tg *chromedp.Target) error {
		for {
			_, err := chromedp.Poll[bool](`(document.querySelector(`+jsString(sel)+`)||{textContent:""}).textContent.includes(`+jsString(want)+`)`,
				chromedp.WithPollingTimeout(2*time.Minute))(ctx, tg)
			if err == nil || ctx.Err() != nil || !navigated(err) {
				return err
			}
		}
	})
}

// reloadUntil reloads the page until an element matching sel is on it
// (the page is rendered once per load: what is stored after it shows on
// the next one), within the test's deadline.
func reloadUntil(sel string) chromedp.Action[chromedp.Void] {
	return chromedp.Func(func(ctx context.Context, tg *chromedp.Target) error {
		for {
			if _, err := chromedp.Reload()(ctx, tg); err != nil {
				return err
			}
			_, err := chromedp.Poll[bool](`document.querySelector(`+jsString(sel)+`) !== null`, chromedp.WithPollingTimeout(2*time.Second))(ctx, tg)
			if err == nil || ctx.Err() != nil {
				return err
			}
		}
	})
}

// navigated reports whether err says the page went away under a call.
func navigated(err error) bool {
	msg := err.Error()
	return strings.Contains(msg, "navigated or closed") || strings.Contains(msg, "context was destroyed") ||
		strings.Contains(msg, "Cannot find context")
}

// signIn signs in with token.
func (c *chromium) signIn(token string) {
	c.t.Helper()
	c.run("sign in",
		chromedp.WaitVisible(chromedp.CSS(`#token`)),
		chromedp.SendKeys(chromedp.CSS(`#token`), token),
		chromedp.Submit(chromedp.CSS(`#token`)),
		chromedp.WaitVisible(chromedp.Search(`//h1[text()="Machines"]`)),
	)
}

// TestConsoleEnvironmentInChromium creates a custom image environment
// through the form on a hub that runs sandboxes, and sees it validate
// (live) and its report: the image's registry does not answer, so the
// report says what breaks and the fix.
func TestConsoleEnvironmentInChromium(t *testing.T) {
	const host = "127.0.0.1:9" // the discard port: nothing listens
	h := startSandboxHub(t, func(o *sandboxes.Options) {
		o.ImageCheck.AllowRegistries = []string{host}
		o.ImageCheck.Insecure = func(h string) bool { return h == host }
	})
	c := newChromium(t, h.URL, screenshotDir(t))
	c.signIn(h.Token)
	c.run("create an environment",
		chromedp.Navigate(h.URL+"/console/environments"),
		chromedp.Click(chromedp.Search(`//summary[contains(text(),"New environment")]`)),
		chromedp.WaitVisible(chromedp.CSS(`#env-name`)),
		chromedp.SendKeys(chromedp.CSS(`#env-name`), "acme"),
		chromedp.SendKeys(chromedp.CSS(`#env-image`), host+"/acme/sandbox:v1"),
		c.shot("environment-new"),
		chromedp.Submit(chromedp.CSS(`#env-name`)),
		chromedp.WaitVisible(chromedp.Search(`//h1[text()="Environment acme"]`)),
	)
	// Validating, then (the page reloads itself when it ends) the report.
	c.run("its report", c.contains(`main`, "rejected"), c.contains(`main`, "Fix:"), c.shot("environment-rejected"))
	text, err := chromedp.Run(c.ctx, chromedp.Text(chromedp.CSS(`main`)))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"Report", "What breaks:", "none yet", "Update", "Re-validate"} {
		if !strings.Contains(text, want) {
			t.Errorf("the environment's page lacks %q:\n%s", want, text)
		}
	}
}

// jsString quotes s for JavaScript.
func jsString(s string) string {
	return "'" + strings.NewReplacer(`\`, `\\`, `'`, `\'`).Replace(s) + "'"
}
