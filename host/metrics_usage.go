package host

import (
	"context"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/mce-run/mce/containers"
)

// UsageSource is implemented by backends that can sample their containers'
// resource use (the Docker backend does).
type UsageSource interface {
	Usage(ctx context.Context) []containers.Usage
	DiskPercent() (float64, error)
	GPUUtilization(index int) (gpuPercent, memoryPercent float64, err error)
}

// Usage implements UsageSource.
func (b *DockerBackend) Usage(ctx context.Context) []containers.Usage { return b.Runtime.Usage(ctx) }

// DiskPercent implements UsageSource.
func (b *DockerBackend) DiskPercent() (float64, error) { return b.Runtime.DiskPercent() }

// GPUUtilization implements UsageSource.
func (b *DockerBackend) GPUUtilization(i int) (float64, float64, error) {
	return b.Runtime.GPUUtilization(i)
}

// usageCollector reports SageMaker's instance metrics (contracts doc §6,
// namespace /aws/sagemaker/Endpoints) at scrape time, sampling at most once
// per usageTTL so that frequent scrapes do not load the engine.
type usageCollector struct {
	src                         UsageSource
	cpu, mem, disk, gpu, gpuMem *prometheus.Desc
	mu                          sync.Mutex
	at                          time.Time
	cached                      []prometheus.Metric
}

const usageTTL = 5 * time.Second

func newUsageCollector(src UsageSource) *usageCollector {
	evc := []string{dimEndpoint, dimVariant, dimContainer}
	ev := []string{dimEndpoint, dimVariant}
	return &usageCollector{
		src:    src,
		cpu:    prometheus.NewDesc("CPUUtilization", "CPU use of a container, percent summed over cores (0-100 x cores), averaged over the variant's copies.", evc, nil),
		mem:    prometheus.NewDesc("MemoryUtilization", "Memory use of a container, percent of its limit (or the host's memory), page cache excluded, averaged over copies.", evc, nil),
		disk:   prometheus.NewDesc("DiskUtilization", "Used share of the filesystem holding mce's model artifacts and caches, percent.", ev, nil),
		gpu:    prometheus.NewDesc("GPUUtilization", "GPU busy share summed over the variant's GPUs (0-100 x GPUs), from NVML.", ev, nil),
		gpuMem: prometheus.NewDesc("GPUMemoryUtilization", "GPU memory use summed over the variant's GPUs (0-100 x GPUs), from NVML.", ev, nil),
	}
}

func (c *usageCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.cpu, c.mem, c.disk, c.gpu, c.gpuMem} {
		ch <- d
	}
}

func (c *usageCollector) Collect(ch chan<- prometheus.Metric) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if time.Since(c.at) > usageTTL {
		c.cached = c.sample()
		c.at = time.Now()
	}
	for _, m := range c.cached {
		ch <- m
	}
}

func (c *usageCollector) sample() []prometheus.Metric {
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Second)
	defer cancel()
	type key struct{ e, v, c string }
	type acc struct {
		cpu, mem   float64
		ncpu, nmem int
	}
	per := map[key]*acc{}
	variants := map[[2]string]map[int]bool{}
	for _, u := range c.src.Usage(ctx) {
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
			out = append(out, prometheus.MustNewConstMetric(c.cpu, prometheus.GaugeValue, a.cpu/float64(a.ncpu), k.e, k.v, k.c))
		}
		out = append(out, prometheus.MustNewConstMetric(c.mem, prometheus.GaugeValue, a.mem/float64(a.nmem), k.e, k.v, k.c))
	}
	disk, derr := c.src.DiskPercent()
	for vk, gpus := range variants {
		if derr == nil {
			out = append(out, prometheus.MustNewConstMetric(c.disk, prometheus.GaugeValue, disk, vk[0], vk[1]))
		}
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
			out = append(out, prometheus.MustNewConstMetric(c.gpu, prometheus.GaugeValue, g, vk[0], vk[1]),
				prometheus.MustNewConstMetric(c.gpuMem, prometheus.GaugeValue, m, vk[0], vk[1]))
		}
	}
	return out
}
