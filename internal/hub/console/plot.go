package console

import (
	"fmt"
	"sort"
	"time"

	"github.com/devdepot-ai/agentd/internal/wire"
	hubv1 "github.com/devdepot-ai/agentd/proto/gen/agentd/hub/v1"
)

// plot is a bar chart the templates draw as inline SVG (presentation
// attributes only: no style, which the CSP forbids inline).
type plot struct {
	Title  string
	Note   string // what the plot does not cover, when its data was cut short
	Width  int
	Height int
	Bars   []bar
	Max    int
	Empty  bool
}

// bar is one bar, laid out.
type bar struct {
	Label  string // axis label (may be "")
	Tip    string // accessible text: label and value
	Value  int
	X, W   int
	Y, H   int
	LabelX int
	ValueY int
}

const (
	plotHeight = 140
	plotTop    = 16 // room for the values
	plotBottom = 22 // room for the labels
)

// layout places bars of values across width.
func layout(title string, labels, tips []string, values []int, width int) *plot {
	p := &plot{Title: title, Width: width, Height: plotHeight, Empty: true}
	for _, v := range values {
		p.Max = max(p.Max, v)
		if v > 0 {
			p.Empty = false
		}
	}
	n := max(len(values), 1)
	slot := width / n
	inner := plotHeight - plotTop - plotBottom
	for i, v := range values {
		h := 0
		if p.Max > 0 {
			h = v * inner / p.Max
		}
		b := bar{Label: labels[i], Tip: tips[i], Value: v, X: i*slot + slot/8, W: max(slot*3/4, 1), H: h}
		b.Y = plotTop + inner - h
		b.LabelX = i*slot + slot/2
		b.ValueY = b.Y - 3
		p.Bars = append(p.Bars, b)
	}
	return p
}

// commandsPerHour counts commands started in each of the last hours, in
// recs: the newest records. cut says recs is not the whole
// history (the read stopped at its limit): if the oldest record read is
// newer than the plot's start, its note says which window the bars cover.
func commandsPerHour(recs []*hubv1.WatchResponse, now time.Time, hours int, cut bool) *plot {
	end := now.Truncate(time.Hour).Add(time.Hour)
	start := end.Add(-time.Duration(hours) * time.Hour)
	values := make([]int, hours)
	for _, m := range recs {
		r := m.GetRecord()
		if r.GetKind() != wire.KindProcessStart {
			continue
		}
		t := r.GetTime().AsTime()
		if t.Before(start) || !t.Before(end) {
			continue
		}
		values[int(t.Sub(start)/time.Hour)]++
	}
	labels, tips := make([]string, hours), make([]string, hours)
	for i := range hours {
		h := start.Add(time.Duration(i) * time.Hour).UTC()
		if i%4 == 0 {
			labels[i] = h.Format("15h")
		}
		tips[i] = fmt.Sprintf("%s UTC: %d commands", h.Format("Jan 2 15:04"), values[i])
	}
	p := layout(fmt.Sprintf("Commands started per hour (UTC, last %d h)", hours), labels, tips, values, 720)
	if cut && len(recs) > 0 {
		from := recs[0].GetRecord().GetTime().AsTime()
		for _, m := range recs {
			if t := m.GetRecord().GetTime().AsTime(); t.Before(from) {
				from = t
			}
		}
		if from.After(start) {
			p.Note = fmt.Sprintf("Covers %s to now only: the hub's newest %d activity records; older commands are not counted.",
				from.UTC().Format("Jan 2 15:04 UTC"), len(recs))
		}
	}
	return p
}

// sandboxStarts counts sandboxes started per environment.
func sandboxStarts(sbs []*hubv1.Sandbox) *plot {
	count := map[string]int{}
	for _, sb := range sbs {
		count[sb.GetEnvironment()]++
	}
	envs := make([]string, 0, len(count))
	for e := range count {
		envs = append(envs, e)
	}
	sort.Strings(envs)
	values, tips := make([]int, len(envs)), make([]string, len(envs))
	for i, e := range envs {
		values[i] = count[e]
		tips[i] = fmt.Sprintf("%s: %d sandboxes", e, count[e])
	}
	return layout("Sandboxes started per environment (those the hub runs now)", envs, tips, values, max(120*len(envs), 240))
}
