package host

import (
	"regexp"

	"github.com/mce-run/mce/host/metrics"
	"github.com/prometheus/client_golang/prometheus"
)

var fqNameRe = regexp.MustCompile(`fqName: "([^"]+)"`)

// UsageMetricNames lists the names the resource-use collector can report.
// A scrape shows a name only when it has a sample (the GPU metrics need
// GPUs), so tests of the dashboard check the names against this list.
func UsageMetricNames() []string {
	ch := make(chan *prometheus.Desc, 16)
	metrics.NewUsageCollector(nil).Describe(ch)
	close(ch)
	var out []string
	for d := range ch {
		if m := fqNameRe.FindStringSubmatch(d.String()); m != nil {
			out = append(out, m[1])
		}
	}
	return out
}
