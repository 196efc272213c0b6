package host

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
	"time"

	"github.com/mce-run/mce/host/components"
	"github.com/mce-run/mce/host/spec"
	"github.com/mce-run/mce/host/store"
)

// Apply makes the state match a bundle of endpoint files, through the same
// operations as the API: missing models and configurations are created,
// changed ones replaced (files are the source of truth for what they define);
// a missing endpoint is created, a Failed one recreated.
//
// An endpoint that exists is left as it is when the files' definition of it
// (endpoint, configuration and models) is unchanged since Apply last applied
// it: the files give its initial configuration, and what the API changed
// since (UpdateEndpointWeightsAndCapacities, UpdateEndpoint) is kept across
// restarts. When that definition changed, or the endpoint was not created
// from the files, or its last update failed, the files win and the endpoint
// is updated to them. A log line says which and why. It returns the names of
// the files' endpoints.
func (s *Server) Apply(ctx context.Context, b *spec.Bundle) ([]string, error) {
	for _, m := range b.Models {
		old, err := s.getModel(m.ModelName)
		if err == nil && reflect.DeepEqual(old.Input, m.CreateModelInput) && old.BaseDir == m.Dir {
			continue
		}
		if err == nil {
			s.store.Delete(store.Models, m.ModelName)
		}
		if _, err := s.CreateModel(ctx, m.CreateModelInput, m.Dir); err != nil {
			return nil, fmt.Errorf("%s: %s: %w", m.File, m.Path, err)
		}
	}
	changedConfigs := map[string]bool{}
	for _, c := range b.EndpointConfigs {
		old, err := s.getConfig(c.EndpointConfigName)
		if err == nil && reflect.DeepEqual(old.Input, c.CreateEndpointConfigInput) {
			continue
		}
		if err == nil {
			s.store.Delete(store.EndpointConfigs, c.EndpointConfigName)
		}
		changedConfigs[strings.ToLower(c.EndpointConfigName)] = true
		if _, err := s.CreateEndpointConfig(ctx, c.CreateEndpointConfigInput); err != nil {
			return nil, fmt.Errorf("%s: %s: %w", c.File, c.Path, err)
		}
	}
	var names []string
	for _, ep := range b.Endpoints {
		names = append(names, ep.EndpointName)
		e := s.reg.get(ep.EndpointName)
		if e != nil && e.Status() == spec.StatusFailed {
			if err := s.DeleteEndpoint(ctx, ep.EndpointName); err != nil {
				return nil, err
			}
			e = nil
		}
		digest := fileDigest(b, ep)
		if e == nil {
			if _, err := s.CreateEndpoint(ctx, ep.CreateEndpointInput); err != nil {
				return nil, fmt.Errorf("%s: %s: %w", ep.File, ep.Path, err)
			}
			if e = s.reg.get(ep.EndpointName); e != nil {
				s.save(e, func(r *EndpointRecord) { r.Applied = digest })
			}
			continue
		}
		plan, dc, err := s.planFor(ep.CreateEndpointInput)
		if err != nil {
			return nil, fmt.Errorf("%s: %s: %w", ep.File, ep.Path, err)
		}
		rec := e.record()
		log := s.log.With().Str("endpoint", e.name).Str("file", ep.File).Logger()
		switch {
		case strings.EqualFold(rec.ConfigName, ep.EndpointConfigName) && !changedConfigs[strings.ToLower(ep.EndpointConfigName)] && reflect.DeepEqual(rec.Plan.Variants, plan.Variants):
			// already what the file says (recovered at start)
		case rec.Applied != "" && rec.Applied == digest && rec.FailureReason == "":
			log.Info().Str("config", rec.ConfigName).
				Msg("keeping the endpoint as the API left it (weights, instance counts or configuration): its definition in the file is unchanged since it was last applied; change the file to apply it again")
			continue
		default:
			why := "the endpoint was not created from this file"
			switch {
			case rec.Applied != "" && rec.Applied == digest:
				why = "its last update failed"
			case rec.Applied != "":
				why = "its definition in the file changed since it was last applied"
			}
			log.Info().Str("from_config", rec.ConfigName).Str("to_config", ep.EndpointConfigName).
				Msg("updating the endpoint to the file's definition: " + why)
			if err := s.WaitEndpoint(ctx, ep.EndpointName); err != nil && e.Status() != spec.StatusInService {
				return nil, err
			}
			if err := s.updateEndpoint(e, plan, dc, ep.EndpointConfigName, nil); err != nil {
				return nil, err
			}
		}
		s.save(e, func(r *EndpointRecord) { r.Applied = digest })
	}
	for _, ic := range b.InferenceComponents {
		if err := s.applyComponent(ctx, ic, componentDigest(b, ic)); err != nil {
			return nil, fmt.Errorf("%s: %s: %w", ic.File, ic.Path, err)
		}
	}
	return names, nil
}

// applyComponent follows the endpoints' rule for one component of the
// files: a missing one is created; one that exists is kept as the API left
// it (copy count, specification) when its definition in the files is
// unchanged since Apply last applied it; otherwise the files win: it is
// updated to them (Specification and CopyCount), or deleted and created
// again when it sits on another endpoint or variant. A Failed one is
// updated too. The definition includes the files' model the component
// names: a changed model is run by new copies.
func (s *Server) applyComponent(ctx context.Context, ic spec.InferenceComponent, digest string) error {
	c := s.ics.Get(ic.InferenceComponentName)
	if c != nil && c.Deleting() {
		<-s.ics.Remove(c) // already going: wait until it is gone
		c = nil
	}
	log := s.log.With().Str("inference_component", ic.InferenceComponentName).Str("file", ic.File).Logger()
	if c != nil {
		rec := c.Record()
		sameVariant := strings.EqualFold(rec.VariantName, ic.VariantName) || (ic.Specification.IsAdapter() && ic.VariantName == "") // an adapter is on its base's
		if !strings.EqualFold(rec.EndpointName, ic.EndpointName) || !sameVariant {
			log.Info().Str("endpoint", rec.EndpointName).Str("variant", rec.VariantName).
				Msg("deleting the inference component to create it again on the endpoint and variant the file names")
			<-s.ics.Remove(c)
			c = nil
		}
	}
	if c == nil {
		_, _, err := s.createComponent(ctx, &ic.CreateInferenceComponentInput, ic.Dir, digest)
		return err
	}
	rec, err := settledComponent(ctx, c)
	if err != nil {
		return err
	}
	if rec.Applied != "" && rec.Applied == digest && rec.Status != spec.StatusFailed {
		log.Info().Msg("keeping the inference component as the API left it (copy count, specification): its definition in the file is unchanged since it was last applied; change the file to apply it again")
		return nil
	}
	why := "the inference component was not created from this file"
	switch {
	case rec.Applied == digest:
		why = "it is Failed"
	case rec.Applied != "":
		why = "its definition in the file changed since it was last applied"
	}
	log.Info().Msg("updating the inference component to the file's definition: " + why)
	_, err = s.updateComponent(ctx, &updateComponentInput{InferenceComponentName: rec.Name,
		Specification: ic.Specification, RuntimeConfig: ic.RuntimeConfig},
		components.Update{BaseDir: ic.Dir, Replace: true, Also: func(r *components.Record) { r.Applied = digest }})
	return err
}

// settledComponent waits until a component is neither Creating nor
// Updating (a recovered one may still be placing its copies).
func settledComponent(ctx context.Context, c *components.Component) (components.Record, error) {
	for {
		rec := c.Record()
		if rec.Status != spec.StatusCreating && rec.Status != spec.StatusUpdating {
			return rec, nil
		}
		select {
		case <-ctx.Done():
			return rec, ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// componentDigest fingerprints the files' definition of a component (with
// the folder its relative file:// URL resolves against, and the files'
// model it names, whose container each copy runs).
func componentDigest(b *spec.Bundle, ic spec.InferenceComponent) string {
	d := struct {
		Input    spec.CreateInferenceComponentInput
		Dir      string
		Model    *spec.CreateModelInput `json:",omitempty"`
		ModelDir string                 `json:",omitempty"`
	}{Input: ic.CreateInferenceComponentInput, Dir: ic.Dir}
	if sp := ic.Specification; sp != nil && sp.ModelName != "" {
		for i := range b.Models {
			if m := &b.Models[i]; strings.EqualFold(m.ModelName, sp.ModelName) {
				d.Model, d.ModelDir = &m.CreateModelInput, m.Dir
			}
		}
	}
	j, err := json.Marshal(d)
	if err != nil {
		return ""
	}
	sum := sha256.Sum256(j)
	return hex.EncodeToString(sum[:])
}

// fileDigest fingerprints what the files define for one endpoint: the
// endpoint, its configuration and that configuration's models (with the
// folder their relative file:// URLs resolve against). Apply compares it with
// the one it recorded when it last applied the endpoint.
func fileDigest(b *spec.Bundle, ep spec.Endpoint) string {
	type model struct {
		Input spec.CreateModelInput
		Dir   string
	}
	d := struct {
		Endpoint spec.CreateEndpointInput
		Config   *spec.CreateEndpointConfigInput
		Models   []model
	}{Endpoint: ep.CreateEndpointInput}
	for i := range b.EndpointConfigs {
		c := &b.EndpointConfigs[i]
		if !strings.EqualFold(c.EndpointConfigName, ep.EndpointConfigName) {
			continue
		}
		d.Config = &c.CreateEndpointConfigInput
		for _, v := range c.AllVariants() {
			for _, m := range b.Models {
				if strings.EqualFold(m.ModelName, v.ModelName) {
					d.Models = append(d.Models, model{m.CreateModelInput, m.Dir})
				}
			}
		}
	}
	j, err := json.Marshal(d)
	if err != nil { // plain data: cannot fail; Apply never keeps on an empty digest
		return ""
	}
	sum := sha256.Sum256(j)
	return hex.EncodeToString(sum[:])
}
