package statuspage

import (
	"sort"
	"time"

	"github.com/mce-run/mce/host/inventory"
)

// Report is what GET /status.json answers: the inventory, the charts'
// series and each endpoint's per-variant figures over the window.
type Report struct {
	Taken         time.Time `json:"Taken"`
	StepSeconds   int       `json:"StepSeconds"`
	WindowSeconds int       `json:"WindowSeconds"`
	// LogLines says whether the containers' log lines (and IDs) are given:
	// "shown" on loopback, else why not.
	LogLines      string               `json:"LogLines"`
	Endpoints     []inventory.Endpoint `json:"Endpoints"`
	Series        []Series             `json:"Series"`
	SeriesDropped int64                `json:"SeriesDropped"`
	// Summaries are the figures of the page's per-variant tables: one per
	// endpoint listed in Endpoints or with invocations in the window.
	Summaries []EndpointSummary `json:"Summaries"`
	// Alarms are CloudWatch's metric alarms (in ALARM first), and Scaling
	// Application Auto Scaling's targets with their latest activities;
	// absent when the server has no such service.
	Alarms  []Alarm         `json:"Alarms,omitempty"`
	Scaling []ScalingTarget `json:"Scaling,omitempty"`
}

// EndpointSummary is one endpoint's invocations over the whole window
// (SeriesWindow), and each variant's. Invocations and Errors are the
// callers' calls: those of the production variants (and those that failed
// before one was picked), not a shadow variant's copies.
type EndpointSummary struct {
	EndpointName string `json:"EndpointName"`
	Invocations  int    `json:"Invocations"`
	Errors       int    `json:"Errors"`
	// Variants are those with invocations in the window, shadows
	// included, and the production variants the inventory lists that had
	// none, by name.
	Variants []VariantSummary `json:"Variants"`
}

// VariantSummary is one variant's invocations over the window: its
// buckets added together. VariantName is "" for invocations that failed
// before a variant was picked. TrafficPercent is its invocations as a
// share of the endpoint's (0 to 100; the production variants' add up to
// 100); for a shadow variant (Shadow, as the inventory says) they are the
// copies it got, so its TrafficPercent is the share of calls copied to
// it. ErrorPercent is the share of its own invocations that failed. The
// latencies are those of its successful invocations over the whole window,
// in seconds, from the same histogram as SeriesPoint's, and as close
// (within a bin, √2).
type VariantSummary struct {
	VariantName        string  `json:"VariantName"`
	Shadow             bool    `json:"Shadow,omitempty"`
	Invocations        int     `json:"Invocations"`
	Errors             int     `json:"Errors"`
	ErrorPercent       float64 `json:"ErrorPercent"`
	TrafficPercent     float64 `json:"TrafficPercent"`
	LatencyP50Seconds  float64 `json:"LatencyP50Seconds,omitempty"`
	LatencyP99Seconds  float64 `json:"LatencyP99Seconds,omitempty"`
	LatencyMeanSeconds float64 `json:"LatencyMeanSeconds,omitempty"`
	LatencyMaxSeconds  float64 `json:"LatencyMaxSeconds,omitempty"`
}

const logLinesHidden = "hidden: container output can hold secrets, so it is shown only to requests that reach mce on a loopback address"

// Report is what GET /status.json answers for a request that arrives on a
// loopback address (showLogs) or elsewhere.
func (p *Page) Report(showLogs bool) Report {
	rep, _ := p.report(showLogs)
	return rep
}

// report builds the report, and the windows its series come from; log
// lines and container IDs only when showLogs.
func (p *Page) report(showLogs bool) (Report, []*window) {
	inv := inventory.Inventory{Taken: time.Now().UTC(), Endpoints: []inventory.Endpoint{}}
	if p.o.Inventory != nil {
		inv = p.o.Inventory()
	}
	known := map[string]bool{}
	for i := range inv.Endpoints {
		e := &inv.Endpoints[i]
		known[e.Name] = true
		for j := range e.Variants {
			for k := range e.Variants[j].Copies {
				cs := e.Variants[j].Copies[k].Containers
				for n := range cs {
					c := &cs[n]
					if !showLogs {
						c.LogTail, c.ID = nil, ""
						continue
					}
					c.LogTail = cleanLogLines(c.LogTail)
				}
			}
		}
	}
	ws := p.o.Series.windows(inv.Taken, func(e string) bool { return known[e] || (p.o.Exists != nil && p.o.Exists(e)) })
	rep := Report{
		Taken: inv.Taken, StepSeconds: int(SeriesStep / time.Second), WindowSeconds: int(SeriesWindow / time.Second),
		LogLines: "shown", Endpoints: inv.Endpoints, Series: make([]Series, 0, len(ws)), SeriesDropped: p.o.Series.dropped.Load(),
	}
	if !showLogs {
		rep.LogLines = logLinesHidden
	}
	for _, w := range ws {
		pts := w.points()
		if pts == nil {
			pts = []SeriesPoint{}
		}
		rep.Series = append(rep.Series, Series{EndpointName: w.key.endpoint, VariantName: w.key.variant, Points: pts})
	}
	rep.Summaries = summaries(inv.Endpoints, ws)
	rep.Alarms, rep.Scaling = p.operations()
	return rep, ws
}

// summaries adds up each endpoint's windows: the listed endpoints in their
// order, then those only the recorder knows (created after the inventory
// was taken), by name.
func summaries(eps []inventory.Endpoint, ws []*window) []EndpointSummary {
	out := make([]EndpointSummary, 0, len(eps))
	at := map[string]int{}
	shadow := map[seriesKey]bool{}
	for _, e := range eps {
		at[e.Name] = len(out)
		vs := []VariantSummary{}
		for _, v := range e.Variants {
			if v.Shadow {
				shadow[seriesKey{e.Name, v.Name}] = true
			} else {
				vs = append(vs, VariantSummary{VariantName: v.Name})
			}
		}
		out = append(out, EndpointSummary{EndpointName: e.Name, Variants: vs})
	}
	for _, w := range ws { // by endpoint, then variant
		i, ok := at[w.key.endpoint]
		if !ok {
			i = len(out)
			at[w.key.endpoint] = i
			out = append(out, EndpointSummary{EndpointName: w.key.endpoint, Variants: []VariantSummary{}})
		}
		s := &out[i]
		v := windowSummary(w)
		if v.Shadow = shadow[w.key]; !v.Shadow {
			s.Invocations += v.Invocations
			s.Errors += v.Errors
		}
		j := 0
		for j < len(s.Variants) && s.Variants[j].VariantName != v.VariantName {
			j++
		}
		if j == len(s.Variants) {
			s.Variants = append(s.Variants, v)
		} else {
			s.Variants[j] = v
		}
	}
	for i := range out {
		s := &out[i]
		sort.SliceStable(s.Variants, func(a, b int) bool { return s.Variants[a].VariantName < s.Variants[b].VariantName })
		for j := range s.Variants {
			if s.Invocations > 0 {
				s.Variants[j].TrafficPercent = 100 * float64(s.Variants[j].Invocations) / float64(s.Invocations)
			}
		}
	}
	return out
}

// windowSummary is a variant's figures over its whole window (all but its
// share of the endpoint's invocations).
func windowSummary(w *window) VariantSummary {
	t := w.total()
	p := t.point(w.first)
	v := VariantSummary{VariantName: w.key.variant, Invocations: p.Invocations, Errors: p.Errors,
		LatencyP50Seconds: p.LatencyP50Seconds, LatencyP99Seconds: p.LatencyP99Seconds,
		LatencyMeanSeconds: p.LatencyMeanSeconds, LatencyMaxSeconds: p.LatencyMaxSeconds}
	if p.Invocations > 0 {
		v.ErrorPercent = 100 * float64(p.Errors) / float64(p.Invocations)
	}
	return v
}
