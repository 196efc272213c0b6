package spec

import "strings"

// Merge is the specification an UpdateInferenceComponent leaves: every
// member of the API's InferenceComponentSpecification is optional, and a
// client may send only the members it changes (the SageMaker Python SDK's
// update_predictor(resources=…) sends ComputeResourceRequirements alone).
// Member by member:
//
//   - ModelName and Container are alternatives (what each copy runs): the
//     one given replaces both, so giving a ModelName drops the current
//     Container and giving a Container drops the current ModelName. A
//     Container given replaces the current one as a whole (Image,
//     ArtifactUrl, Environment together, not key by key). Giving both is
//     left for validation to refuse, as CreateInferenceComponent does.
//   - StartupParameters, ComputeResourceRequirements, SchedulingConfig,
//     DataCacheConfig and InstanceType: replaced as a whole when given,
//     kept when absent.
//   - BaseInferenceComponentName: kept when absent; given, it must name
//     the current base (the caller refuses a change: a component never
//     becomes, stops being or moves as an adapter).
//
// Absent and JSON null are alike, so an update cannot remove a member it
// does not replace. u nil leaves cur unchanged. cur is not modified.
func (cur InferenceComponentSpecification) Merge(u *InferenceComponentSpecification) InferenceComponentSpecification {
	if u == nil {
		return cur
	}
	out := cur
	if u.ModelName != "" || u.Container != nil {
		out.ModelName, out.Container = u.ModelName, u.Container
	}
	if u.StartupParameters != nil {
		out.StartupParameters = u.StartupParameters
	}
	if u.ComputeResourceRequirements != nil {
		out.ComputeResourceRequirements = u.ComputeResourceRequirements
	}
	if present(u.SchedulingConfig) {
		out.SchedulingConfig = u.SchedulingConfig
	}
	if present(u.DataCacheConfig) {
		out.DataCacheConfig = u.DataCacheConfig
	}
	if u.InstanceType != "" {
		out.InstanceType = u.InstanceType
	}
	if u.BaseInferenceComponentName != "" {
		out.BaseInferenceComponentName = u.BaseInferenceComponentName
	}
	return out
}

// SameBase reports whether an update's specification u keeps the base of
// cur: it names none (kept by Merge) or names cur's, case-insensitively.
func (cur InferenceComponentSpecification) SameBase(u *InferenceComponentSpecification) bool {
	return u == nil || u.BaseInferenceComponentName == "" || strings.EqualFold(u.BaseInferenceComponentName, cur.BaseInferenceComponentName)
}

// MergeSpecification checks the Specification of an
// UpdateInferenceComponent and returns the specification it leaves: the
// members given are checked against the service model as they were sent
// (their paths are the request's), merged over cur (Merge), and the
// result is held to every rule of CreateInferenceComponent's
// Specification (ValidateSpecification). The error is a *ValidationError.
func MergeSpecification(cur InferenceComponentSpecification, u *InferenceComponentSpecification) (InferenceComponentSpecification, error) {
	var c checker
	u.check(&c, "specification")
	if err := c.err(); err != nil {
		return cur, err
	}
	merged := cur.Merge(u)
	return merged, ValidateSpecification(&merged)
}
