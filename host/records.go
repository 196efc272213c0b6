package host

import (
	"errors"
	"time"

	"github.com/mce-run/mce/containers"
	"github.com/mce-run/mce/host/deploy"
	"github.com/mce-run/mce/host/spec"
	"github.com/mce-run/mce/host/store"
)

// Durable records, one per model, endpoint config and endpoint, kept in the
// state store. An endpoint's record holds the plan it runs (resolved when it
// was created or updated), so it keeps running the same containers even if
// its model or config is deleted, as on SageMaker.

// ModelRecord is a created model.
type ModelRecord struct {
	Input   spec.CreateModelInput
	BaseDir string // folder that relative file:// URLs resolve against
	ARN     string
	Created time.Time
	// Tags are the model's tags now (Input.Tags as created, then AddTags
	// and DeleteTags); nil in records written before mce kept them.
	Tags []spec.Tag
}

// ConfigRecord is a created endpoint configuration.
type ConfigRecord struct {
	Input   spec.CreateEndpointConfigInput
	ARN     string
	Created time.Time
	Tags    []spec.Tag // as ModelRecord.Tags
}

// EndpointRecord is an endpoint and what it runs.
type EndpointRecord struct {
	Name          string
	ARN           string
	ConfigName    string
	Status        spec.Status
	FailureReason string
	Created       time.Time
	Modified      time.Time
	// Generation numbers the container sets: an update launches Generation+1.
	Generation int
	// Plan is what runs now, with the current weights and instance counts.
	Plan containers.EndpointPlan
	// DataCapture is the configuration's DataCaptureConfig, as the
	// endpoint runs it now (host/capture); nil without one.
	DataCapture *spec.DataCaptureConfig `json:",omitempty"`
	// Pending is the configuration an update in progress moves to.
	Pending string `json:",omitempty"`
	// Desired holds weights and counts an UpdateEndpointWeightsAndCapacities
	// in progress moves to, by variant.
	Desired map[string]VariantTarget `json:",omitempty"`
	// LastDeployment is the DeploymentConfig of the last update (or of
	// CreateEndpoint): DescribeEndpoint's LastDeploymentConfig, and what
	// RetainDeploymentConfig reuses.
	LastDeployment *spec.DeploymentConfig `json:",omitempty"`
	// Deploying is the deployment under guardrails in progress
	// (deploy_endpoint.go); nil when none.
	Deploying *deploy.Pending `json:",omitempty"`
	// Tags are the endpoint's tags (CreateEndpoint's, then AddTags and
	// DeleteTags).
	Tags []spec.Tag `json:",omitempty"`
	// Applied fingerprints the endpoint files' definition of the endpoint
	// when serve -f last applied it (Apply); empty for one created through
	// the API.
	Applied string `json:",omitempty"`
}

// CheckRecord implements store.Checker for the records the state lists at
// start: a record without the fields it is found and served by decodes but
// cannot be used, so store.List moves it to quarantine (with an error in
// the log) instead of letting it stop mce or fail later.
func (r *ModelRecord) CheckRecord() error {
	if r.Input.ModelName == "" {
		return errors.New("the model record has no ModelName")
	}
	return nil
}

// CheckRecord implements store.Checker (see ModelRecord.CheckRecord).
func (r *ConfigRecord) CheckRecord() error {
	if r.Input.EndpointConfigName == "" {
		return errors.New("the endpoint config record has no EndpointConfigName")
	}
	return nil
}

// CheckRecord implements store.Checker (see ModelRecord.CheckRecord).
func (r *EndpointRecord) CheckRecord() error {
	if r.Name == "" {
		return errors.New("the endpoint record has no Name")
	}
	return nil
}

var (
	_ store.Checker = (*ModelRecord)(nil)
	_ store.Checker = (*ConfigRecord)(nil)
	_ store.Checker = (*EndpointRecord)(nil)
)

// VariantTarget is a variant's desired weight and instance count.
type VariantTarget struct {
	Weight float64
	Count  int
}
