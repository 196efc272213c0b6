package metrics

import (
	"runtime/debug"

	"github.com/mce-run/mce/host/inventory"
	"github.com/mce-run/mce/host/spec"
	"github.com/prometheus/client_golang/prometheus"
)

// StateSource is what the state collector reads at scrape time; each
// field is required.
type StateSource struct {
	// Inventory is what the host runs now: endpoints, their variants,
	// copies and containers.
	Inventory func() inventory.Inventory
	// Inflight calls yield once for each variant that has a route now,
	// with its invocations sent to containers and not yet answered.
	Inflight func(yield func(endpoint, variant string, n int64))
	// Statuses are the values mce_endpoint_status enumerates: every
	// EndpointStatus the host reports.
	Statuses []spec.Status
}

// StateCollector reports what the host runs now, read from its inventory
// and its routes at scrape time: no bookkeeping on the invocation path,
// and the series of a deleted endpoint go with it.
type StateCollector struct {
	src StateSource

	status, desired, ready, restarts, inflight   *prometheus.Desc
	loaded, modelLoaded, cacheBytes, cacheModels *prometheus.Desc
	gpuUsed, gpuUnreleased                       *prometheus.Desc
}

// NewStateCollector reads src at every scrape.
func NewStateCollector(src StateSource) *StateCollector {
	return &StateCollector{
		src: src,
		status: newDesc("endpoint_status",
			"1 for the endpoint's current EndpointStatus, 0 for the others (DescribeEndpoint's EndpointStatus; no CloudWatch counterpart).",
			lblEndpoint, lblStatus),
		desired: newDesc("variant_desired_instances",
			"Instances (copies of the container set) the variant's configuration asks for (DescribeEndpoint's DesiredInstanceCount).",
			lblEndpoint, lblVariant),
		ready: newDesc("container_ready",
			"Copies of the container that answer /ping and take calls (DescribeEndpoint's CurrentInstanceCount, per container).",
			lblEndpoint, lblVariant, lblContainer),
		restarts: newDesc("container_restarts_total",
			"Restarts of the container's copies since they were created; a copy replaced by an update or scaling starts again at 0 (no CloudWatch counterpart).",
			lblEndpoint, lblVariant, lblContainer),
		inflight: newDesc("inflight_requests",
			"Invocations sent to the variant's containers and not yet answered (no CloudWatch counterpart).",
			lblEndpoint, lblVariant),
		loaded: newDesc("loaded_models",
			"Models loaded in a multi-model container, summed over the variant's copies (CloudWatch LoadedModelCount).",
			lblEndpoint, lblVariant, lblContainer),
		modelLoaded: newDesc("model_loaded",
			"Copies of a multi-model container that hold the model loaded now; only loaded models have a series (no CloudWatch counterpart: SageMaker has no per-model metrics).",
			lblEndpoint, lblVariant, lblContainer, lblModel),
		cacheBytes: newDesc("model_cache_bytes",
			"Bytes of extracted model files in a multi-model container's disk cache, shared by the variant's copies (no CloudWatch counterpart).",
			lblEndpoint, lblVariant, lblContainer),
		cacheModels: newDesc("model_cache_models",
			"Models whose files are in a multi-model container's disk cache, loaded or not (no CloudWatch counterpart).",
			lblEndpoint, lblVariant, lblContainer),
		gpuUsed: newDesc("mme_gpu_memory_used_bytes",
			"GPU memory of a multi-model container with GPUs, summed over the variant's copies, as its manager last read it around a load or unload: its own processes' where NVML lists them, else its GPUs' used memory (no CloudWatch counterpart; GPUMemoryUtilization is per instance).",
			lblEndpoint, lblVariant, lblContainer),
		gpuUnreleased: newDesc("mme_gpu_memory_unreleased_bytes",
			"GPU memory a multi-model container kept after unloads that freed less than half of what their models' loads took, summed over the variant's copies: its server does not give memory back (no CloudWatch counterpart).",
			lblEndpoint, lblVariant, lblContainer),
	}
}

func (c *StateCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.status, c.desired, c.ready, c.restarts, c.inflight,
		c.loaded, c.modelLoaded, c.cacheBytes, c.cacheModels, c.gpuUsed, c.gpuUnreleased} {
		ch <- d
	}
}

func (c *StateCollector) Collect(ch chan<- prometheus.Metric) {
	gauge := func(d *prometheus.Desc, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, labels...)
	}
	for _, e := range c.src.Inventory().Endpoints {
		for _, st := range c.src.Statuses {
			v := 0.0
			if e.Status == st {
				v = 1
			}
			gauge(c.status, v, e.Name, string(st))
		}
		for _, v := range e.Variants {
			gauge(c.desired, float64(v.DesiredCount), e.Name, v.Name)
			c.collectContainers(ch, e.Name, v)
		}
	}
	c.src.Inflight(func(endpoint, variant string, n int64) {
		gauge(c.inflight, float64(n), endpoint, variant)
	})
}

// collectContainers reports a variant's containers, summed over its copies.
func (c *StateCollector) collectContainers(ch chan<- prometheus.Metric, endpoint string, v inventory.Variant) {
	type acc struct {
		ready, restarts, loaded int
		mm                      *inventory.MultiModel
		models                  map[string]int
		gpu                     bool
		gpuUsed, gpuUnreleased  int64
	}
	var order []string
	per := map[string]*acc{}
	for _, cp := range v.Copies {
		for _, cs := range cp.Containers {
			a := per[cs.Hostname]
			if a == nil {
				a = &acc{}
				per[cs.Hostname] = a
				order = append(order, cs.Hostname)
			}
			if cs.Ready {
				a.ready++
			}
			a.restarts += cs.Restarts
			if mm := cs.MultiModel; mm != nil {
				a.mm = mm // the cache is shared: any copy's view will do
				a.loaded += len(mm.Loaded)
				if a.models == nil {
					a.models = map[string]int{}
				}
				for _, m := range mm.Loaded {
					a.models[m]++
				}
				if g := mm.GPU; g != nil {
					a.gpu = true
					a.gpuUsed += g.UsedBytes
					a.gpuUnreleased += g.UnreleasedBytes
				}
			}
		}
	}
	for _, h := range order {
		a := per[h]
		ch <- prometheus.MustNewConstMetric(c.ready, prometheus.GaugeValue, float64(a.ready), endpoint, v.Name, h)
		ch <- prometheus.MustNewConstMetric(c.restarts, prometheus.CounterValue, float64(a.restarts), endpoint, v.Name, h)
		if a.mm == nil {
			continue
		}
		ch <- prometheus.MustNewConstMetric(c.loaded, prometheus.GaugeValue, float64(a.loaded), endpoint, v.Name, h)
		ch <- prometheus.MustNewConstMetric(c.cacheBytes, prometheus.GaugeValue, float64(a.mm.CacheBytes), endpoint, v.Name, h)
		ch <- prometheus.MustNewConstMetric(c.cacheModels, prometheus.GaugeValue, float64(a.mm.CacheModels), endpoint, v.Name, h)
		if a.gpu {
			ch <- prometheus.MustNewConstMetric(c.gpuUsed, prometheus.GaugeValue, float64(a.gpuUsed), endpoint, v.Name, h)
			ch <- prometheus.MustNewConstMetric(c.gpuUnreleased, prometheus.GaugeValue, float64(a.gpuUnreleased), endpoint, v.Name, h)
		}
		for m, n := range a.models {
			ch <- prometheus.MustNewConstMetric(c.modelLoaded, prometheus.GaugeValue, float64(n), endpoint, v.Name, h, m)
		}
	}
}

// NewBuildInfo is mce_build_info: 1, labelled with the version (host's Config.Version,
// else the module version Go embedded), the VCS revision and the Go version.
func NewBuildInfo(version string) prometheus.Gauge {
	revision, goVersion := "", ""
	if bi, ok := debug.ReadBuildInfo(); ok {
		goVersion = bi.GoVersion
		if version == "" {
			version = bi.Main.Version
		}
		for _, s := range bi.Settings {
			if s.Key == "vcs.revision" {
				revision = s.Value
			}
		}
	}
	if version == "" || version == "(devel)" {
		version = "devel"
	}
	g := prometheus.NewGauge(prometheus.GaugeOpts{Namespace: namespace, Name: "build_info",
		Help:        "1, labelled with the version, VCS revision and Go version mce was built with.",
		ConstLabels: prometheus.Labels{"version": version, "revision": revision, "goversion": goVersion}})
	g.Set(1)
	return g
}
