package deploy

import (
	"strings"
	"time"

	"github.com/mce-run/mce/containers"
	"github.com/mce-run/mce/host/apierr"
	"github.com/mce-run/mce/host/spec"
)

// Pending is a deployment in progress as the endpoint's record keeps it:
// DescribeEndpoint's PendingDeploymentSummary is made from it, and after a
// restart it tells that one was interrupted.
type Pending struct {
	ConfigName string
	Started    time.Time
	Plan       containers.EndpointPlan // the new (green) fleet
	// Status is the new variants' VariantStatus now (Creating,
	// ActivatingTraffic, Baking, Deleting), with Message and Since.
	Status  string
	Message string
	Since   time.Time
}

// NewPending is a deployment to configName whose new fleet (plan) is
// being created.
func NewPending(configName string, plan containers.EndpointPlan, now time.Time) *Pending {
	return &Pending{ConfigName: configName, Started: now, Plan: plan, Status: "Creating", Message: "Launching the new fleet.", Since: now}
}

// With is p at a new stage.
func (p *Pending) With(status, msg string, now time.Time) *Pending {
	q := *p
	q.Status, q.Message, q.Since = status, msg, now
	return &q
}

// Summary is PendingDeploymentSummary, in SageMaker's shape.
type Summary struct {
	EndpointConfigName string           `json:"EndpointConfigName"`
	ProductionVariants []PendingVariant `json:"ProductionVariants,omitempty"`
	StartTime          spec.Epoch       `json:"StartTime"`
}

// PendingVariant is PendingProductionVariantSummary.
type PendingVariant struct {
	VariantName          string          `json:"VariantName"`
	DeployedImages       []DeployedImage `json:"DeployedImages,omitempty"`
	CurrentWeight        float64         `json:"CurrentWeight"`
	DesiredWeight        float64         `json:"DesiredWeight"`
	CurrentInstanceCount int             `json:"CurrentInstanceCount"`
	DesiredInstanceCount int             `json:"DesiredInstanceCount"`
	VariantStatus        []VariantStatus `json:"VariantStatus,omitempty"`
}

// DeployedImage is one image of a pending variant.
type DeployedImage struct {
	SpecifiedImage string     `json:"SpecifiedImage"`
	ResolvedImage  string     `json:"ResolvedImage,omitempty"`
	ResolutionTime spec.Epoch `json:"ResolutionTime"`
}

// VariantStatus is one entry of a variant's VariantStatus.
type VariantStatus struct {
	Status        string     `json:"Status"`
	StatusMessage string     `json:"StatusMessage,omitempty"`
	StartTime     spec.Epoch `json:"StartTime"`
}

// Summary is p as DescribeEndpoint shows it; nil for nil.
func (p *Pending) Summary() *Summary {
	if p == nil {
		return nil
	}
	out := &Summary{EndpointConfigName: p.ConfigName, StartTime: spec.Epoch(p.Started)}
	for _, v := range p.Plan.Variants {
		if v.Shadow {
			continue
		}
		pv := PendingVariant{VariantName: v.Name, CurrentWeight: v.Weight, DesiredWeight: v.Weight, DesiredInstanceCount: v.InstanceCount,
			VariantStatus: []VariantStatus{{Status: p.Status, StatusMessage: p.Message, StartTime: spec.Epoch(p.Since)}}}
		if p.Status != "Creating" {
			pv.CurrentInstanceCount = v.InstanceCount
		}
		for _, c := range v.Containers {
			pv.DeployedImages = append(pv.DeployedImages, DeployedImage{SpecifiedImage: c.Image, ResolvedImage: c.Image, ResolutionTime: spec.Epoch(p.Started)})
		}
		out.ProductionVariants = append(out.ProductionVariants, pv)
	}
	return out
}

// Capacity is a plan's fleet capacity: the instances of its production
// variants.
func Capacity(p containers.EndpointPlan) int {
	n := 0
	for _, v := range p.Variants {
		if !v.Shadow {
			n += v.InstanceCount
		}
	}
	return n
}

// Check validates d for an update to plan, and that the alarms it names
// exist in src (nil: no CloudWatch to watch). SageMaker reads them with
// DescribeAlarms when the deployment starts; mce refuses the request at
// once when one is missing, rather than failing the update later.
func Check(d *spec.DeploymentConfig, plan containers.EndpointPlan, src AlarmSource) error {
	if err := d.Validate(); err != nil {
		return err
	}
	if d.BlueGreenUpdatePolicy == nil {
		return CheckAlarms(d.Alarms(), src)
	}
	if t := d.BlueGreenUpdatePolicy.TrafficRoutingConfiguration; t.Type == spec.TrafficCanary && t.CanarySize.Type == spec.InstanceCount {
		if n := Capacity(plan); 2*int(*t.CanarySize.Value) > n {
			return apierr.ValidationException("CanarySize (%d instances) must be at most 50%% of the new fleet's capacity (%d instances).", *t.CanarySize.Value, n)
		}
	}
	return CheckAlarms(d.Alarms(), src)
}

// CheckAlarms refuses alarms src does not know, or any when src is nil.
func CheckAlarms(names []string, src AlarmSource) error {
	if len(names) == 0 {
		return nil
	}
	if src == nil {
		return apierr.ValidationException("AutoRollbackConfiguration names CloudWatch alarms, but this mce serves no CloudWatch (start mce serve with its CloudWatch API on): there is nothing to watch.")
	}
	if miss := Missing(src, names); len(miss) > 0 {
		return apierr.ValidationException("The CloudWatch alarm(s) [%s] of AutoRollbackConfiguration do not exist.", strings.Join(miss, ", "))
	}
	return nil
}
