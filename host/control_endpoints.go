package host

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/mce-run/mce/containers"
	"github.com/mce-run/mce/host/apierr"
	"github.com/mce-run/mce/host/capture"
	"github.com/mce-run/mce/host/deploy"
	"github.com/mce-run/mce/host/listing"
	"github.com/mce-run/mce/host/spec"
)

// planFor resolves an endpoint on a stored configuration and its models;
// the configuration's DataCaptureConfig comes with the plan.
func (s *Server) planFor(in spec.CreateEndpointInput) (containers.EndpointPlan, *spec.DataCaptureConfig, error) {
	cfg, err := s.getConfig(in.EndpointConfigName)
	if err != nil {
		return containers.EndpointPlan{}, nil, err
	}
	lookup := func(name string) (spec.CreateModelInput, string, bool) {
		rec, err := s.getModel(name)
		return rec.Input, rec.BaseDir, err == nil
	}
	plan, warns, err := spec.BuildPlan(s.cfg.Region, s.cfg.Account, in, cfg.Input, lookup)
	for _, w := range warns {
		s.log.Warn().Str("endpoint", in.EndpointName).Msg(w)
	}
	return plan, cfg.Input.DataCaptureConfig, err
}

// CreateEndpoint creates an endpoint on a stored configuration. It answers at
// once; the endpoint is Creating until its containers pass /ping. Nothing is
// created once ctx is done; the launch itself outlives ctx (it runs in the
// background under the server's lifetime, as SageMaker's does).
func (s *Server) CreateEndpoint(ctx context.Context, in spec.CreateEndpointInput) (string, error) {
	if err := in.Validate(); err != nil {
		return "", err
	}
	// SageMaker authorizes CreateEndpoint on the configuration too.
	if err := alsoAuthorize(ctx, s.arn(spec.KindEndpointConfig, in.EndpointConfigName), requestKeysOf(&in)); err != nil {
		return "", err
	}
	if e := s.reg.get(in.EndpointName); e != nil {
		return "", &spec.AlreadyExistsError{Kind: spec.KindEndpoint, Name: in.EndpointName, ARN: s.arn(spec.KindEndpoint, in.EndpointName)}
	}
	plan, dc, err := s.planFor(in)
	if err != nil {
		return "", err
	}
	if err := apierr.Ended(ctx, s.arn(spec.KindEndpoint, in.EndpointName)); err != nil {
		return "", err
	}
	e, err := s.startEndpoint(plan, dc, in.EndpointConfigName, in.Tags)
	if err != nil {
		return "", err
	}
	// Kept for later updates (RetainDeploymentConfig) and shown as
	// LastDeploymentConfig; its alarms are checked when an update uses it.
	if d, _ := spec.ParseDeploymentConfig(in.DeploymentConfig); d != nil {
		s.save(e, func(r *EndpointRecord) { r.LastDeployment = d })
	}
	return e.record().ARN, nil
}

func (s *Server) opCreateEndpoint(ctx context.Context, in *spec.CreateEndpointInput) (any, error) {
	arn, err := s.CreateEndpoint(ctx, *in)
	if err != nil {
		return nil, err
	}
	return map[string]string{"EndpointArn": arn}, nil
}

func (s *Server) getEndpoint(name string) (*Endpoint, error) {
	if err := requireName("endpointName", name); err != nil {
		return nil, err
	}
	e := s.reg.get(name)
	if e == nil {
		return nil, notFound(s, spec.KindEndpoint, name)
	}
	return e, nil
}

type deployedImage struct {
	SpecifiedImage string     `json:"SpecifiedImage"`
	ResolvedImage  string     `json:"ResolvedImage,omitempty"`
	ResolutionTime spec.Epoch `json:"ResolutionTime"`
}

type variantSummary struct {
	VariantName          string          `json:"VariantName"`
	DeployedImages       []deployedImage `json:"DeployedImages,omitempty"`
	CurrentWeight        float64         `json:"CurrentWeight"`
	DesiredWeight        float64         `json:"DesiredWeight"`
	CurrentInstanceCount int             `json:"CurrentInstanceCount"`
	DesiredInstanceCount int             `json:"DesiredInstanceCount"`
	// The configuration's members the summary echoes (VariantPlan.Described).
	RoutingConfig               *spec.RoutingConfig `json:"RoutingConfig,omitempty"`
	ManagedInstanceScaling      json.RawMessage     `json:"ManagedInstanceScaling,omitempty"`
	AcceleratorPartitionLayouts json.RawMessage     `json:"AcceleratorPartitionLayouts,omitempty"`
	// VariantStatus says what is happening to the variant, while something is.
	VariantStatus []deploy.VariantStatus `json:"VariantStatus,omitempty"`
}

type describeEndpointOutput struct {
	EndpointName       string           `json:"EndpointName"`
	EndpointArn        string           `json:"EndpointArn"`
	EndpointConfigName string           `json:"EndpointConfigName"`
	ProductionVariants []variantSummary `json:"ProductionVariants,omitempty"`
	EndpointStatus     spec.Status      `json:"EndpointStatus"`
	FailureReason      string           `json:"FailureReason,omitempty"`
	CreationTime       spec.Epoch       `json:"CreationTime"`
	LastModifiedTime   spec.Epoch       `json:"LastModifiedTime"`
	// AsyncInferenceConfig is the queue settings of an asynchronous
	// endpoint, as its configuration gave them.
	AsyncInferenceConfig *spec.AsyncInferenceConfig `json:"AsyncInferenceConfig,omitempty"`

	// ShadowProductionVariants are the shadow variants, in the shape of
	// ProductionVariants.
	ShadowProductionVariants []variantSummary `json:"ShadowProductionVariants,omitempty"`
	// DataCaptureConfig is its data capture now (datacapture.go).
	DataCaptureConfig *capture.Status `json:"DataCaptureConfig,omitempty"`
	// MetricsConfig is the configuration's, echoed (EndpointPlan.Described).
	MetricsConfig *spec.MetricsConfig `json:"MetricsConfig,omitempty"`
	// Deployment guardrails (deploy_endpoint.go).
	LastDeploymentConfig     *spec.DeploymentConfig `json:"LastDeploymentConfig,omitempty"`
	PendingDeploymentSummary *deploy.Summary        `json:"PendingDeploymentSummary,omitempty"`
}

// DescribeEndpoint is the endpoint as DescribeEndpoint shows it.
func (s *Server) describe(e *Endpoint) describeEndpointOutput {
	rec := e.record()
	status, reason := e.shown(rec)
	out := describeEndpointOutput{
		EndpointName: rec.Name, EndpointArn: rec.ARN, EndpointConfigName: rec.ConfigName,
		EndpointStatus: status, FailureReason: reason,
		CreationTime: spec.Epoch(rec.Created), LastModifiedTime: spec.Epoch(rec.Modified),
		AsyncInferenceConfig: asyncConfigOf(rec.Plan.Async), DataCaptureConfig: s.captures.status(e, rec.DataCapture),
		LastDeploymentConfig: rec.LastDeployment, PendingDeploymentSummary: rec.Deploying.Summary(),
	}
	if len(rec.Plan.Described) > 0 {
		json.Unmarshal(rec.Plan.Described, &out) // only the echoed members: mce wrote it
	}
	if out.EndpointStatus == spec.StatusCreating || out.EndpointStatus == spec.StatusFailed ||
		(out.EndpointStatus == spec.StatusUpdating && e.route.Load() == nil) {
		return out // no variants run (yet): a Failed endpoint being updated runs nothing
	}
	for _, v := range rec.Plan.Variants {
		vs := variantSummary{VariantName: v.Name, CurrentWeight: v.Weight, DesiredWeight: v.Weight,
			CurrentInstanceCount: v.InstanceCount, DesiredInstanceCount: v.InstanceCount}
		if t, ok := rec.Desired[v.Name]; ok {
			vs.DesiredWeight, vs.DesiredInstanceCount = t.Weight, t.Count
			if t.Count != v.InstanceCount { // UpdateEndpointWeightsAndCapacities or autoscaling at work
				vs.VariantStatus = []deploy.VariantStatus{{Status: "Updating", StartTime: spec.Epoch(rec.Modified),
					StatusMessage: fmt.Sprintf("Scaling from %d to %d instances.", v.InstanceCount, t.Count)}}
			}
		}
		if len(v.Described) > 0 {
			json.Unmarshal(v.Described, &vs) // only the echoed members: mce wrote it
		}
		for _, c := range v.Containers {
			vs.DeployedImages = append(vs.DeployedImages, deployedImage{SpecifiedImage: c.Image, ResolvedImage: c.Image, ResolutionTime: spec.Epoch(rec.Modified)})
		}
		if v.Shadow {
			out.ShadowProductionVariants = append(out.ShadowProductionVariants, vs)
			continue
		}
		out.ProductionVariants = append(out.ProductionVariants, vs)
	}
	return out
}

func (s *Server) opDescribeEndpoint(_ context.Context, in *endpointInput) (any, error) {
	e, err := s.getEndpoint(in.EndpointName)
	if err != nil {
		return nil, err
	}
	return s.describe(e), nil
}

func (s *Server) opListEndpoints(_ context.Context, in *listing.Input) (any, error) {
	return listing.Operation(in, "Endpoints", []string{"Name", "CreationTime", "Status"}, func() ([]listing.Item, error) {
		var items []listing.Item
		for _, e := range s.reg.all() {
			rec := e.record()
			shown, _ := e.shown(rec)
			st := string(shown)
			items = append(items, listing.Item{Name: rec.Name, Created: rec.Created, Modified: rec.Modified, Status: st,
				Out: map[string]any{"EndpointName": rec.Name, "EndpointArn": rec.ARN, "CreationTime": spec.Epoch(rec.Created),
					"LastModifiedTime": spec.Epoch(rec.Modified), "EndpointStatus": st}})
		}
		return items, nil
	})
}

type updateEndpointInput struct {
	EndpointName                     string
	EndpointConfigName               string
	RetainAllVariantProperties       bool
	ExcludeRetainedVariantProperties []struct{ VariantPropertyType string }
	DeploymentConfig                 json.RawMessage
	RetainDeploymentConfig           bool
}

func (s *Server) opUpdateEndpoint(ctx context.Context, in *updateEndpointInput) (any, error) {
	e, err := s.getEndpoint(in.EndpointName)
	if err != nil {
		return nil, err
	}
	if err := requireName("endpointConfigName", in.EndpointConfigName); err != nil {
		return nil, err
	}
	// SageMaker authorizes UpdateEndpoint on the new configuration too.
	if err := alsoAuthorize(ctx, s.arn(spec.KindEndpointConfig, in.EndpointConfigName), requestKeys{}); err != nil {
		return nil, err
	}
	plan, dc, err := s.planFor(spec.CreateEndpointInput{EndpointName: e.name, EndpointConfigName: in.EndpointConfigName})
	if err != nil {
		return nil, err
	}
	if err := refuseComponentUpdate(e, plan); err != nil {
		return nil, err
	}
	if err := refuseLayoutChange(e, plan); err != nil {
		return nil, err
	}
	if in.RetainAllVariantProperties {
		exclude := map[string]bool{}
		for _, x := range in.ExcludeRetainedVariantProperties {
			exclude[x.VariantPropertyType] = true
		}
		current := e.record().Plan
		for i, v := range plan.Variants {
			for _, old := range current.Variants {
				if old.Name == v.Name {
					if !exclude["DesiredWeight"] {
						plan.Variants[i].Weight = old.Weight
					}
					if !exclude["DesiredInstanceCount"] {
						plan.Variants[i].InstanceCount = old.InstanceCount
					}
				}
			}
		}
	}
	d, err := deploymentFor(s.cfg.CloudWatch, in.DeploymentConfig, in.RetainDeploymentConfig, e.record().LastDeployment, plan)
	if err != nil {
		return nil, err
	}
	if err := s.updateEndpoint(e, plan, dc, in.EndpointConfigName, d); err != nil {
		return nil, err
	}
	return map[string]string{"EndpointArn": e.record().ARN}, nil
}

type updateWeightsInput struct {
	EndpointName                string
	DesiredWeightsAndCapacities []struct {
		VariantName            string
		DesiredWeight          *float64
		DesiredInstanceCount   *int
		ServerlessUpdateConfig json.RawMessage
	}
}

func (s *Server) opUpdateWeightsAndCapacities(_ context.Context, in *updateWeightsInput) (any, error) {
	e, err := s.getEndpoint(in.EndpointName)
	if err != nil {
		return nil, err
	}
	if len(in.DesiredWeightsAndCapacities) == 0 {
		return nil, apierr.ValidationException("1 validation error detected: Value '[]' at 'desiredWeightsAndCapacities' failed to satisfy constraint: Member must have length greater than or equal to 1")
	}
	current := e.record().Plan
	if current.HostsComponents() {
		return nil, errComponentEndpointScale(e)
	}
	targets := map[string]VariantTarget{}
	for i, d := range in.DesiredWeightsAndCapacities {
		var cur *containers.VariantPlan
		for j := range current.Variants {
			if current.Variants[j].Name == d.VariantName {
				cur = &current.Variants[j]
			}
		}
		if cur == nil {
			return nil, apierr.ValidationException("The variant name(s) [%s] is/are not present in the endpoint %q.", d.VariantName, e.record().ARN)
		}
		if u := d.ServerlessUpdateConfig; len(u) > 0 && string(u) != "null" {
			// Serverless variants are refused at CreateEndpointConfig, so
			// every variant here is instance-based: nothing to update.
			return nil, apierr.ValidationException("ServerlessUpdateConfig is not supported by mce: variant %q is instance-based (mce runs no serverless variants). Give DesiredInstanceCount instead.", d.VariantName)
		}
		t := VariantTarget{Weight: cur.Weight, Count: cur.InstanceCount}
		if d.DesiredWeight != nil {
			if *d.DesiredWeight < 0 {
				return nil, apierr.ValidationException("1 validation error detected: Value '%v' at 'desiredWeightsAndCapacities.%d.member.desiredWeight' failed to satisfy constraint: Member must have value greater than or equal to 0", *d.DesiredWeight, i+1)
			}
			t.Weight = *d.DesiredWeight
		}
		if d.DesiredInstanceCount != nil {
			if *d.DesiredInstanceCount < 1 {
				return nil, apierr.ValidationException("1 validation error detected: Value '%d' at 'desiredWeightsAndCapacities.%d.member.desiredInstanceCount' failed to satisfy constraint: Member must have value greater than or equal to 1", *d.DesiredInstanceCount, i+1)
			}
			if *d.DesiredInstanceCount > spec.MaxInstances {
				return nil, apierr.ValidationException("1 validation error detected: Value '%d' at 'desiredWeightsAndCapacities.%d.member.desiredInstanceCount' failed to satisfy constraint: Member must have value less than or equal to %d", *d.DesiredInstanceCount, i+1, spec.MaxInstances)
			}
			t.Count = *d.DesiredInstanceCount
		}
		targets[d.VariantName] = t
	}
	if err := s.updateWeightsAndCapacities(e, targets); err != nil {
		return nil, err
	}
	return map[string]string{"EndpointArn": e.record().ARN}, nil
}

func (s *Server) opDeleteEndpoint(ctx context.Context, in *endpointInput) (any, error) {
	e, err := s.getEndpoint(in.EndpointName)
	if err != nil {
		return nil, err
	}
	// The endpoint's inference components go with it: the caller must be
	// allowed to delete each one (sagemaker:DeleteInferenceComponent on
	// its ARN, with its tags), else nothing is deleted. The components
	// checked are those the deletion collects: when one was added or
	// removed meanwhile, they are checked again.
	for try := 0; ; try++ {
		cs := s.ics.OfEndpoint(e.name)
		for _, c := range cs {
			if c.Deleting() {
				continue // being deleted already, by a caller allowed to
			}
			if err := alsoAuthorizeAs(ctx, actionDeleteComponent, s.arn(spec.KindInferenceComponent, c.Name()), requestKeys{}); err != nil {
				return nil, err
			}
		}
		if s.deleteEndpointIf(e, func() bool { return slices.Equal(cs, s.ics.OfEndpoint(e.name)) }) {
			return struct{}{}, nil
		}
		if try == 10 {
			return nil, &apierr.Error{Status: 400, Code: apierr.CodeResourceInUse, Message: fmt.Sprintf(
				"Cannot delete endpoint %q: its inference components keep changing; try again.", e.record().ARN)}
		}
	}
}

// actionDeleteComponent is what DeleteEndpoint authorizes on each of the
// endpoint's inference components.
const actionDeleteComponent = "sagemaker:DeleteInferenceComponent"

// DeleteEndpoint deletes an endpoint (as the API does) and waits until its
// containers are gone.
func (s *Server) DeleteEndpoint(ctx context.Context, name string) error {
	e := s.reg.get(name)
	if e == nil {
		return notFound(s, spec.KindEndpoint, name)
	}
	s.deleteEndpoint(e)
	for s.reg.get(name) == e {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(20 * time.Millisecond):
		}
	}
	return nil
}

// refuseComponentUpdate refuses UpdateEndpoint to or from an endpoint that
// hosts inference components: mce does not move components between
// endpoint configurations.
func refuseComponentUpdate(e *Endpoint, plan containers.EndpointPlan) error {
	if e.record().Plan.HostsComponents() || plan.HostsComponents() {
		return apierr.ValidationException("mce does not update an endpoint that hosts inference components, or to a configuration that does (endpoint %q): create a new endpoint and place the inference components there.", e.record().ARN)
	}
	return nil
}

// refuseLayoutChange refuses an update that changes a variant's
// accelerator partition layout: SageMaker cannot change the layout of a
// running endpoint, and the same profiles in another order count as
// another layout.
func refuseLayoutChange(e *Endpoint, plan containers.EndpointPlan) error {
	current := e.record().Plan
	for _, v := range plan.Variants {
		var was []string
		for _, old := range current.Variants {
			if old.Name == v.Name {
				was = old.Partitions
			}
		}
		if !slices.Equal(was, v.Partitions) {
			return apierr.ValidationException("You can't change the accelerator partition layout of a running endpoint (variant %s: [%s] in endpoint %q, [%s] in the new configuration): create a new endpoint to use a different layout.",
				v.Name, strings.Join(was, ", "), e.record().ARN, strings.Join(v.Partitions, ", "))
		}
	}
	return nil
}

// errComponentEndpointScale answers UpdateEndpointWeightsAndCapacities on
// an endpoint that hosts inference components.
func errComponentEndpointScale(e *Endpoint) error {
	return apierr.ValidationException("Endpoint %q hosts inference components: scale them with UpdateInferenceComponentRuntimeConfig; mce does not change its instance count.", e.record().ARN)
}
