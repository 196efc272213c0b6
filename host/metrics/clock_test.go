package metrics

import (
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

// TestClockOffset: the gauge is AWS time's lead over the wall clock.
func TestClockOffset(t *testing.T) {
	reg := prometheus.NewRegistry()
	reg.MustRegister(NewClockOffset(func() time.Time { return time.Now().Add(90 * time.Minute) }))
	got, err := testutil.GatherAndCount(reg, "mce_aws_clock_offset_seconds")
	if err != nil || got != 1 {
		t.Fatalf("gathered %d series, %v", got, err)
	}
	mfs, _ := reg.Gather()
	v := mfs[0].GetMetric()[0].GetGauge().GetValue()
	if v < 5399 || v > 5400.5 || !strings.Contains(mfs[0].GetHelp(), "--time-compression") {
		t.Fatalf("offset %v, help %q", v, mfs[0].GetHelp())
	}
}
