package host

import (
	"time"
)

// Inventory returns a snapshot of the endpoints and their containers.
func (s *Server) Inventory() Inventory {
	inv := Inventory{Taken: time.Now().UTC(), Endpoints: []EndpointSnapshot{}}
	for _, e := range s.reg.all() {
		e.mu.Lock()
		rec, launched := e.rec, e.launched
		e.mu.Unlock()
		status, reason := e.shown(rec)
		es := EndpointSnapshot{Name: e.name, Status: status, FailureReason: reason, ConfigName: rec.ConfigName,
			Mode: endpointMode(rec, e.multiModel.Load()), Created: rec.Created, Modified: rec.Modified,
			Variants: []VariantSnapshot{}}
		for _, v := range rec.Plan.Variants {
			vs := VariantSnapshot{Name: v.Name, ModelName: v.ModelName, InstanceType: v.InstanceType,
				Weight: v.Weight, DesiredCount: v.InstanceCount, Copies: []CopySnapshot{}}
			images := map[string]string{}
			for _, c := range v.Containers {
				images[c.Hostname] = c.Image
			}
			if launched != nil {
				for i, cp := range launched.Copies(v.Name) {
					cs := CopySnapshot{Index: i, Containers: []ContainerSnapshot{}}
					for _, c := range cp {
						cs.Containers = append(cs.Containers, containerSnapshot(c.Hostname(), images[c.Hostname()], c.Ready(), c))
					}
					vs.Copies = append(vs.Copies, cs)
				}
			}
			for _, cp := range s.ics.RunningCopies(e.name, v.Name) { // inference components'
				cs := CopySnapshot{Index: len(vs.Copies), Containers: []ContainerSnapshot{}}
				for _, ct := range cp.Containers {
					cs.Containers = append(cs.Containers, containerSnapshot(ct.Hostname(), cp.Image, ct.Ready(), ct))
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
