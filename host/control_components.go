package host

import (
	"context"
	"encoding/json"
	"github.com/mce-run/mce/host/deploy"
	"regexp"
	"slices"
	"strings"

	"github.com/mce-run/mce/host/apierr"
	"github.com/mce-run/mce/host/components"
	"github.com/mce-run/mce/host/listing"
	"github.com/mce-run/mce/host/spec"
)

// The inference-component operations of the control plane
// (https://docs.aws.amazon.com/sagemaker/latest/APIReference/API_CreateInferenceComponent.html
// and its siblings), as thin adapters of the components.Manager: each
// decodes its input, authorizes what the call acts on beside the component
// (its endpoint, an adapter's base), makes one Manager call and shapes the
// answer. The components themselves are the Manager's (host/components).

type (
	componentNameInput struct{ InferenceComponentName string }

	updateComponentInput struct {
		InferenceComponentName string
		Specification          *spec.InferenceComponentSpecification
		Specifications         json.RawMessage
		RuntimeConfig          *spec.InferenceComponentRuntimeConfig
		DeploymentConfig       json.RawMessage // its RollingUpdatePolicy's MaximumBatchSize (spec.ComponentBatch)
	}

	updateComponentRuntimeInput struct {
		InferenceComponentName string
		DesiredRuntimeConfig   *spec.InferenceComponentRuntimeConfig
	}

	listComponentsInput struct {
		listing.Input
		EndpointNameEquals string
		VariantNameEquals  string
	}
)

func componentResource(s *Server, in *componentNameInput) string {
	return s.arn(spec.KindInferenceComponent, in.InferenceComponentName)
}

// alsoAuthorizeKey holds, in an operation's context, the check of the
// caller on a second resource: func(action, resource string, keys
// requestKeys) *APIError, action "" meaning the caller's own.
type alsoAuthorizeKey struct{}

// alsoAuthorize authorizes the caller's action on resource too, an
// existing resource whose tags the check carries; nothing outside an HTTP
// call (in-process callers are the operator).
func alsoAuthorize(ctx context.Context, resource string, keys requestKeys) error {
	return alsoAuthorizeAs(ctx, "", resource, keys)
}

// alsoAuthorizeAs is alsoAuthorize with another action than the caller's
// (DeleteEndpoint authorizes sagemaker:DeleteInferenceComponent on each of
// its components).
func alsoAuthorizeAs(ctx context.Context, action, resource string, keys requestKeys) error {
	if f, ok := ctx.Value(alsoAuthorizeKey{}).(func(string, string, requestKeys) *apierr.Error); ok {
		if api := f(action, resource, keys); api != nil {
			return api
		}
	}
	return nil
}

func (s *Server) opCreateComponent(ctx context.Context, in *spec.CreateInferenceComponentInput) (any, error) {
	arn, _, err := s.createComponent(ctx, in, s.cfg.BaseDir, "")
	if err != nil {
		return nil, err
	}
	return map[string]string{"InferenceComponentArn": arn}, nil
}

// createComponent is CreateInferenceComponent with a relative file://
// Container.ArtifactUrl resolved against baseDir (an endpoint file's
// folder for a component of the files); applied fingerprints the files'
// definition ("" for the API).
func (s *Server) createComponent(ctx context.Context, in *spec.CreateInferenceComponentInput, baseDir, applied string) (string, *components.Component, error) {
	if err := in.Validate(); err != nil {
		return "", nil, err
	}
	// A component takes its endpoint's capacity: the caller needs
	// CreateInferenceComponent on the endpoint as well as on the component
	// (mce's choice: the authorization reference's resource types for it
	// could not be read).
	if err := alsoAuthorize(ctx, s.arn(spec.KindEndpoint, in.EndpointName), requestKeysOf(in)); err != nil {
		return "", nil, err
	}
	if sp := in.Specification; sp.IsAdapter() {
		if err := alsoAuthorize(ctx, s.arn(spec.KindInferenceComponent, sp.BaseInferenceComponentName), requestKeysOf(in)); err != nil {
			return "", nil, err
		}
	}
	return s.ics.Create(ctx, in, baseDir, applied)
}

type componentRuntimeConfigOut struct {
	DesiredCopyCount int `json:"DesiredCopyCount"`
	CurrentCopyCount int `json:"CurrentCopyCount"`
}

type componentContainerSummary struct {
	DeployedImage          *deployedImage    `json:"DeployedImage,omitempty"`
	ArtifactURL            string            `json:"ArtifactUrl,omitempty"`
	Environment            map[string]string `json:"Environment,omitempty"`
	ContainerMetricsConfig json.RawMessage   `json:"ContainerMetricsConfig,omitempty"`
}

type componentSpecSummary struct {
	BaseInferenceComponentName  string                                      `json:"BaseInferenceComponentName,omitempty"`
	InstanceType                string                                      `json:"InstanceType,omitempty"`
	ModelName                   string                                      `json:"ModelName,omitempty"`
	Container                   *componentContainerSummary                  `json:"Container,omitempty"`
	StartupParameters           *spec.InferenceComponentStartupParameters   `json:"StartupParameters,omitempty"`
	ComputeResourceRequirements *spec.InferenceComponentComputeRequirements `json:"ComputeResourceRequirements,omitempty"`
	DataCacheConfig             json.RawMessage                             `json:"DataCacheConfig,omitempty"`
	SchedulingConfig            json.RawMessage                             `json:"SchedulingConfig,omitempty"`
}

type describeComponentOutput struct {
	InferenceComponentName   string                     `json:"InferenceComponentName"`
	InferenceComponentArn    string                     `json:"InferenceComponentArn"`
	EndpointName             string                     `json:"EndpointName"`
	EndpointArn              string                     `json:"EndpointArn"`
	VariantName              string                     `json:"VariantName"`
	FailureReason            string                     `json:"FailureReason,omitempty"`
	Specification            componentSpecSummary       `json:"Specification"`
	RuntimeConfig            *componentRuntimeConfigOut `json:"RuntimeConfig,omitempty"` // none for an adapter
	CreationTime             spec.Epoch                 `json:"CreationTime"`
	LastModifiedTime         spec.Epoch                 `json:"LastModifiedTime"`
	InferenceComponentStatus spec.Status                `json:"InferenceComponentStatus"`
}

func (s *Server) opDescribeComponent(_ context.Context, in *componentNameInput) (any, error) {
	c, err := s.ics.Lookup(in.InferenceComponentName)
	if err != nil {
		return nil, err
	}
	rec := c.Record()
	sp := rec.Spec
	sum := componentSpecSummary{BaseInferenceComponentName: sp.BaseInferenceComponentName, InstanceType: sp.InstanceType, ModelName: sp.ModelName, StartupParameters: sp.StartupParameters,
		ComputeResourceRequirements: sp.ComputeResourceRequirements, DataCacheConfig: sp.DataCacheConfig, SchedulingConfig: sp.SchedulingConfig}
	if k := sp.Container; k != nil {
		sum.Container = &componentContainerSummary{ArtifactURL: k.ArtifactURL, Environment: k.Environment, ContainerMetricsConfig: k.ContainerMetricsConfig}
		if k.Image != "" {
			sum.Container.DeployedImage = &deployedImage{SpecifiedImage: k.Image, ResolvedImage: k.Image, ResolutionTime: spec.Epoch(rec.Modified)}
		}
	}
	var rc *componentRuntimeConfigOut
	if !rec.IsAdapter() {
		rc = &componentRuntimeConfigOut{DesiredCopyCount: rec.Desired, CurrentCopyCount: c.CurrentCopies()}
	}
	return describeComponentOutput{
		InferenceComponentName: rec.Name, InferenceComponentArn: rec.ARN,
		EndpointName: rec.EndpointName, EndpointArn: s.arn(spec.KindEndpoint, rec.EndpointName), VariantName: rec.VariantName,
		FailureReason: rec.FailureReason, Specification: sum,
		RuntimeConfig: rc,
		CreationTime:  spec.Epoch(rec.Created), LastModifiedTime: spec.Epoch(rec.Modified), InferenceComponentStatus: rec.Status,
	}, nil
}

func (s *Server) opDeleteComponent(ctx context.Context, in *componentNameInput) (any, error) {
	c, err := s.ics.Lookup(in.InferenceComponentName)
	if err != nil {
		return nil, err
	}
	if err := s.authorizeBase(ctx, c.Record()); err != nil {
		return nil, err
	}
	if err := s.ics.Delete(c); err != nil {
		return nil, err
	}
	return struct{}{}, nil
}

func (s *Server) opUpdateComponent(ctx context.Context, in *updateComponentInput) (any, error) {
	return s.updateComponent(ctx, in, components.Update{BaseDir: s.cfg.BaseDir})
}

// updateComponent is UpdateInferenceComponent as u says it (where a
// relative file:// ArtifactUrl resolves; for the endpoint files, a whole
// specification and what else changes in the record).
func (s *Server) updateComponent(ctx context.Context, in *updateComponentInput, u components.Update) (any, error) {
	c, err := s.ics.Lookup(in.InferenceComponentName)
	if err != nil {
		return nil, err
	}
	if err := s.authorizeBase(ctx, c.Record()); err != nil {
		return nil, err
	}
	if len(in.Specifications) > 0 && string(in.Specifications) != "null" {
		return nil, apierr.ValidationException("Specifications (one specification per instance type) is not supported by mce: its variants have one instance type. Give Specification instead.")
	}
	u.Specification, u.RuntimeConfig = in.Specification, in.RuntimeConfig
	copies := c.Record().Desired
	if in.RuntimeConfig != nil && in.RuntimeConfig.CopyCount != nil {
		copies = int(*in.RuntimeConfig.CopyCount)
	}
	rolling, err := spec.ComponentBatch(in.DeploymentConfig, copies)
	if err != nil {
		return nil, err
	}
	if err := deploy.CheckAlarms(rolling.Alarms, deploy.CloudWatch(s.cfg.CloudWatch)); err != nil {
		return nil, err
	}
	u.Batch, u.Wait, u.Alarms = rolling.Batch, rolling.Wait, rolling.Alarms
	u.RollbackBatch, u.Timeout = rolling.RollbackBatch, rolling.Timeout
	if err := s.ics.Update(ctx, c, u); err != nil {
		return nil, err
	}
	return map[string]string{"InferenceComponentArn": c.Record().ARN}, nil
}

// authorizeBase authorizes the caller's action on the base of an adapter
// too (its ARN, its tags): an adapter is loaded into its base's copies and
// holds the base (which cannot be deleted while it has adapters), so
// creating, updating or deleting one acts on the base as well (mce's rule:
// SageMaker's authorization reference lists only the component's own
// ARN). Nothing for a component that is no adapter.
func (s *Server) authorizeBase(ctx context.Context, rec components.Record) error {
	if !rec.IsAdapter() {
		return nil
	}
	return alsoAuthorize(ctx, s.arn(spec.KindInferenceComponent, rec.Spec.BaseInferenceComponentName), requestKeys{})
}

func (s *Server) opUpdateComponentRuntime(_ context.Context, in *updateComponentRuntimeInput) (any, error) {
	c, err := s.ics.Lookup(in.InferenceComponentName)
	if err != nil {
		return nil, err
	}
	if in.DesiredRuntimeConfig == nil {
		return nil, apierr.ValidationException("1 validation error detected: Value null at 'desiredRuntimeConfig' failed to satisfy constraint: Member must not be null")
	}
	if err := spec.CheckCopyCount("desiredRuntimeConfig.copyCount", in.DesiredRuntimeConfig.CopyCount); err != nil {
		return nil, err
	}
	if err := s.ics.Scale(c, int(*in.DesiredRuntimeConfig.CopyCount)); err != nil {
		return nil, err
	}
	return map[string]string{"InferenceComponentArn": c.Record().ARN}, nil
}

var componentStatuses = []string{"InService", "Creating", "Updating", "Failed", "Deleting"}

func (s *Server) opListComponents(_ context.Context, in *listComponentsInput) (any, error) {
	if in.StatusEquals != "" && !slices.Contains(componentStatuses, in.StatusEquals) {
		return nil, apierr.ValidationException("1 validation error detected: Value '%s' at 'statusEquals' failed to satisfy constraint: Member must satisfy enum value set: [%s]", in.StatusEquals, strings.Join(componentStatuses, ", "))
	}
	if in.NameContains != "" && (len(in.NameContains) > 63 || !nameContainsRe.MatchString(in.NameContains)) {
		return nil, apierr.ValidationException("1 validation error detected: Value '%s' at 'nameContains' failed to satisfy constraint: Member must satisfy regular expression pattern: [a-zA-Z0-9-]+", in.NameContains)
	}
	for _, f := range []struct{ member, v string }{{"endpointNameEquals", in.EndpointNameEquals}, {"variantNameEquals", in.VariantNameEquals}} {
		if f.v != "" {
			if err := requireName(f.member, f.v); err != nil {
				return nil, err
			}
		}
	}
	return listing.Operation(&in.Input, "InferenceComponents", []string{"Name", "CreationTime", "Status"}, func() ([]listing.Item, error) {
		var items []listing.Item
		for _, c := range s.ics.All() {
			rec := c.Record()
			if in.EndpointNameEquals != "" && !strings.EqualFold(rec.EndpointName, in.EndpointNameEquals) {
				continue
			}
			if in.VariantNameEquals != "" && rec.VariantName != in.VariantNameEquals {
				continue
			}
			items = append(items, listing.Item{Name: rec.Name, Created: rec.Created, Modified: rec.Modified, Status: string(rec.Status),
				Out: map[string]any{"InferenceComponentName": rec.Name, "InferenceComponentArn": rec.ARN,
					"EndpointName": rec.EndpointName, "EndpointArn": s.arn(spec.KindEndpoint, rec.EndpointName),
					"VariantName": rec.VariantName, "InferenceComponentStatus": string(rec.Status),
					"CreationTime": spec.Epoch(rec.Created), "LastModifiedTime": spec.Epoch(rec.Modified)}})
		}
		return items, nil
	})
}

var nameContainsRe = regexp.MustCompile(`^[a-zA-Z0-9-]+$`)
