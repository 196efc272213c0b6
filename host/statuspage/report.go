package statuspage

import (
	"time"

	"github.com/mce-run/mce/host/inventory"
)

// Report is what GET /status.json answers: the inventory and the
// charts' series.
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
	return rep, ws
}
