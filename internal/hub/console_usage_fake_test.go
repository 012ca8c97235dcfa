package hub_test

import (
	"regexp"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"
)

// TestConsoleUsageCharts: over a hub whose sandboxes run on the fake
// driver, the console's Usage page shows a running sandbox's CPU and
// memory chart: the first view samples it, it is sampled again while the
// page is open, and the page's live stream brings the chart of two
// samples (a line), with the values as text. The environments page links to it. Closing the hub stops the
// sampler (goleak).
func TestConsoleUsageCharts(t *testing.T) {
	t.Cleanup(func() { goleak.VerifyNone(t, goleak.IgnoreCurrent()) }) // runs after the hub's cleanups
	f := startFakeSandboxHub(t, nil)
	sb, err := f.info("c-1")
	if err != nil {
		t.Fatal(err)
	}
	b := newBrowser(t, f.h.URL)
	b.signIn(f.h.Token)

	p := b.get("/console/usage")
	checkPage(t, "usage", p)
	section := regexp.MustCompile(`(?s)<section id="sandbox-` + regexp.QuoteMeta(sb) + `".*?</section>`)
	first := section.FindString(p.body)
	if p.code != 200 || !strings.Contains(first, "CPU now ") || !strings.Contains(first, "Memory now ") {
		t.Fatalf("first view: %d, sandbox %s's section %q; want its first sample as text\n%s", p.code, sb, first, p.body)
	}
	// The page follows live: its stream sends the charts again, and with
	// a second sample the line appears.
	events := sseEvents(t.Context(), t, b, "/console/usage/events")
	timeout := time.After(30 * time.Second)
	for drawn := false; !drawn; {
		select {
		case e, ok := <-events:
			if !ok {
				t.Fatal("the usage stream ended")
			}
			s := section.FindString(e)
			drawn = strings.HasPrefix(e, "replace\n") && strings.Count(s, "<polyline ") == 2 && strings.Contains(s, "CPU now ") &&
				regexp.MustCompile(`[2-9] samples`).MatchString(s)
		case <-timeout:
			t.Fatalf("no chart of two samples of sandbox %s in the usage stream within 30 s", sb)
		}
	}
	if envs := b.get("/console/environments"); !strings.Contains(envs.body, `href="/console/usage#sandbox-`+sb+`"`) {
		t.Errorf("the environments page does not link to sandbox %s's chart", sb)
	}
}

// TestConsoleUsageMachineChart: a paired machine's CPU and memory chart
// (memory against the host's) on the Usage page, linked from the machines
// table, on a hub that runs no sandboxes.
func TestConsoleUsageMachineChart(t *testing.T) {
	t.Parallel()
	h := startHub(t)
	m := h.startMachine(h.owner)
	b := newBrowser(t, h.url)
	b.signIn(h.owner)
	if p := b.get("/console/machines"); !strings.Contains(p.body, `href="/console/usage#machine-`+m.id+`"`) {
		t.Errorf("the machines page does not link to machine %s's chart:\n%s", m.id, p.body)
	}
	section := regexp.MustCompile(`(?s)<section id="machine-` + regexp.QuoteMeta(m.id) + `".*?</section>`)
	deadline := time.Now().Add(30 * time.Second)
	for {
		p := b.get("/console/usage")
		checkPage(t, "usage", p)
		s := section.FindString(p.body)
		if strings.Count(s, "<polyline ") == 2 && strings.Contains(s, "(the host&#39;s memory)") && regexp.MustCompile(`[2-9] samples`).MatchString(s) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no chart of two samples of machine %s after 30 s:\n%s", m.id, p.body)
		}
		time.Sleep(time.Second)
	}
}
