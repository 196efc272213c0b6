package metrics

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/mce-run/mce/host/components"
)

// ComponentCollector reports each inference component's copies and GPUs at
// scrape time, from gauges (the components Manager's Gauges). Its
// invocations and latencies are those of its container (the copies'
// container is named after the component): the mce_container_* series with
// container="<component>".
type ComponentCollector struct {
	gauges                 func() []components.Gauge
	desired, current, gpus *prometheus.Desc
}

const lblComponent = "inference_component"

// NewComponentCollector calls gauges at every scrape.
func NewComponentCollector(gauges func() []components.Gauge) ComponentCollector {
	return ComponentCollector{gauges: gauges,
		desired: newDesc("inference_component_desired_copies",
			"Copies the inference component asks for (DescribeInferenceComponent's RuntimeConfig.DesiredCopyCount).",
			lblEndpoint, lblVariant, lblComponent),
		current: newDesc("inference_component_current_copies",
			"Copies of the inference component that take calls (DescribeInferenceComponent's RuntimeConfig.CurrentCopyCount).",
			lblEndpoint, lblVariant, lblComponent),
		gpus: newDesc("inference_component_gpus",
			"GPUs held by the inference component's copies (NumberOfAcceleratorDevicesRequired times its placed copies: pinned by device ID on Docker, nvidia.com/gpu limits on Kubernetes; no CloudWatch counterpart).",
			lblEndpoint, lblVariant, lblComponent),
	}
}

func (c ComponentCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.desired
	ch <- c.current
	ch <- c.gpus
}

func (c ComponentCollector) Collect(ch chan<- prometheus.Metric) {
	for _, g := range c.gauges() {
		labels := []string{g.Endpoint, g.Variant, g.Component}
		ch <- prometheus.MustNewConstMetric(c.desired, prometheus.GaugeValue, float64(g.Desired), labels...)
		ch <- prometheus.MustNewConstMetric(c.current, prometheus.GaugeValue, float64(g.Current), labels...)
		ch <- prometheus.MustNewConstMetric(c.gpus, prometheus.GaugeValue, float64(g.GPUs), labels...)
	}
}
