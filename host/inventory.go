package host

import (
	"time"

	"github.com/mce-run/mce/host/inventory"
)

// Inventory returns a snapshot of the endpoints and their containers.
func (s *Server) Inventory() inventory.Inventory {
	inv := inventory.Inventory{Taken: time.Now().UTC(), Endpoints: []inventory.Endpoint{}}
	for _, e := range s.reg.all() {
		e.mu.Lock()
		rec, launched := e.rec, e.launched
		e.mu.Unlock()
		status, reason := e.shown(rec)
		es := inventory.Endpoint{Name: e.name, Status: status, FailureReason: reason, ConfigName: rec.ConfigName,
			Mode: endpointMode(rec, e.multiModel.Load()), Created: rec.Created, Modified: rec.Modified,
			Variants: []inventory.Variant{}}
		for _, v := range rec.Plan.Variants {
			vs := inventory.Variant{Name: v.Name, ModelName: v.ModelName, InstanceType: v.InstanceType,
				Weight: v.Weight, DesiredCount: v.InstanceCount, Shadow: v.Shadow, Copies: []inventory.Copy{}}
			if t, ok := rec.Desired[v.Name]; ok { // scaling now (UpdateEndpointWeightsAndCapacities, autoscaling)
				vs.DesiredCount = t.Count
			}
			images := map[string]string{}
			for _, c := range v.Containers {
				images[c.Hostname] = c.Image
			}
			if launched != nil {
				for i, cp := range launched.Copies(v.Name) {
					cs := inventory.Copy{Index: i, Containers: []inventory.Container{}}
					for _, c := range cp {
						cs.Containers = append(cs.Containers, inventory.ContainerOf(c.Hostname(), images[c.Hostname()], c.Ready(), c))
					}
					vs.Copies = append(vs.Copies, cs)
				}
			}
			for _, cp := range s.ics.RunningCopies(e.name, v.Name) { // inference components'
				cs := inventory.Copy{Index: len(vs.Copies), Containers: []inventory.Container{}}
				for _, ct := range cp.Containers {
					cs.Containers = append(cs.Containers, inventory.ContainerOf(ct.Hostname(), cp.Image, ct.Ready(), ct))
				}
				vs.Copies = append(vs.Copies, cs)
			}
			es.Variants = append(es.Variants, vs)
		}
		inv.Endpoints = append(inv.Endpoints, es)
	}
	return inv
}

// endpointMode names how an endpoint routes: MultiModel for a multi-model
// endpoint, else its InferenceExecutionConfig mode.
func endpointMode(rec EndpointRecord, multiModel bool) string {
	if multiModel {
		return "MultiModel"
	}
	for _, v := range rec.Plan.Variants {
		for _, c := range v.Containers {
			if c.Mode == "MultiModel" {
				return "MultiModel"
			}
		}
	}
	return rec.Plan.Mode
}
