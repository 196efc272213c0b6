package host

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sagemakerruntime"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/mce-run/mce/containers"
	"github.com/mce-run/mce/host/metrics"
)

// usageStub stands in for NVML and the engine's statistics, which need a
// GPU and running containers: it reports fixed percentages.
type usageStub struct{}

func (usageStub) Usage(context.Context) []containers.Usage {
	return []containers.Usage{
		{Endpoint: "e", Variant: "v", Container: "c", Copy: 0, CPUPercent: 150, MemoryPercent: 40, GPUs: []int{0, 1}},
		{Endpoint: "e", Variant: "v", Container: "c", Copy: 1, CPUPercent: 50, MemoryPercent: 20, GPUs: []int{0, 1}},
		{Endpoint: "e", Variant: "w", Container: "c", CPUPercent: -1, MemoryPercent: 10}, // no CPU figure yet
	}
}
func (usageStub) DiskPercent() (float64, error) { return 30, nil }
func (usageStub) GPUUtilization(i int) (float64, float64, error) {
	if i > 1 {
		return 0, 0, errors.New("no such GPU")
	}
	return 50, 25, nil
}

// TestMetricsLint runs the Prometheus client's linter (the rules of promtool
// check metrics) over every metric of a server that has served calls.
func TestMetricsLint(t *testing.T) {
	h := newHarness(t, Config{})
	if err := h.deploy(plan("m", "Direct", map[string][]string{"AllTraffic": {"a:A", "b:B"}})); err != nil {
		t.Fatal(err)
	}
	if _, err := h.invoke(&sagemakerruntime.InvokeEndpointInput{EndpointName: aws.String("m"), Body: body("x"), TargetContainerHostname: aws.String("a")}); err != nil {
		t.Fatal(err)
	}
	h.srv.metrics.MultiModelObserver("m", "AllTraffic", "a").ModelCacheHit(true)
	reg := prometheus.NewPedanticRegistry() // also checks each collector's Describe against what it collects
	uc := metrics.NewUsageCollector(usageStub{})
	uc.Refresh(context.Background())
	reg.MustRegister(uc, metrics.NewStateCollector(metricsState(h.srv)))
	for _, g := range []prometheus.Gatherer{h.srv.metrics.Registry(), reg} {
		problems, err := testutil.GatherAndLint(g)
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range problems {
			t.Errorf("%s: %s", p.Metric, p.Text)
		}
	}
	n, err := testutil.GatherAndCount(h.srv.metrics.Registry())
	if err != nil || n < 20 {
		t.Errorf("%d series gathered (%v); want the invocation, multi-model and state metrics", n, err)
	}
}

// TestMetricsOfRefusedTargetVariant: a call refused because its
// TargetVariant names no production variant (an unknown name, or a shadow
// variant) reached no variant and counts in none: a caller's names make no
// series, and a shadow's Invocations count only its copies.
func TestMetricsOfRefusedTargetVariant(t *testing.T) {
	h := newHarness(t, Config{MetricsOnAPI: true})
	p := plan("m", "Serial", map[string][]string{"AllTraffic": {"a:A"}, "Shadow": {"s:S"}})
	p.Variants[1].Shadow = true
	if err := h.deploy(p); err != nil {
		t.Fatal(err)
	}
	for _, target := range []string{"nope-1", "nope-2", "Shadow"} {
		_, err := h.invoke(&sagemakerruntime.InvokeEndpointInput{EndpointName: aws.String("m"), Body: body("x"), TargetVariant: aws.String(target)})
		wantAPIError(t, err, "ValidationError", target)
	}
	text := h.metricsText(t)
	for _, series := range []string{`variant="nope-1"`, `variant="nope-2"`, `mce_invocations_total{endpoint="m",variant="Shadow"}`} {
		if strings.Contains(text, series) {
			t.Errorf("/metrics has %s after calls refused before reaching a variant", series)
		}
	}
}
