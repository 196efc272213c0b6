package metrics

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// NewClockOffset is mce_aws_clock_offset_seconds: how far AWS time (mce
// serve --time-compression) runs ahead of the wall clock, read at scrape
// time from now. The timestamps mce's CloudWatch API answers and expects
// are on that clock; a client that measured a run in wall time (mce
// loadtest) shifts its window by this much to ask for the same minutes.
func NewClockOffset(now func() time.Time) prometheus.Collector {
	return prometheus.NewGaugeFunc(prometheus.GaugeOpts{Namespace: namespace, Name: "aws_clock_offset_seconds",
		Help: "How far AWS time runs ahead of the wall clock under mce serve --time-compression (0 without it): add it to a wall-clock time to ask mce's CloudWatch API for that moment."},
		func() float64 { return now().Sub(time.Now()).Seconds() })
}
