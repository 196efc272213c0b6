package host

import (
	"context"
	"errors"
	"net/http"

	"github.com/labstack/echo/v4"

	"github.com/mce-run/mce/host/apierr"
	"github.com/mce-run/mce/host/applicationautoscaling"
	"github.com/mce-run/mce/host/statuspage"
)

// Application Auto Scaling's front: a call with the X-Amz-Target prefix
// AnyScaleFrontendService. (controlPlane passes it on) is let in here — the
// request ID, authentication (signed for "application-autoscaling"), the
// body within its limit — and the applicationautoscaling Service answers
// it with the decision taken for that caller. The Service changes
// capacities through autoScalingTargets: the paths of
// UpdateEndpointWeightsAndCapacities and UpdateInferenceComponentRuntimeConfig.

const maxAutoScalingBody = 1 << 20

func serveAutoScaling(s *Server, c echo.Context) error {
	r, w := c.Request(), c.Response()
	if e := accessOf(c); e != nil {
		e.Operation = "application-autoscaling:" + applicationautoscaling.OperationOf(r)
	}
	refuse := func(api *apierr.Error) error {
		applicationautoscaling.WriteError(w, &applicationautoscaling.APIError{Status: api.Status, Code: api.Code, Message: api.Message})
		return nil
	}
	body, p, release, api := letIn(s, w, r, maxAutoScalingBody, &apierr.Error{Status: http.StatusRequestEntityTooLarge,
		Code: applicationautoscaling.CodeValidation, Message: "The request body is larger than mce accepts for Application Auto Scaling."})
	if api != nil {
		return refuse(api)
	}
	defer release()
	svc := s.cfg.AutoScaling
	if svc == nil {
		return refuse(&apierr.Error{Status: http.StatusBadRequest, Code: apierr.CodeUnknownOperation,
			Message: "This mce serves no Application Auto Scaling: it runs without a state folder and CloudWatch store for it."})
	}
	svc.Serve(w, r, body, func(ctx context.Context, r *http.Request, action string) error {
		if api := s.gate.decide(ctx, r, p, action, "*", nil); api != nil {
			return errors.New(api.Message) // answered as AccessDeniedException with this message
		}
		return nil
	})
	return nil
}

// autoScalingTargets are the endpoints' variants and the inference
// components, as Application Auto Scaling scales them.
type autoScalingTargets struct{ s *Server }

var _ applicationautoscaling.Targets = autoScalingTargets{}

// Capacity is a variant's instance count (the one asked for while the
// endpoint updates) or a component's desired copy count.
func (t autoScalingTargets) Capacity(_ context.Context, dimension, id string) (int, bool, error) {
	if dimension == applicationautoscaling.DimensionComponent {
		c := t.s.ics.Get(applicationautoscaling.ComponentOf(id))
		if c == nil {
			return 0, false, nil
		}
		return c.Record().Desired, true, nil
	}
	ep, variant := applicationautoscaling.VariantOf(id)
	e := t.s.reg.get(ep)
	if e == nil {
		return 0, false, nil
	}
	rec := e.record()
	if d, ok := rec.Desired[variant]; ok {
		return d.Count, true, nil
	}
	for _, v := range rec.Plan.Variants {
		if v.Name == variant {
			return v.InstanceCount, true, nil
		}
	}
	return 0, false, nil
}

// SetCapacity asks for n instances or copies through the operations'
// own paths: their checks (the endpoint in service, room on the machine)
// are made.
func (t autoScalingTargets) SetCapacity(_ context.Context, dimension, id string, n int) error {
	s := t.s
	if dimension == applicationautoscaling.DimensionComponent {
		c, err := s.ics.Lookup(applicationautoscaling.ComponentOf(id))
		if err != nil {
			return err
		}
		return s.ics.Scale(c, n)
	}
	ep, variant := applicationautoscaling.VariantOf(id)
	e, err := s.getEndpoint(ep)
	if err != nil {
		return err
	}
	targets := map[string]VariantTarget{}
	for _, v := range e.record().Plan.Variants {
		if v.Name == variant {
			targets[variant] = VariantTarget{Weight: v.Weight, Count: n}
		}
	}
	if len(targets) == 0 {
		return apierr.ValidationException("The variant %s is not in the endpoint %s.", variant, ep)
	}
	return s.updateWeightsAndCapacities(e, targets)
}

// startAutoScaling runs Config.AutoScaling on the server's endpoints and
// components until Close.
func startAutoScaling(s *Server) {
	if svc := s.cfg.AutoScaling; svc != nil {
		s.bg.Go(func() { svc.Run(s.ctx, autoScalingTargets{s}) })
	}
}

// scalingSource feeds the status page's autoscaling section: each target
// with the capacity it has now (-1 when its resource is gone); nil without
// Config.AutoScaling.
func scalingSource(s *Server) func() []statuspage.ScalingTarget {
	svc := s.cfg.AutoScaling
	if svc == nil {
		return nil
	}
	return func() []statuspage.ScalingTarget {
		var out []statuspage.ScalingTarget
		for _, st := range svc.Status() {
			t := statuspage.ScalingTarget{ResourceID: st.Target.ResourceID, Dimension: st.Target.ScalableDimension,
				Min: int(st.Target.MinCapacity), Max: int(st.Target.MaxCapacity), Current: -1, Policies: st.Policies}
			if n, ok, err := (autoScalingTargets{s}).Capacity(context.Background(), t.Dimension, t.ResourceID); err == nil && ok {
				t.Current = n
			}
			for _, a := range st.Activities {
				t.Activities = append(t.Activities, statuspage.ScalingActivity{Start: a.StartTime.Time, Status: a.StatusCode,
					Description: a.Description, Cause: a.Cause, Message: a.StatusMessage})
			}
			out = append(out, t)
		}
		return out
	}
}
