package console

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/devdepot-ai/agentd/internal/units"
)

// chart is a line chart of one series the templates draw as inline SVG
// (presentation attributes only, as plot), with its values as text.
type chart struct {
	Title   string // what it shows
	Summary string // the values as text: now, peak, the window
	Width   int
	Height  int
	Line    string // the polyline's points
	Top     string // the value at the top of the chart
	LimitY  int    // y of the limit line (0: none)
	Limit   string // its label
	Empty   bool   // fewer than two samples: nothing to draw yet
}

const (
	chartWidth  = 360
	chartHeight = 110
	chartTop    = 14 // room for the top value
	chartBottom = 6
)

// lineChart lays out values (oldest first; at most usageKeep) at their
// sample slots, the newest at the right edge, scaled to top.
func lineChart(title string, values []float64, top float64) chart {
	c := chart{Title: title, Width: chartWidth, Height: chartHeight, Empty: len(values) < 2}
	if top <= 0 {
		top = 1
	}
	inner := float64(chartHeight - chartTop - chartBottom)
	step := float64(chartWidth) / float64(usageKeep-1)
	var b strings.Builder
	for i, v := range values {
		x := float64(chartWidth) - float64(len(values)-1-i)*step
		y := float64(chartTop) + inner - min(max(v, 0), top)/top*inner
		if i > 0 {
			b.WriteByte(' ')
		}
		b.WriteString(strconv.FormatFloat(x, 'f', 1, 64) + "," + strconv.FormatFloat(y, 'f', 1, 64))
	}
	c.Line = b.String()
	return c
}

// usageCharts are one series' CPU and memory charts.
func usageCharts(s usageSeries) (cpu, mem chart) {
	n := len(s.Points)
	cpus, mems := make([]float64, n), make([]float64, n)
	var peakCPU, peakMem float64
	var limit int64
	for i, p := range s.Points {
		cpus[i], mems[i] = p.CPU, float64(p.Mem)
		peakCPU, peakMem = max(peakCPU, p.CPU), max(peakMem, float64(p.Mem))
		limit = p.MemLimit
	}
	window := ""
	if n > 0 {
		window = fmt.Sprintf("%d samples, %s to %s UTC", n, s.Points[0].At.UTC().Format(time.TimeOnly), s.Points[n-1].At.UTC().Format(time.TimeOnly))
	}
	// CPU: percent of one core, to 100 % or the next 100 above the peak.
	cpuTop := 100 * float64(int(peakCPU/100)+1)
	if peakCPU > 0 && peakCPU == 100*float64(int(peakCPU/100)) {
		cpuTop = peakCPU
	}
	cpu = lineChart("CPU (% of one core)", cpus, cpuTop)
	cpu.Top = fmt.Sprintf("%.0f %%", cpuTop)
	if n > 0 {
		cpu.Summary = fmt.Sprintf("CPU now %.1f %% of one core, peak %.1f %%; %s.", cpus[n-1], peakCPU, window)
	}
	// Memory: to the limit when there is one, else a quarter above the peak.
	memTop := peakMem * 5 / 4
	if limit > 0 && float64(limit) >= peakMem {
		memTop = float64(limit)
	}
	mem = lineChart("Memory", mems, memTop)
	mem.Top = units.Bytes(int64(memTop))
	if limit > 0 && float64(limit) == memTop {
		mem.LimitY = chartTop
		mem.Limit = "limit " + units.Bytes(limit)
	}
	if n > 0 {
		of := "no limit known"
		if limit > 0 {
			of = "of " + units.Bytes(limit)
			if s.Kind == "machine" {
				of += " (the host's memory)"
			}
		}
		mem.Summary = fmt.Sprintf("Memory now %s %s, peak %s; %s.", units.Bytes(int64(mems[n-1])), of, units.Bytes(int64(peakMem)), window)
	}
	return cpu, mem
}
