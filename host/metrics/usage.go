package metrics

import (
	"context"
	"sync"
	"time"

	"github.com/mce-run/mce/containers"
	"github.com/prometheus/client_golang/prometheus"
)

// UsageCollector reports the instance metrics of CloudWatch's namespace
// /aws/sagemaker/Endpoints (https://docs.aws.amazon.com/sagemaker/latest/dg/monitoring-cloudwatch.html).
// The engine's statistics take a second or two per call (Docker's stats
// endpoint), longer than a scrape should wait, so Run samples them in the
// background every interval and a scrape only reads the last sample.
// CloudWatch counts them in percent; Prometheus' base unit for a share is
// the ratio, so each is the CloudWatch value divided by 100.
type UsageCollector struct {
	src                         containers.UsageSource
	cpu, mem, disk, gpu, gpuMem *prometheus.Desc
	mu                          sync.Mutex
	cached                      []prometheus.Metric // the last sample
	// also is told each sample's figures (Also): the one read of the
	// engine's usage feeds every consumer.
	also func([]containers.Usage)
}

// Also hands each sample's figures to fn as well (SageMaker's CloudWatch
// metrics), so that the engine is asked once per interval whoever reads
// them. Call it before Run.
func (c *UsageCollector) Also(fn func([]containers.Usage)) { c.also = fn }

// DefaultUsageInterval is how often the engine's usage figures are sampled
// (the default of host's Config.UsageInterval): CloudWatch's own period for these
// metrics is a minute, and frequent samples load the engine.
const DefaultUsageInterval = 5 * time.Second

// usageSampleTimeout bounds one sample.
const usageSampleTimeout = 30 * time.Second

// NewUsageCollector reports src's figures once Run or Refresh sampled
// them; until then it reports nothing.
func NewUsageCollector(src containers.UsageSource) *UsageCollector {
	return &UsageCollector{
		src: src,
		cpu: newDesc("container_cpu_utilization_ratio",
			"CPU use of a container, summed over cores (0 to the number of cores), averaged over the variant's copies (CloudWatch CPUUtilization / 100).", labelsEVC...),
		mem: newDesc("container_memory_utilization_ratio",
			"Memory use of a container as a share of its limit (or of the host's memory), page cache excluded, averaged over copies (CloudWatch MemoryUtilization / 100).", labelsEVC...),
		disk: newDesc("disk_utilization_ratio",
			"Used share of the filesystem holding mce's model artifacts and caches, shared by every variant (CloudWatch DiskUtilization / 100)."),
		gpu: newDesc("gpu_utilization_ratio",
			"GPU busy share summed over the variant's GPUs (0 to the number of GPUs), from NVML (CloudWatch GPUUtilization / 100).", labelsEV...),
		gpuMem: newDesc("gpu_memory_utilization_ratio",
			"GPU memory use summed over the variant's GPUs (0 to the number of GPUs), from NVML (CloudWatch GPUMemoryUtilization / 100).", labelsEV...),
	}
}

func (c *UsageCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.cpu, c.mem, c.disk, c.gpu, c.gpuMem} {
		ch <- d
	}
}

// Collect implements prometheus.Collector: the last sample, never a call
// to the engine.
func (c *UsageCollector) Collect(ch chan<- prometheus.Metric) {
	c.mu.Lock()
	cached := c.cached
	c.mu.Unlock()
	for _, m := range cached {
		ch <- m
	}
}

// Run samples at once and then every interval until ctx ends.
func (c *UsageCollector) Run(ctx context.Context, every time.Duration) {
	t := time.NewTicker(every)
	defer t.Stop()
	for ctx.Err() == nil { // a tick and the end may come together
		c.Refresh(ctx)
		select {
		case <-ctx.Done():
		case <-t.C:
		}
	}
}

// Refresh takes one sample and makes it the one scrapes read.
func (c *UsageCollector) Refresh(ctx context.Context) {
	ctx, cancel := context.WithTimeout(ctx, usageSampleTimeout)
	defer cancel()
	m := c.sample(ctx)
	c.mu.Lock()
	c.cached = m
	c.mu.Unlock()
}

func (c *UsageCollector) sample(ctx context.Context) []prometheus.Metric {
	type key struct{ e, v, c string }
	type acc struct {
		cpu, mem   float64
		ncpu, nmem int
	}
	per := map[key]*acc{}
	variants := map[[2]string]map[int]bool{}
	us := c.src.Usage(ctx)
	if c.also != nil {
		c.also(us)
	}
	for _, u := range us {
		k := key{u.Endpoint, u.Variant, u.Container}
		a := per[k]
		if a == nil {
			a = &acc{}
			per[k] = a
		}
		if u.CPUPercent >= 0 {
			a.cpu += u.CPUPercent
			a.ncpu++
		}
		a.mem += u.MemoryPercent
		a.nmem++
		vk := [2]string{u.Endpoint, u.Variant}
		if variants[vk] == nil {
			variants[vk] = map[int]bool{}
		}
		for _, g := range u.GPUs {
			variants[vk][g] = true
		}
	}
	var out []prometheus.Metric
	for k, a := range per {
		if a.ncpu > 0 {
			out = append(out, prometheus.MustNewConstMetric(c.cpu, prometheus.GaugeValue, a.cpu/float64(a.ncpu)/100, k.e, k.v, k.c))
		}
		out = append(out, prometheus.MustNewConstMetric(c.mem, prometheus.GaugeValue, a.mem/float64(a.nmem)/100, k.e, k.v, k.c))
	}
	if disk, err := c.src.DiskPercent(); err == nil {
		out = append(out, prometheus.MustNewConstMetric(c.disk, prometheus.GaugeValue, disk/100))
	}
	for vk, gpus := range variants {
		if len(gpus) == 0 {
			continue
		}
		var g, m float64
		ok := true
		for i := range gpus {
			gp, mp, err := c.src.GPUUtilization(i)
			if err != nil {
				ok = false
				break
			}
			g, m = g+gp, m+mp
		}
		if ok {
			out = append(out, prometheus.MustNewConstMetric(c.gpu, prometheus.GaugeValue, g/100, vk[0], vk[1]),
				prometheus.MustNewConstMetric(c.gpuMem, prometheus.GaugeValue, m/100, vk[0], vk[1]))
		}
	}
	return out
}
