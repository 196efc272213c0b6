package applicationautoscaling

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"regexp"
	"slices"
	"strings"
)

// Scalable targets: RegisterScalableTarget, DescribeScalableTargets,
// DeregisterScalableTarget, and the checks every operation makes of a
// target's namespace, dimension and resource ID.

var (
	namespaces = []string{"ecs", "elasticmapreduce", "ec2", "appstream", "dynamodb", "rds", "sagemaker", "custom-resource",
		"comprehend", "lambda", "cassandra", "kafka", "elasticache", "neptune", "workspaces"}
	dimensions = []string{"ecs:service:DesiredCount", "ec2:spot-fleet-request:TargetCapacity", "elasticmapreduce:instancegroup:InstanceCount",
		"appstream:fleet:DesiredCapacity", "dynamodb:table:ReadCapacityUnits", "dynamodb:table:WriteCapacityUnits",
		"dynamodb:index:ReadCapacityUnits", "dynamodb:index:WriteCapacityUnits", "rds:cluster:ReadReplicaCount",
		"sagemaker:variant:DesiredInstanceCount", "custom-resource:ResourceType:Property",
		"comprehend:document-classifier-endpoint:DesiredInferenceUnits", "comprehend:entity-recognizer-endpoint:DesiredInferenceUnits",
		"lambda:function:ProvisionedConcurrency", "cassandra:table:ReadCapacityUnits", "cassandra:table:WriteCapacityUnits",
		"kafka:broker-storage:VolumeSize", "elasticache:cache-cluster:Nodes", "elasticache:replication-group:NodeGroups",
		"elasticache:replication-group:Replicas", "neptune:cluster:ReadReplicaCount", "sagemaker:variant:DesiredProvisionedConcurrency",
		"sagemaker:inference-component:DesiredCopyCount", "workspaces:workspacespool:DesiredUserSessions"}

	sagemakerName = `[a-zA-Z0-9](-*[a-zA-Z0-9]){0,62}`
	variantID     = regexp.MustCompile(`^endpoint/(` + sagemakerName + `)/variant/(` + sagemakerName + `)$`)
	componentID   = regexp.MustCompile(`^inference-component/(` + sagemakerName + `)$`)
)

func enumError(member, v string, set []string) *APIError {
	return validation("1 validation error detected: Value '%s' at '%s' failed to satisfy constraint: Member must satisfy enum value set: [%s]",
		v, member, strings.Join(set, ", "))
}

func required(member string) *APIError {
	return validation("1 validation error detected: Value null at '%s' failed to satisfy constraint: Member must not be null", member)
}

// checkNamespace: the one namespace mce serves.
func checkNamespace(ns string) *APIError {
	switch {
	case ns == "":
		return required("serviceNamespace")
	case !slices.Contains(namespaces, ns):
		return enumError("serviceNamespace", ns, namespaces)
	case ns != Namespace:
		return validation("mce serves only SageMaker's scalable targets (ServiceNamespace %q), not %q's.", Namespace, ns)
	}
	return nil
}

func checkDimension(dim string, mayBeEmpty bool) *APIError {
	switch {
	case dim == "" && mayBeEmpty:
		return nil
	case dim == "":
		return required("scalableDimension")
	case !slices.Contains(dimensions, dim):
		return enumError("scalableDimension", dim, dimensions)
	case dim == "sagemaker:variant:DesiredProvisionedConcurrency":
		return validation("mce serves no serverless endpoints, so no provisioned concurrency: the scalable dimensions it serves are %s and %s.", DimensionVariant, DimensionComponent)
	case dim != DimensionVariant && dim != DimensionComponent:
		return validation("Unsupported service namespace, resource type or scalable dimension: mce scales %s and %s only.", DimensionVariant, DimensionComponent)
	}
	return nil
}

func checkResourceID(member, id string) *APIError {
	switch {
	case id == "":
		return required(member)
	case len(id) > 1600:
		return validation("1 validation error detected: Value at '%s' failed to satisfy constraint: Member must have length less than or equal to 1600", member)
	}
	return nil
}

// checkTargetKey checks a namespace, resource ID and dimension together:
// the resource ID's shape is the dimension's.
func checkTargetKey(ns, id, dim string) *APIError {
	if e := checkNamespace(ns); e != nil {
		return e
	}
	if e := checkResourceID("resourceId", id); e != nil {
		return e
	}
	if e := checkDimension(dim, false); e != nil {
		return e
	}
	re, shape := variantID, "endpoint/<endpoint-name>/variant/<variant-name>"
	if dim == DimensionComponent {
		re, shape = componentID, "inference-component/<inference-component-name>"
	}
	if !re.MatchString(id) {
		return validation("Unsupported service namespace, resource type or scalable dimension: the resource ID %q does not name a resource of the dimension %s (%s).", id, dim, shape)
	}
	return nil
}

func newUUID() string {
	var b [16]byte
	rand.Read(b[:])
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	h := hex.EncodeToString(b[:])
	return h[:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:]
}

func (s *Service) targetARN() string {
	var b [16]byte
	rand.Read(b[:])
	return "arn:aws:application-autoscaling:" + s.region + ":" + s.account + ":scalable-target/" + hex.EncodeToString(b[:])[:28]
}

func (s *Service) roleARN() string {
	return "arn:aws:iam::" + s.account + ":role/aws-service-role/sagemaker.application-autoscaling.amazonaws.com/AWSServiceRoleForApplicationAutoScaling_SageMakerEndpoint"
}

func notRegistered(k targetKey) *APIError {
	return notFound("No scalable target registered for service namespace: %s, resource ID: %s, scalable dimension: %s",
		k.ServiceNamespace, k.ResourceID, k.ScalableDimension)
}

// checkCapacity refuses a negative or absurd capacity; a variant has at
// least one instance.
func checkCapacity(member string, v *int32, dim string) *APIError {
	if v == nil {
		return nil
	}
	if *v < 0 {
		return validation("1 validation error detected: Value '%d' at '%s' failed to satisfy constraint: Member must have value greater than or equal to 0", *v, member)
	}
	if *v > maxCapacity {
		return validation("The %s %d is more than mce accepts (%d).", member, *v, maxCapacity)
	}
	if *v == 0 && dim == DimensionVariant && member == "minCapacity" {
		return validation("The minimum capacity of a SageMaker endpoint variant must be at least 1: only inference components scale to zero.")
	}
	return nil
}

func (s *Service) register(ctx context.Context, in *registerInput) (any, *APIError) {
	if e := checkTargetKey(in.ServiceNamespace, in.ResourceID, in.ScalableDimension); e != nil {
		return nil, e
	}
	if e := checkCapacity("minCapacity", in.MinCapacity, in.ScalableDimension); e != nil {
		return nil, e
	}
	if e := checkCapacity("maxCapacity", in.MaxCapacity, in.ScalableDimension); e != nil {
		return nil, e
	}
	if in.RoleARN != nil && (len(*in.RoleARN) == 0 || len(*in.RoleARN) > 1600 || !strings.HasPrefix(*in.RoleARN, "arn:")) {
		return nil, validation("The RoleARN %q is not an IAM role's ARN.", *in.RoleARN)
	}
	if len(in.Tags) > 50 {
		return nil, validation("1 validation error detected: Value at 'tags' failed to satisfy constraint: Member must have length less than or equal to 50")
	}
	res := s.resources()
	if res == nil {
		return nil, internal("mce's Application Auto Scaling is not running yet; try again.")
	}
	_, exists, err := res.Capacity(ctx, in.ScalableDimension, in.ResourceID)
	if err != nil {
		return nil, newErr(400, CodeFailedResourceAccess, "Unable to read the capacity of %s: %s", in.ResourceID, err.Error())
	}
	if !exists {
		kind := "endpoint variant"
		if in.ScalableDimension == DimensionComponent {
			kind = "inference component"
		}
		return nil, validation("Unable to register the scalable target: the %s %s does not exist.", kind, in.ResourceID)
	}
	k := key(in.ScalableDimension, in.ResourceID)
	s.mu.Lock()
	t := s.targets[k]
	var next ScalableTarget
	if t == nil {
		if in.MinCapacity == nil || in.MaxCapacity == nil {
			s.mu.Unlock()
			return nil, validation("MinCapacity and MaxCapacity are required to register a new scalable target.")
		}
		if len(s.targets) >= maxTargets {
			s.mu.Unlock()
			return nil, limitExceeded("The maximum number of scalable targets (%d) has been reached.", maxTargets)
		}
		next = ScalableTarget{ServiceNamespace: in.ServiceNamespace, ResourceID: in.ResourceID, ScalableDimension: in.ScalableDimension,
			RoleARN: s.roleARN(), CreationTime: epoch{s.now().Truncate(1e6)}, ScalableTargetARN: s.targetARN()}
	} else {
		next = t.T
	}
	if in.MinCapacity != nil {
		next.MinCapacity = *in.MinCapacity
	}
	if in.MaxCapacity != nil {
		next.MaxCapacity = *in.MaxCapacity
	}
	if in.RoleARN != nil {
		next.RoleARN = *in.RoleARN
	}
	if in.SuspendedState != nil {
		next.SuspendedState = mergeSuspended(next.SuspendedState, in.SuspendedState)
	}
	if next.MinCapacity > next.MaxCapacity {
		s.mu.Unlock()
		return nil, validation("Minimum capacity cannot be greater than maximum capacity")
	}
	if t == nil {
		t = &target{}
		s.targets[k] = t
	}
	t.T = next
	s.mu.Unlock()
	if err := s.persist(k); err != nil {
		return nil, internal("The scalable target could not be written to mce's state folder.")
	}
	s.poke()
	return map[string]string{"ScalableTargetARN": next.ScalableTargetARN}, nil
}

func mergeSuspended(old, in *SuspendedState) *SuspendedState {
	out := SuspendedState{}
	if old != nil {
		out = *old
	}
	if in.DynamicScalingInSuspended != nil {
		out.DynamicScalingInSuspended = in.DynamicScalingInSuspended
	}
	if in.DynamicScalingOutSuspended != nil {
		out.DynamicScalingOutSuspended = in.DynamicScalingOutSuspended
	}
	if in.ScheduledScalingSuspended != nil {
		out.ScheduledScalingSuspended = in.ScheduledScalingSuspended
	}
	return &out
}

// poke has Run evaluate soon (a target's bounds changed).
func (s *Service) poke() {
	select {
	case s.nudge <- struct{}{}:
	default:
	}
}

func checkIDs(member string, ids []string) *APIError {
	if len(ids) > 50 {
		return validation("1 validation error detected: Value at '%s' failed to satisfy constraint: Member must have length less than or equal to 50", member)
	}
	for _, id := range ids {
		if e := checkResourceID(member, id); e != nil {
			return e
		}
	}
	return nil
}

func (s *Service) describeTargets(_ context.Context, in *describeTargetsInput) (any, *APIError) {
	if e := checkFilter(in.ServiceNamespace, in.ScalableDimension); e != nil {
		return nil, e
	}
	if e := checkIDs("resourceIds", in.ResourceIDs); e != nil {
		return nil, e
	}
	s.mu.Lock()
	var list []ScalableTarget
	for _, t := range s.targets {
		if in.ScalableDimension != "" && t.T.ScalableDimension != in.ScalableDimension {
			continue
		}
		if len(in.ResourceIDs) > 0 && !slices.Contains(in.ResourceIDs, t.T.ResourceID) {
			continue
		}
		list = append(list, t.T)
	}
	s.mu.Unlock()
	items, next, e := page(list, func(t ScalableTarget) string { return t.ResourceID + "|" + t.ScalableDimension }, in.MaxResults, 50, in.NextToken)
	if e != nil {
		return nil, e
	}
	return struct {
		ScalableTargets []ScalableTarget
		NextToken       *string `json:",omitempty"`
	}{items, next}, nil
}

func (s *Service) deregister(_ context.Context, in *targetKey) (any, *APIError) {
	s.policyMu.Lock()
	defer s.policyMu.Unlock()
	if e := checkTargetKey(in.ServiceNamespace, in.ResourceID, in.ScalableDimension); e != nil {
		return nil, e
	}
	k := key(in.ScalableDimension, in.ResourceID)
	s.mu.Lock()
	t := s.targets[k]
	if t == nil {
		s.mu.Unlock()
		return nil, notRegistered(*in)
	}
	var alarms []string
	for _, p := range t.Policies {
		alarms = append(alarms, ownedAlarms(p)...)
	}
	delete(s.targets, k)
	s.mu.Unlock()
	if err := s.persist(k); err != nil {
		return nil, internal("The scalable target's file could not be removed from mce's state folder.")
	}
	if err := s.cw.DeleteAlarms(alarms...); err != nil {
		s.log.Error().Err(err).Msg("applicationautoscaling: deleting a deregistered target's alarms")
	}
	return struct{}{}, nil
}

// page answers one page of items sorted by keyOf: at most MaxResults
// (1 to max, default max), after the key the NextToken names.
func page[T any](items []T, keyOf func(T) string, maxResults *int32, max int, token *string) ([]T, *string, *APIError) {
	n := max
	if maxResults != nil {
		if *maxResults < 1 {
			return nil, nil, validation("1 validation error detected: Value '%d' at 'maxResults' failed to satisfy constraint: Member must have value greater than or equal to 1", *maxResults)
		}
		if int(*maxResults) > max {
			return nil, nil, validation("1 validation error detected: Value '%d' at 'maxResults' failed to satisfy constraint: Member must have value less than or equal to %d", *maxResults, max)
		}
		n = int(*maxResults)
	}
	slices.SortFunc(items, func(a, b T) int { return strings.Compare(keyOf(a), keyOf(b)) })
	if token != nil {
		b, err := base64.RawURLEncoding.DecodeString(*token)
		if err != nil || len(b) < 1 || b[0] != 'k' || len(*token) > 8192 {
			return nil, nil, validation("Invalid NextToken: it is not one mce gave.")
		}
		after := string(b[1:])
		i, _ := slices.BinarySearchFunc(items, after, func(t T, k string) int { return strings.Compare(keyOf(t), k) })
		for i < len(items) && keyOf(items[i]) <= after {
			i++
		}
		items = items[i:]
	}
	var next *string
	if len(items) > n {
		items = items[:n]
		tok := base64.RawURLEncoding.EncodeToString([]byte("k" + keyOf(items[n-1])))
		next = &tok
	}
	if items == nil {
		items = []T{}
	}
	return items, next, nil
}

// VariantOf reads a variant's resource ID (endpoint/<endpoint>/variant/<variant>).
func VariantOf(resourceID string) (endpoint, variant string) { return splitVariant(resourceID) }

// ComponentOf reads a component's resource ID (inference-component/<name>).
func ComponentOf(resourceID string) string {
	m := componentID.FindStringSubmatch(resourceID)
	if m == nil {
		return ""
	}
	return m[1]
}

// checkFilter checks what every Describe operation filters on: the
// namespace, and the dimension when one is given.
func checkFilter(namespace, dimension string) *APIError {
	if e := checkNamespace(namespace); e != nil {
		return e
	}
	return checkDimension(dimension, true)
}

// lockTarget checks in and returns the target it names, with its key,
// s.mu held; an unregistered target is ObjectNotFound, nothing held.
func (s *Service) lockTarget(in targetKey) (string, *target, *APIError) {
	if e := checkTargetKey(in.ServiceNamespace, in.ResourceID, in.ScalableDimension); e != nil {
		return "", nil, e
	}
	k := key(in.ScalableDimension, in.ResourceID)
	s.mu.Lock()
	t := s.targets[k]
	if t == nil {
		s.mu.Unlock()
		return "", nil, notRegistered(in)
	}
	return k, t, nil
}
