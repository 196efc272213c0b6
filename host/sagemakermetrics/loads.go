package sagemakermetrics

import (
	"github.com/aws/aws-sdk-go-v2/aws"

	"github.com/mce-run/mce/host/components"
	"github.com/mce-run/mce/pipeline"
)

// VariantLoadsOf reads the production and shadow variants of an
// endpoint's route (nil: none run): their instances and the calls in
// flight on them.
func VariantLoadsOf(endpoint string, route *pipeline.Route) []VariantLoad {
	if route == nil {
		return nil
	}
	var out []VariantLoad
	for _, v := range append(route.Variants(), route.Shadows()...) {
		l := VariantLoad{Endpoint: endpoint, Variant: v.Name()}
		for _, in := range v.Instances() {
			l.Instances++
			l.InFlight += in.Outstanding()
		}
		out = append(out, l)
	}
	return out
}

// ComponentLoadOf reads an inference component's copies, the calls on
// them and what a copy reserved.
func ComponentLoadOf(c *components.Component) ComponentLoad {
	rec := c.Record()
	l := ComponentLoad{Endpoint: rec.EndpointName, Variant: rec.VariantName, Component: rec.Name}
	if route := c.Route(); route != nil {
		for _, v := range route.Variants() {
			for _, in := range v.Instances() {
				l.Copies++
				l.InFlight += in.Outstanding()
			}
		}
	}
	if r := rec.Spec.ComputeResourceRequirements; r != nil {
		l.CPUCores = aws.ToFloat64(r.NumberOfCpuCoresRequired)
		l.MemoryMiB = int(aws.ToInt32(r.MinMemoryRequiredInMb))
		l.GPUs = int(aws.ToFloat64(r.NumberOfAcceleratorDevicesRequired))
	}
	return l
}
