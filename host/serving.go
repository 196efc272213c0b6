package host

import (
	"strings"

	"github.com/mce-run/mce/host/spec"
	"github.com/mce-run/mce/pipeline"
)

// StatusOutOfService is shown for an InService endpoint that cannot serve
// now: some variant has no instance whose containers are all ready (one
// exited and mce is restarting or recreating it, or it fails its liveness
// pings). SageMaker's enum defines it as "not available to take incoming
// requests"; unlike Failed it is not final, and the endpoint shows InService
// again once its containers are back. Calls meanwhile get
// ServiceUnavailable (503) from the router, which skips containers that are
// not ready. Lifecycle operations (update, delete) stay allowed: the
// endpoint's own state is still InService.
const StatusOutOfService spec.Status = "OutOfService"

// maxFailureReason is FailureReason's length limit.
const maxFailureReason = spec.MaxFailureReason

// unavailable is what a container may say about why it cannot serve;
// docker.Container says it.
type unavailable interface{ Unavailable() string }

// shown is the status and FailureReason that DescribeEndpoint and the
// listings show: the lifecycle status, except that an InService endpoint
// that cannot serve shows as OutOfService with the reason.
func (e *Endpoint) shown(rec EndpointRecord) (spec.Status, string) {
	st := e.Status()
	if st != spec.StatusInService {
		return st, rec.FailureReason
	}
	r := e.route.Load()
	if r == nil || rec.Plan.HostsComponents() { // its components serve, each its own status
		return st, rec.FailureReason
	}
	if why := cannotServe(r); why != "" {
		return StatusOutOfService, why
	}
	return st, rec.FailureReason
}

// cannotServe says which variants of the route have no instance whose
// containers are all ready, and why; "" when every variant can serve.
func cannotServe(r *pipeline.Route) string {
	var reasons []string
	for _, v := range r.Variants() {
		var why []string
		serving := false
		for _, in := range v.Instances() {
			ok := true
			for _, c := range in.Containers() {
				if c.Ready() {
					continue
				}
				ok = false
				reason := "container " + c.Hostname() + " is not ready"
				if u, isU := c.(unavailable); isU {
					if s := u.Unavailable(); s != "" {
						reason = s
					}
				}
				why = append(why, reason)
			}
			if ok {
				serving = true
				break
			}
		}
		if !serving {
			reasons = append(reasons, "Variant "+v.Name()+" cannot serve: "+strings.Join(why, "; "))
		}
	}
	s := strings.Join(reasons, ". ")
	if len(s) > maxFailureReason {
		s = s[:maxFailureReason-3] + "..."
	}
	return s
}
