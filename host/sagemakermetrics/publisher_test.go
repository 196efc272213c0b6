package sagemakermetrics

import (
	"context"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mce-run/mce/containers"
	"github.com/mce-run/mce/host/cloudwatch"
	"github.com/mce-run/mce/pipeline"
)

var t0 = time.Date(2026, 11, 28, 10, 0, 0, 0, time.UTC)

type clock struct{ ns atomic.Int64 }

func newClock(t time.Time) *clock {
	c := &clock{}
	c.ns.Store(t.UnixNano())
	return c
}
func (c *clock) Now() time.Time      { return time.Unix(0, c.ns.Load()).UTC() }
func (c *clock) Set(t time.Time)     { c.ns.Store(t.UnixNano()) }
func (c *clock) Add(d time.Duration) { c.ns.Add(int64(d)) }

func open(t testing.TB, c *clock, src Sources, mod func(*cloudwatch.Options)) (*Publisher, *cloudwatch.Service) {
	t.Helper()
	o := cloudwatch.Options{Dir: filepath.Join(t.TempDir(), "cw"), Now: c.Now, FlushInterval: time.Hour}
	if mod != nil {
		mod(&o)
	}
	svc, err := cloudwatch.Open(o)
	if err != nil {
		t.Fatal(err)
	}
	// The samplers tick on the wall clock; the tests call them by hand.
	p, err := New(Options{Service: svc, Sources: src, Now: c.Now, BacklogEvery: time.Hour, ConcurrencyEvery: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close(); svc.Close() })
	return p, svc
}

func vdims(e, v string) []cloudwatch.Dimension { return variantDims(e, v) }

func stat(t *testing.T, svc *cloudwatch.Service, ns, metric string, dims []cloudwatch.Dimension, stats ...string) cloudwatch.Datapoint {
	t.Helper()
	dps, err := svc.Statistics(ns, metric, dims, "", t0.Add(-time.Hour), t0.Add(2*time.Hour), 3600, stats...)
	if err != nil {
		t.Fatalf("%s: %v", metric, err)
	}
	if len(dps) != 1 {
		t.Fatalf("%s %v: %d datapoints, want 1", metric, dims, len(dps))
	}
	return dps[0]
}

func val(p *float64) float64 {
	if p == nil {
		return math.NaN()
	}
	return *p
}

// TestInvocationMetrics: each call is one Invocations, 1/instances of
// InvocationsPerInstance, a 0 or 1 of each error metric (so that Average
// is the error rate, as SageMaker publishes them), and the latencies of
// the calls the model answered, in microseconds.
func TestInvocationMetrics(t *testing.T) {
	c := newClock(t0)
	p, svc := open(t, c, Sources{Variants: func() []VariantLoad {
		return []VariantLoad{{Endpoint: "ep", Variant: "A", Instances: 2, InFlight: 3}}
	}}, nil)
	p.sampleConcurrency(c.Now())
	for range 6 {
		p.Invocation("ep", "A", 3*time.Millisecond, 2*time.Millisecond, nil)
	}
	p.Invocation("ep", "A", time.Millisecond, 0, &pipeline.ModelError{Variant: "A", OriginalStatusCode: 404})
	p.Invocation("ep", "A", time.Millisecond, 0, &pipeline.ModelError{Variant: "A", OriginalStatusCode: 500})
	p.Invocation("ep", "A", time.Millisecond, 0, &pipeline.ModelError{Variant: "A"}) // a timeout: no status
	p.Invocation("ep", "A", time.Millisecond, 0, errors.New("no ready instance"))
	p.Invocation("ep", "", time.Millisecond, 0, errors.New("no variant reached")) // counted nowhere
	d := vdims("ep", "A")
	for _, tc := range []struct {
		metric     string
		sum, count float64
	}{
		{"Invocations", 10, 10}, {"InvocationsPerInstance", 5, 10}, {"Invocation4XXErrors", 1, 10},
		{"Invocation5XXErrors", 1, 10}, {"InvocationModelErrors", 3, 10}, {"ModelLatency", 6 * 2000, 6},
		{"OverheadLatency", 6 * 1000, 6},
	} {
		dp := stat(t, svc, NamespaceInvocations, tc.metric, d, "Sum", "SampleCount")
		if val(dp.Sum) != tc.sum || val(dp.SampleCount) != tc.count {
			t.Errorf("%s: Sum %v SampleCount %v, want %v and %v", tc.metric, val(dp.Sum), val(dp.SampleCount), tc.sum, tc.count)
		}
	}
	if dp := stat(t, svc, NamespaceInvocations, "ConcurrentRequestsPerModel", d, "Maximum"); val(dp.Maximum) != 3 {
		t.Errorf("ConcurrentRequestsPerModel Maximum = %v, want 3", val(dp.Maximum))
	}
	if dp := stat(t, svc, NamespaceInvocations, "ModelLatency", d, "p50"); math.Abs(dp.ExtendedStatistics["p50"]-2000) > 20 {
		t.Errorf("ModelLatency p50 = %v µs, want 2000 within 1 %%", dp.ExtendedStatistics["p50"])
	}
}

// TestComponentAndMultiModelMetrics: a component's calls under
// InferenceComponentName, its calls in flight per copy; the multi-model
// events under the variant, LoadedModelCount summed over its containers.
func TestComponentAndMultiModelMetrics(t *testing.T) {
	c := newClock(t0)
	p, svc := open(t, c, Sources{Components: func() []ComponentLoad {
		return []ComponentLoad{{Endpoint: "ep", Variant: "AllTraffic", Component: "ic", Copies: 2, InFlight: 5}}
	}}, nil)
	p.ComponentInvocation("ic", 2*time.Millisecond, time.Millisecond, nil)
	p.ComponentInvocation("ic", time.Millisecond, 0, &pipeline.ModelError{OriginalStatusCode: 400})
	p.sampleConcurrency(c.Now())
	cd := []cloudwatch.Dimension{{Name: "InferenceComponentName", Value: "ic"}}
	if dp := stat(t, svc, NamespaceInvocations, "Invocations", cd, "Sum"); val(dp.Sum) != 2 {
		t.Errorf("component Invocations = %v, want 2", val(dp.Sum))
	}
	if dp := stat(t, svc, NamespaceInvocations, "Invocation4XXErrors", cd, "Sum"); val(dp.Sum) != 1 {
		t.Errorf("component 4XX = %v, want 1", val(dp.Sum))
	}
	if dp := stat(t, svc, NamespaceInvocations, "ConcurrentRequestsPerCopy", cd, "Average"); val(dp.Average) != 2.5 {
		t.Errorf("ConcurrentRequestsPerCopy = %v, want 2.5", val(dp.Average))
	}
	// The 2 calls before the first sample count 1 each (one copy assumed);
	// 2 more, once the sampler saw 2 copies, count 1/2 each.
	p.ComponentInvocation("ic", time.Millisecond, time.Millisecond, nil)
	p.ComponentInvocation("ic", time.Millisecond, time.Millisecond, nil)
	if dp := stat(t, svc, NamespaceInvocations, "InvocationsPerCopy", cd, "Sum"); math.Abs(val(dp.Sum)-3) > 1e-9 {
		t.Errorf("InvocationsPerCopy = %v, want 3 (2 calls at 1 copy, 2 at 2 copies)", val(dp.Sum))
	}
	p.NoCapacityInvocation("ic")
	p.NoCapacityInvocation("ic")
	p.NoCapacityInvocation("") // no component: nothing to count
	if dp := stat(t, svc, NamespaceInvocations, "NoCapacityInvocationFailures", cd, "Sum"); val(dp.Sum) != 2 {
		t.Errorf("NoCapacityInvocationFailures = %v, want 2", val(dp.Sum))
	}
	if dp := stat(t, svc, NamespaceInvocations, "Invocations", cd, "Sum"); val(dp.Sum) != 4 {
		t.Errorf("component Invocations after refused calls = %v, want still 4 (a refused call reached no copy)", val(dp.Sum))
	}

	o1 := p.MultiModelObserver("mm", "AllTraffic", "c1")
	o2 := p.MultiModelObserver("mm", "AllTraffic", "c2")
	o1.ModelCacheHit(false)
	o1.ModelLoadingWaitTime(30 * time.Millisecond)
	o1.ModelDownloadingTime(10 * time.Millisecond)
	o1.ModelLoadingTime(20 * time.Millisecond)
	o1.LoadedModelCount(2)
	o2.LoadedModelCount(3)
	o1.ModelCacheHit(true)
	o1.ModelCacheHit(true)
	o2.ModelUnloadingTime(5 * time.Millisecond)
	d := vdims("mm", "AllTraffic")
	for _, tc := range []struct {
		metric, stat string
		want         float64
	}{
		{"ModelCacheHit", "Average", 2.0 / 3}, {"ModelLoadingWaitTime", "Sum", 30000}, {"ModelDownloadingTime", "Sum", 10000},
		{"ModelLoadingTime", "Sum", 20000}, {"ModelUnloadingTime", "Sum", 5000}, {"LoadedModelCount", "Maximum", 5},
	} {
		dp := stat(t, svc, NamespaceInvocations, tc.metric, d, tc.stat)
		got := map[string]*float64{"Average": dp.Average, "Sum": dp.Sum, "Maximum": dp.Maximum}[tc.stat]
		if math.Abs(val(got)-tc.want) > 1e-9 {
			t.Errorf("%s %s = %v, want %v", tc.metric, tc.stat, val(got), tc.want)
		}
	}
}

type usage struct {
	us   []containers.Usage
	disk float64
	gpu  map[int][2]float64
}

func (u usage) Usage(context.Context) []containers.Usage { return u.us }
func (u usage) DiskPercent() (float64, error)            { return u.disk, nil }
func (u usage) GPUUtilization(i int) (float64, float64, error) {
	g, ok := u.gpu[i]
	if !ok {
		return 0, 0, errors.New("no such GPU")
	}
	return g[0], g[1], nil
}

// TestUtilizationAndBacklog: /aws/sagemaker/Endpoints per instance of a
// variant (CPU summed over its containers, GPUs over the variant's),
// /aws/sagemaker/InferenceComponents against what a copy reserved, and the
// asynchronous backlog.
func TestUtilizationAndBacklog(t *testing.T) {
	c := newClock(t0)
	u := usage{disk: 40, gpu: map[int][2]float64{0: {50, 20}, 1: {70, 40}}, us: []containers.Usage{
		{Endpoint: "ep", Variant: "A", Container: "pre", Copy: 0, CPUPercent: 30, MemoryPercent: 10},
		{Endpoint: "ep", Variant: "A", Container: "model", Copy: 0, CPUPercent: 90, MemoryPercent: 30, GPUs: []int{0}},
		{Endpoint: "ep", Variant: "A", Container: "pre", Copy: 1, CPUPercent: 10, MemoryPercent: 10},
		{Endpoint: "ep", Variant: "A", Container: "model", Copy: 1, CPUPercent: 50, MemoryPercent: 50, GPUs: []int{1}},
		{Endpoint: "ic-ep", Variant: "AllTraffic", Container: "ic", Copy: 0, CPUPercent: 150, MemoryPercent: 60, GPUs: []int{1}},
	}}
	p, svc := open(t, c, Sources{
		Usage: u,
		Components: func() []ComponentLoad {
			return []ComponentLoad{{Endpoint: "ic-ep", Variant: "AllTraffic", Component: "ic", Copies: 1, CPUCores: 2}}
		},
		Backlogs: func() []Backlog {
			return []Backlog{{Endpoint: "async", Size: 6, Instances: 2, Oldest: 90 * time.Second}, {Endpoint: "starved", Size: 1}}
		},
	}, nil)
	p.sampleBacklogs(c.Now())
	p.ObserveUsage(u.us)
	d := vdims("ep", "A")
	for _, tc := range []struct {
		ns, metric, stat string
		dims             []cloudwatch.Dimension
		want             float64
	}{
		{NamespaceEndpoints, "CPUUtilization", "Maximum", d, 120},      // copy 0: 30 + 90
		{NamespaceEndpoints, "CPUUtilization", "Minimum", d, 60},       // copy 1: 10 + 50
		{NamespaceEndpoints, "MemoryUtilization", "Average", d, 25},    // (20 + 30) / 2
		{NamespaceEndpoints, "GPUUtilization", "Average", d, 120},      // 50 + 70
		{NamespaceEndpoints, "GPUMemoryUtilization", "Average", d, 60}, // 20 + 40
		{NamespaceEndpoints, "DiskUtilization", "Average", d, 40},
		{NamespaceComponents, "CPUUtilizationNormalized", "Average", []cloudwatch.Dimension{{Name: "InferenceComponentName", Value: "ic"}}, 75},
		{NamespaceComponents, "MemoryUtilizationNormalized", "Average", []cloudwatch.Dimension{{Name: "InferenceComponentName", Value: "ic"}}, 60},
		{NamespaceComponents, "GPUUtilizationNormalized", "Average", []cloudwatch.Dimension{{Name: "InferenceComponentName", Value: "ic"}}, 70},
		{NamespaceInvocations, "ApproximateBacklogSize", "Average", []cloudwatch.Dimension{{Name: "EndpointName", Value: "async"}}, 6},
		{NamespaceInvocations, "ApproximateBacklogSizePerInstance", "Average", []cloudwatch.Dimension{{Name: "EndpointName", Value: "async"}}, 3},
		{NamespaceInvocations, "ApproximateAgeOfOldestRequest", "Average", []cloudwatch.Dimension{{Name: "EndpointName", Value: "async"}}, 90},
		{NamespaceInvocations, "HasBacklogWithoutCapacity", "Average", []cloudwatch.Dimension{{Name: "EndpointName", Value: "async"}}, 0},
		{NamespaceInvocations, "HasBacklogWithoutCapacity", "Average", []cloudwatch.Dimension{{Name: "EndpointName", Value: "starved"}}, 1},
	} {
		dp := stat(t, svc, tc.ns, tc.metric, tc.dims, tc.stat)
		got := map[string]*float64{"Average": dp.Average, "Maximum": dp.Maximum, "Minimum": dp.Minimum}[tc.stat]
		if val(got) != tc.want {
			t.Errorf("%s %s %s = %v, want %v", tc.ns, tc.metric, tc.stat, val(got), tc.want)
		}
	}
}

// TestPruneForgetsGoneVariants: handles of variants and components that no
// longer serve are dropped, so endpoints made and deleted under new names
// do not grow the publisher; what they recorded stays readable.
func TestPruneForgetsGoneVariants(t *testing.T) {
	c := newClock(t0)
	var live []VariantLoad
	p, svc := open(t, c, Sources{Variants: func() []VariantLoad { return live }, Components: func() []ComponentLoad { return nil }}, nil)
	for i := range 50 {
		p.Invocation(fmt.Sprint("ep", i), "A", time.Millisecond, time.Millisecond, nil)
		p.ComponentInvocation(fmt.Sprint("ic", i), time.Millisecond, time.Millisecond, nil)
	}
	live = []VariantLoad{{Endpoint: "ep7", Variant: "A", Instances: 1}}
	p.sampleConcurrency(c.Now())
	p.mu.RLock()
	nv, nc := len(p.variants), len(p.components)
	p.mu.RUnlock()
	if nv != 1 || nc != 0 {
		t.Errorf("after the prune: %d variants and %d components held, want 1 and 0", nv, nc)
	}
	if dp := stat(t, svc, NamespaceInvocations, "Invocations", vdims("ep3", "A"), "Sum"); val(dp.Sum) != 1 {
		t.Errorf("a deleted endpoint's Invocations = %v, want the 1 it recorded", val(dp.Sum))
	}
}

// TestCatalogueIsDocumented: every metric the publisher writes is in the
// catalogue of docs/cloudwatch-metrics.md, with its namespace and unit.
func TestCatalogueIsDocumented(t *testing.T) {
	doc := readDoc(t)
	if n := len(Catalogue()); n != 30 {
		t.Fatalf("the catalogue lists %d metrics, want the 30 declared", n)
	}
	for _, m := range Catalogue() {
		row := fmt.Sprintf("| `%s` | `%s` |", m.Namespace, m.Name)
		i := indexOf(doc, row)
		if i < 0 {
			t.Errorf("docs/cloudwatch-metrics.md has no catalogue row starting %q", row)
			continue
		}
		line := doc[i:]
		if j := indexOf(line, "\n"); j >= 0 {
			line = line[:j]
		}
		if indexOf(line, "`"+m.Unit+"`") < 0 {
			t.Errorf("the row of %s says no unit `%s`: %s", m.Name, m.Unit, line)
		}
	}
}

func readDoc(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile("../../docs/cloudwatch-metrics.md")
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func indexOf(s, sub string) int { return strings.Index(s, sub) }
