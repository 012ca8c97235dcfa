package console

import (
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap/zaptest"
)

// TestUsageChartsLayout: each sample is a point inside the chart, the
// newest at the right edge; CPU is scaled to 100 % (or above, past it),
// memory to its limit, drawn as a line; the values are given as text.
func TestUsageChartsLayout(t *testing.T) {
	t.Parallel()
	at := time.Date(2026, 12, 4, 23, 0, 0, 0, time.UTC)
	s := usageSeries{Kind: "sandbox", ID: "sb-1", Name: "builtin · c-1"}
	for i, cpu := range []float64{0, 50, 100, 25} {
		s.Points = append(s.Points, usagePoint{At: at.Add(time.Duration(i) * 5 * time.Second), CPU: cpu, Mem: int64(i+1) << 20, MemLimit: 8 << 20})
	}
	cpu, mem := usageCharts(s)
	for _, c := range []chart{cpu, mem} {
		pts := strings.Fields(c.Line)
		if len(pts) != 4 || c.Empty {
			t.Fatalf("%s: points %q (empty %v), want 4", c.Title, c.Line, c.Empty)
		}
		for i, p := range pts {
			x, _ := strconv.ParseFloat(strings.Split(p, ",")[0], 64)
			y, _ := strconv.ParseFloat(strings.Split(p, ",")[1], 64)
			if x < 0 || x > chartWidth || y < chartTop || y > chartHeight-chartBottom {
				t.Errorf("%s: point %d (%v,%v) outside the chart", c.Title, i, x, y)
			}
			if i == len(pts)-1 && x != chartWidth {
				t.Errorf("%s: newest point at x %v, want the right edge %d", c.Title, x, chartWidth)
			}
		}
	}
	// 100 % is the top; 0 the bottom.
	if pts := strings.Fields(cpu.Line); !strings.HasSuffix(pts[2], ","+strconv.Itoa(chartTop)+".0") || !strings.HasSuffix(pts[0], ","+strconv.Itoa(chartHeight-chartBottom)+".0") {
		t.Errorf("CPU points %q: want 100 %% at y %d and 0 at y %d", cpu.Line, chartTop, chartHeight-chartBottom)
	}
	if cpu.Top != "100 %" || mem.Top != "8.0 MiB" || mem.LimitY != chartTop || mem.Limit != "limit 8.0 MiB" {
		t.Errorf("tops %q %q, limit %d %q", cpu.Top, mem.Top, mem.LimitY, mem.Limit)
	}
	if want := "CPU now 25.0 % of one core, peak 100.0 %; 4 samples, 23:00:00 to 23:00:15 UTC."; cpu.Summary != want {
		t.Errorf("CPU summary %q, want %q", cpu.Summary, want)
	}
	if want := "Memory now 4.0 MiB of 8.0 MiB, peak 4.0 MiB;"; !strings.HasPrefix(mem.Summary, want) {
		t.Errorf("memory summary %q, want it to start %q", mem.Summary, want)
	}
	// Past 100 % (several cores), the scale grows to the next hundred.
	s.Points[1].CPU = 180
	if cpu, _ := usageCharts(s); cpu.Top != "200 %" {
		t.Errorf("CPU top with a 180 %% peak: %q, want 200 %%", cpu.Top)
	}
	// One sample: nothing to draw yet, but its values as text.
	s.Points = s.Points[:1]
	if cpu, _ := usageCharts(s); !cpu.Empty || cpu.Summary == "" {
		t.Errorf("one sample: empty %v summary %q; want empty with a summary", cpu.Empty, cpu.Summary)
	}
}

// TestRenderUsagePage: the usage page draws each target's charts as SVG
// with no inline style or script, its values as text and an anchor the
// machines and environments pages link to.
func TestRenderUsagePage(t *testing.T) {
	t.Parallel()
	p, err := parsePages()
	if err != nil {
		t.Fatal(err)
	}
	c := &Console{log: zaptest.NewLogger(t), pages: p}
	at := time.Date(2026, 12, 4, 23, 0, 0, 0, time.UTC)
	s := usageSeries{Kind: "machine", ID: "m-1", Name: "laptop", Points: []usagePoint{
		{At: at, CPU: 10, Mem: 1 << 30, MemLimit: 16 << 30}, {At: at.Add(5 * time.Second), CPU: 30, Mem: 2 << 30, MemLimit: 16 << 30}}}
	tg := usageTarget{Kind: s.Kind, ID: s.ID, Name: s.Name}
	tg.CPU, tg.Mem = usageCharts(s)
	w := httptest.NewRecorder()
	c.render(w, http.StatusOK, view{Page: "usage", Who: &Identity{Name: "t", Org: "acme"}, Data: usageData{Every: 5 * time.Second, Targets: []usageTarget{tg}}})
	body := w.Body.String()
	for _, want := range []string{
		`<section id="machine-m-1"`, `data-sse="/console/usage/events" data-sse-mode="replace"`,
		`<polyline points="` + tg.CPU.Line + `"`, `<polyline points="` + tg.Mem.Line + `"`,
		"CPU now 30.0 % of one core, peak 30.0 %; 2 samples, 23:00:00 to 23:00:05 UTC.",
		"Memory now 2.0 GiB of 16.0 GiB (the host&#39;s memory), peak 2.0 GiB",
		`role="img" aria-label="CPU (% of one core): CPU now 30.0 %`,
		`aria-current="page">Usage</a>`,
	} {
		if !strings.Contains(body, want) {
			t.Errorf("the page lacks %q:\n%s", want, body)
		}
	}
	for _, bad := range []string{"style=", "<style", "<script>", "onload"} {
		if strings.Contains(body, bad) {
			t.Errorf("the page has %q (the CSP forbids inline style and script)", bad)
		}
	}
}

// BenchmarkUsagePage draws the usage page of 20 targets with a full
// series each (usageKeep samples): the work a view does past sampling.
func BenchmarkUsagePage(b *testing.B) {
	p, err := parsePages()
	if err != nil {
		b.Fatal(err)
	}
	c := &Console{log: zaptest.NewLogger(b), pages: p}
	at := time.Now()
	var series []usageSeries
	for k := range 20 {
		s := usageSeries{Kind: "sandbox", ID: "sb-" + strconv.Itoa(k), Name: "builtin · c"}
		for i := range usageKeep {
			s.Points = append(s.Points, usagePoint{At: at.Add(time.Duration(i) * 5 * time.Second), CPU: float64(i % 100), Mem: int64(i) << 20, MemLimit: 512 << 20})
		}
		series = append(series, s)
	}
	who := &Identity{Name: "t", Org: "acme"}
	b.ReportAllocs()
	for b.Loop() {
		d := usageData{Every: 5 * time.Second}
		for _, s := range series {
			tg := usageTarget{Kind: s.Kind, ID: s.ID, Name: s.Name}
			tg.CPU, tg.Mem = usageCharts(s)
			d.Targets = append(d.Targets, tg)
		}
		c.render(httptest.NewRecorder(), http.StatusOK, view{Page: "usage", Who: who, Data: d})
	}
}
