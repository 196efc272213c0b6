package host

import (
	"slices"

	"github.com/mce-run/mce/host/metrics"
	"github.com/mce-run/mce/host/spec"
)

// endpointStatuses are the values mce_endpoint_status enumerates: every
// EndpointStatus mce reports (SageMaker's RollingBack and
// UpdateRollbackFailed never occur here).
var endpointStatuses = []spec.Status{spec.StatusCreating, spec.StatusInService, spec.StatusUpdating, spec.StatusSystemUpdating,
	spec.StatusFailed, spec.StatusDeleting, StatusOutOfService}

// metricsState is what the state metrics read from s at scrape time: its
// inventory, the calls in flight on each variant's route, and the statuses
// it reports.
func metricsState(s *Server) metrics.StateSource {
	return metrics.StateSource{
		Inventory: s.Inventory,
		Inflight: func(yield func(endpoint, variant string, n int64)) {
			for _, e := range s.reg.all() {
				r := e.route.Load()
				if r == nil {
					continue
				}
				for _, v := range slices.Concat(r.Variants(), r.Shadows()) {
					var n int64
					for _, in := range v.Instances() {
						n += in.Outstanding()
					}
					yield(e.name, v.Name(), n)
				}
			}
		},
		Statuses: endpointStatuses,
	}
}
