package host

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"reflect"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/mce-run/mce/authz"
	"github.com/mce-run/mce/host/spec"
	"github.com/mce-run/mce/host/store"
	"github.com/mce-run/mce/internal/wire"
)

// The SageMaker control plane, awsJson1_1 (https://smithy.io/2.0/aws/protocols/aws-json-1_1-protocol.html): every
// operation is POST / with X-Amz-Target: SageMaker.<Operation> and a JSON
// body; errors are HTTP 400 with __type and Message.

const (
	codeValidationException = "ValidationException"
	codeResourceNotFound    = "ResourceNotFound"
	codeResourceInUse       = "ResourceInUse"
	jsonContentType         = "application/x-amz-json-1.1"
	maxControlBody          = 1 << 20
)

func validationException(format string, args ...any) *APIError {
	return &APIError{Status: http.StatusBadRequest, Code: codeValidationException, Message: fmt.Sprintf(format, args...)}
}

// operation is one control-plane operation. prepare decodes the body once
// into the operation's typed input and returns the resource that input acts
// on and the call that runs on that same decoded value: authorization, in
// between, sees exactly the resource the operation uses (no second parse
// that could read the body differently).
type operation interface {
	prepare(s *Server, body []byte) (resource string, run func(context.Context) (any, error), err error)
}

// op is an operation with input In.
type op[In any] struct {
	// resource is the ARN the input acts on; nil means "*" (List operations).
	resource func(s *Server, in *In) string
	run      func(s *Server, ctx context.Context, in *In) (any, error)
}

func (o op[In]) prepare(s *Server, body []byte) (string, func(context.Context) (any, error), error) {
	in := new(In)
	if err := decode(body, in); err != nil {
		return "", nil, err
	}
	resource := "*"
	if o.resource != nil {
		resource = o.resource(s, in)
	}
	return resource, func(ctx context.Context) (any, error) { return o.run(s, ctx, in) }, nil
}

// The inputs of the operations that name one resource.
type (
	modelNameInput  struct{ ModelName string }
	configNameInput struct{ EndpointConfigName string }
	endpointInput   struct{ EndpointName string }
)

func modelResource(s *Server, in *modelNameInput) string { return s.arn(spec.KindModel, in.ModelName) }
func configResource(s *Server, in *configNameInput) string {
	return s.arn(spec.KindEndpointConfig, in.EndpointConfigName)
}
func endpointResource(s *Server, in *endpointInput) string {
	return s.arn(spec.KindEndpoint, in.EndpointName)
}

var operations = map[string]operation{
	"CreateModel": op[spec.CreateModelInput]{func(s *Server, in *spec.CreateModelInput) string {
		return s.arn(spec.KindModel, in.ModelName)
	}, opCreateModel},
	"DescribeModel": op[modelNameInput]{modelResource, opDescribeModel},
	"ListModels":    op[listInput]{nil, opListModels},
	"DeleteModel":   op[modelNameInput]{modelResource, opDeleteModel},
	"CreateEndpointConfig": op[spec.CreateEndpointConfigInput]{func(s *Server, in *spec.CreateEndpointConfigInput) string {
		return s.arn(spec.KindEndpointConfig, in.EndpointConfigName)
	}, opCreateEndpointConfig},
	"DescribeEndpointConfig": op[configNameInput]{configResource, opDescribeEndpointConfig},
	"ListEndpointConfigs":    op[listInput]{nil, opListEndpointConfigs},
	"DeleteEndpointConfig":   op[configNameInput]{configResource, opDeleteEndpointConfig},
	"CreateEndpoint": op[spec.CreateEndpointInput]{func(s *Server, in *spec.CreateEndpointInput) string {
		return s.arn(spec.KindEndpoint, in.EndpointName)
	}, opCreateEndpoint},
	"DescribeEndpoint": op[endpointInput]{endpointResource, opDescribeEndpoint},
	"ListEndpoints":    op[listInput]{nil, opListEndpoints},
	"UpdateEndpoint": op[updateEndpointInput]{func(s *Server, in *updateEndpointInput) string {
		return s.arn(spec.KindEndpoint, in.EndpointName)
	}, opUpdateEndpoint},
	"UpdateEndpointWeightsAndCapacities": op[updateWeightsInput]{func(s *Server, in *updateWeightsInput) string {
		return s.arn(spec.KindEndpoint, in.EndpointName)
	}, opUpdateWeightsAndCapacities},
	"DeleteEndpoint": op[endpointInput]{endpointResource, opDeleteEndpoint},
	"AddTags":        op[addTagsInput]{func(s *Server, in *addTagsInput) string { return s.tagResource(in.ResourceArn) }, opAddTags},
	"ListTags":       op[listTagsInput]{func(s *Server, in *listTagsInput) string { return s.tagResource(in.ResourceArn) }, opListTags},
	"DeleteTags":     op[deleteTagsInput]{func(s *Server, in *deleteTagsInput) string { return s.tagResource(in.ResourceArn) }, opDeleteTags},
}

// controlPlane serves POST /.
func (s *Server) controlPlane(c echo.Context) error {
	r, w := c.Request(), c.Response()
	w.Header().Set(hdrRequestID, s.ids.next())
	target := r.Header.Get(wire.HeaderAmzTarget)
	if op, ok := strings.CutPrefix(target, authz.LogsTargetPrefix); ok {
		return s.cloudWatchLogs(c, op)
	}
	service, opName, ok := strings.Cut(target, ".")
	op := operations[opName]
	if !ok || service != "SageMaker" || op == nil {
		writeError(w, &APIError{Status: http.StatusBadRequest, Code: CodeUnknownOperation,
			Message: fmt.Sprintf("mce does not implement the operation %q (X-Amz-Target).", target)})
		return nil
	}
	action, _ := authz.ControlPlaneAction(target)
	// The body names the resource: before reading it, only what the
	// headers decide (authentication) is checked.
	if _, api := s.preAuthorize(r.Context(), r, action, "", nil); api != nil {
		writeError(w, api)
		return nil
	}
	rb, api := s.readBody(w, r, maxControlBody, func(int64) *APIError {
		return validationException("The request body exceeds %d bytes.", maxControlBody)
	})
	if api != nil {
		if api.Code == CodeValidation {
			api.Code = codeValidationException // the control plane's name for it
		}
		writeError(w, api)
		return nil
	}
	defer rb.release()
	body := rb.bytes()
	// The caller is authenticated before the body is decoded, so that an
	// unsigned or badly signed request learns nothing from the decoder.
	p, api := s.authenticate(r, body)
	if api != nil {
		writeError(w, api)
		return nil
	}
	out, err := s.control(r.Context(), op, body, func(resource string) *APIError {
		if e := accessOf(c); e != nil {
			e.Resource = resource
		}
		return s.decide(r.Context(), r, p, action, resource, nil)
	})
	if err != nil {
		writeError(w, s.controlError(w.Header().Get(hdrRequestID), err))
		return nil
	}
	b, err := json.Marshal(out)
	if err != nil {
		writeError(w, s.internalError(w.Header().Get(hdrRequestID), fmt.Errorf("encoding the answer of %s: %w", opName, err)))
		return nil
	}
	w.Header().Set("Content-Type", jsonContentType)
	w.WriteHeader(http.StatusOK)
	w.Write(b)
	s.log.Info().Str("operation", opName).Msg("control-plane call")
	return nil
}

// control runs one control-plane operation: the body is decoded once, the
// resource of the decoded input is authorized, and the operation runs on
// that same input. A body that does not decode is refused without running
// anything.
func (s *Server) control(ctx context.Context, o operation, body []byte, authorize func(resource string) *APIError) (any, error) {
	resource, run, err := o.prepare(s, body)
	if err != nil {
		return nil, err
	}
	if api := authorize(resource); api != nil {
		return nil, api
	}
	return run(ctx)
}

// controlError maps errors to the control plane's shapes: everything a
// caller did wrong is a 400 with its code; SageMaker reports missing and
// existing resources as ValidationException.
func (s *Server) controlError(reqID string, err error) *APIError {
	var api *APIError
	var vErr *spec.ValidationError
	var dErr *spec.DecodeError
	var nf *spec.NotFoundError
	var ae *spec.AlreadyExistsError
	switch {
	case errors.As(err, &api):
		return api
	case errors.As(err, &vErr):
		return validationException("%s", redactPaths(vErr.Message()))
	case errors.As(err, &dErr):
		return validationException("%s", redactPaths(dErr.Error()))
	case errors.As(err, &nf):
		return validationException("%s", nf.Message())
	case errors.As(err, &ae):
		return validationException("%s", ae.Message())
	}
	return s.internalError(reqID, err)
}

func decode(body []byte, v any) error {
	if len(strings.TrimSpace(string(body))) == 0 {
		body = []byte("{}")
	}
	return spec.DecodeJSON(body, v)
}

func (s *Server) arn(kind spec.Kind, name string) string {
	return spec.ARN(s.cfg.Region, s.cfg.Account, kind, name)
}

func notFound(s *Server, kind spec.Kind, name string) error {
	return &spec.NotFoundError{Kind: kind, Name: name, ARN: s.arn(kind, name)}
}

// requireName checks a name member of Describe/Delete inputs.
func requireName(member, v string) error {
	if v == "" {
		return validationException("1 validation error detected: Value null at '%s' failed to satisfy constraint: Member must not be null", member)
	}
	if len(v) > 63 || !namePattern.MatchString(v) {
		return validationException("1 validation error detected: Value '%s' at '%s' failed to satisfy constraint: Member must satisfy regular expression pattern: %s", v, member, namePatternText)
	}
	return nil
}

// ---- models

// CreateModel stores a model; baseDir is where relative file:// URLs resolve.
func (s *Server) CreateModel(in spec.CreateModelInput, baseDir string) (string, error) {
	if err := in.Validate(); err != nil {
		return "", err
	}
	if err := s.checkModelData(in, baseDir); err != nil {
		return "", err
	}
	rec := ModelRecord{Input: in, BaseDir: baseDir, ARN: s.arn(spec.KindModel, in.ModelName), Created: time.Now(), Tags: tagList(in.Tags)}
	ok, err := s.store.Create(store.Models, in.ModelName, rec)
	if err != nil {
		return "", err
	}
	if !ok {
		return "", &spec.AlreadyExistsError{Kind: spec.KindModel, Name: in.ModelName, ARN: rec.ARN}
	}
	return rec.ARN, nil
}

// checkModelData refuses model data the host will not serve (file:// paths
// outside the model roots) as a ValidationException.
func (s *Server) checkModelData(in spec.CreateModelInput, baseDir string) error {
	if s.cfg.ModelData == nil {
		return nil
	}
	defs := in.Containers
	if in.PrimaryContainer != nil {
		defs = append([]spec.ContainerDefinition{*in.PrimaryContainer}, defs...)
	}
	for _, d := range defs {
		if err := s.cfg.ModelData.CheckModelDataURL(d.ModelData(), baseDir); err != nil {
			return validationException("%s", err.Error())
		}
	}
	return nil
}

func opCreateModel(s *Server, _ context.Context, in *spec.CreateModelInput) (any, error) {
	arn, err := s.CreateModel(*in, s.cfg.BaseDir)
	if err != nil {
		return nil, err
	}
	return map[string]string{"ModelArn": arn}, nil
}

type describeModelOutput struct {
	spec.CreateModelInput
	ModelArn     string `json:"ModelArn"`
	CreationTime epoch  `json:"CreationTime"`
}

// getRecord reads a stored model or endpoint config; a missing one is
// SageMaker's "Could not find …" ValidationException.
func getRecord[T any](s *Server, bucket string, kind spec.Kind, name string) (T, error) {
	var rec T
	err := s.store.Get(bucket, name, &rec)
	if errors.Is(err, store.ErrNotFound) {
		return rec, notFound(s, kind, name)
	}
	return rec, err
}

// deleteRecord removes a stored model or endpoint config.
func (s *Server) deleteRecord(bucket string, kind spec.Kind, name string) (any, error) {
	ok, err := s.store.Delete(bucket, name)
	if err != nil {
		return nil, err
	}
	if !ok {
		return nil, notFound(s, kind, name)
	}
	return struct{}{}, nil
}

func (s *Server) getModel(name string) (ModelRecord, error) {
	return getRecord[ModelRecord](s, store.Models, spec.KindModel, name)
}

func opDescribeModel(s *Server, _ context.Context, in *modelNameInput) (any, error) {
	if err := requireName("modelName", in.ModelName); err != nil {
		return nil, err
	}
	rec, err := s.getModel(in.ModelName)
	if err != nil {
		return nil, err
	}
	out := describeModelOutput{CreateModelInput: rec.Input, ModelArn: rec.ARN, CreationTime: epoch(rec.Created)}
	out.Tags = nil // Tags are not part of DescribeModel's output
	return out, nil
}

func opDeleteModel(s *Server, _ context.Context, in *modelNameInput) (any, error) {
	if err := requireName("modelName", in.ModelName); err != nil {
		return nil, err
	}
	return s.deleteRecord(store.Models, spec.KindModel, in.ModelName)
}

// listInput is the common part of the List* operations.
type listInput struct {
	SortBy                 string
	SortOrder              string
	NextToken              string
	MaxResults             *int
	NameContains           string
	CreationTimeBefore     *epoch
	CreationTimeAfter      *epoch
	LastModifiedTimeBefore *epoch
	LastModifiedTimeAfter  *epoch
	StatusEquals           string
}

type listItem struct {
	name     string
	created  time.Time
	modified time.Time
	status   string
	out      any
}

// page filters, sorts and pages items as the List* operations do.
func (in listInput) page(items []listItem, sortKeys ...string) ([]any, string, error) {
	if in.SortBy == "" {
		in.SortBy = "CreationTime"
	}
	if !contains(sortKeys, in.SortBy) {
		return nil, "", validationException("1 validation error detected: Value '%s' at 'sortBy' failed to satisfy constraint: Member must satisfy enum value set: [%s]", in.SortBy, strings.Join(sortKeys, ", "))
	}
	if in.SortOrder == "" {
		in.SortOrder = "Descending"
	}
	if in.SortOrder != "Ascending" && in.SortOrder != "Descending" {
		return nil, "", validationException("1 validation error detected: Value '%s' at 'sortOrder' failed to satisfy constraint: Member must satisfy enum value set: [Ascending, Descending]", in.SortOrder)
	}
	max := 10
	if in.MaxResults != nil {
		if *in.MaxResults < 1 || *in.MaxResults > 100 {
			return nil, "", validationException("1 validation error detected: Value '%d' at 'maxResults' failed to satisfy constraint: Member must have value between 1 and 100", *in.MaxResults)
		}
		max = *in.MaxResults
	}
	var kept []listItem
	for _, it := range items {
		switch {
		case in.NameContains != "" && !strings.Contains(strings.ToLower(it.name), strings.ToLower(in.NameContains)):
		case in.CreationTimeBefore != nil && !it.created.Before(time.Time(*in.CreationTimeBefore)):
		case in.CreationTimeAfter != nil && !it.created.After(time.Time(*in.CreationTimeAfter)):
		case in.LastModifiedTimeBefore != nil && !it.modified.Before(time.Time(*in.LastModifiedTimeBefore)):
		case in.LastModifiedTimeAfter != nil && !it.modified.After(time.Time(*in.LastModifiedTimeAfter)):
		case in.StatusEquals != "" && it.status != in.StatusEquals:
		default:
			kept = append(kept, it)
		}
	}
	before := func(a, b listItem) bool { // ascending order; names break ties
		switch in.SortBy {
		case "Name":
			return a.name < b.name
		case "Status":
			return a.status < b.status || (a.status == b.status && a.name < b.name)
		}
		return a.created.Before(b.created) || (a.created.Equal(b.created) && a.name < b.name)
	}
	sort.SliceStable(kept, func(i, j int) bool {
		if in.SortOrder == "Descending" {
			return before(kept[j], kept[i])
		}
		return before(kept[i], kept[j])
	})
	start := 0
	if in.NextToken != "" {
		raw, err := base64.RawURLEncoding.DecodeString(in.NextToken)
		n, err2 := strconv.Atoi(string(raw))
		if err != nil || err2 != nil || n < 0 || n > len(kept) {
			return nil, "", validationException("The NextToken is not valid.")
		}
		start = n
	}
	end := min(start+max, len(kept))
	out := make([]any, 0, end-start)
	for _, it := range kept[start:end] {
		out = append(out, it.out)
	}
	next := ""
	if end < len(kept) {
		next = base64.RawURLEncoding.EncodeToString([]byte(strconv.Itoa(end)))
	}
	return out, next, nil
}

func contains(xs []string, x string) bool {
	for _, v := range xs {
		if v == x {
			return true
		}
	}
	return false
}

func opListModels(s *Server, _ context.Context, in *listInput) (any, error) {
	return listOperation(in, "Models", []string{"Name", "CreationTime"}, func() ([]listItem, error) {
		var items []listItem
		err := store.List(s.store, store.Models, func(r ModelRecord) error {
			items = append(items, listItem{name: r.Input.ModelName, created: r.Created, modified: r.Created,
				out: map[string]any{"ModelName": r.Input.ModelName, "ModelArn": r.ARN, "CreationTime": epoch(r.Created)}})
			return nil
		})
		return items, err
	})
}

// listOperation is the shape of the List operations: collect every item,
// then filter, sort and page them as in says, under key (with NextToken when
// more remain).
func listOperation(in *listInput, key string, sortKeys []string, collect func() ([]listItem, error)) (any, error) {
	items, err := collect()
	if err != nil {
		return nil, err
	}
	page, next, err := in.page(items, sortKeys...)
	if err != nil {
		return nil, err
	}
	out := map[string]any{key: page}
	if next != "" {
		out["NextToken"] = next
	}
	return out, nil
}

// ---- endpoint configs

// CreateEndpointConfig stores an endpoint configuration; its models must exist.
func (s *Server) CreateEndpointConfig(in spec.CreateEndpointConfigInput) (string, error) {
	if err := in.Validate(); err != nil {
		return "", err
	}
	for _, v := range in.ProductionVariants {
		if _, err := s.getModel(v.ModelName); err != nil {
			return "", err
		}
	}
	rec := ConfigRecord{Input: in, ARN: s.arn(spec.KindEndpointConfig, in.EndpointConfigName), Created: time.Now(), Tags: tagList(in.Tags)}
	ok, err := s.store.Create(store.EndpointConfigs, in.EndpointConfigName, rec)
	if err != nil {
		return "", err
	}
	if !ok {
		return "", &spec.AlreadyExistsError{Kind: spec.KindEndpointConfig, Name: in.EndpointConfigName, ARN: rec.ARN}
	}
	return rec.ARN, nil
}

func opCreateEndpointConfig(s *Server, _ context.Context, in *spec.CreateEndpointConfigInput) (any, error) {
	arn, err := s.CreateEndpointConfig(*in)
	if err != nil {
		return nil, err
	}
	return map[string]string{"EndpointConfigArn": arn}, nil
}

func (s *Server) getConfig(name string) (ConfigRecord, error) {
	return getRecord[ConfigRecord](s, store.EndpointConfigs, spec.KindEndpointConfig, name)
}

func opDescribeEndpointConfig(s *Server, _ context.Context, in *configNameInput) (any, error) {
	if err := requireName("endpointConfigName", in.EndpointConfigName); err != nil {
		return nil, err
	}
	rec, err := s.getConfig(in.EndpointConfigName)
	if err != nil {
		return nil, err
	}
	out := struct {
		spec.CreateEndpointConfigInput
		EndpointConfigArn string `json:"EndpointConfigArn"`
		CreationTime      epoch  `json:"CreationTime"`
	}{rec.Input, rec.ARN, epoch(rec.Created)}
	out.Tags = nil
	return out, nil
}

func opDeleteEndpointConfig(s *Server, _ context.Context, in *configNameInput) (any, error) {
	if err := requireName("endpointConfigName", in.EndpointConfigName); err != nil {
		return nil, err
	}
	return s.deleteRecord(store.EndpointConfigs, spec.KindEndpointConfig, in.EndpointConfigName)
}

func opListEndpointConfigs(s *Server, _ context.Context, in *listInput) (any, error) {
	return listOperation(in, "EndpointConfigs", []string{"Name", "CreationTime"}, func() ([]listItem, error) {
		var items []listItem
		err := store.List(s.store, store.EndpointConfigs, func(r ConfigRecord) error {
			items = append(items, listItem{name: r.Input.EndpointConfigName, created: r.Created, modified: r.Created,
				out: map[string]any{"EndpointConfigName": r.Input.EndpointConfigName, "EndpointConfigArn": r.ARN, "CreationTime": epoch(r.Created)}})
			return nil
		})
		return items, err
	})
}

// ---- endpoints

// planFor resolves an endpoint on a stored configuration and its models.
func (s *Server) planFor(in spec.CreateEndpointInput) (spec.EndpointPlan, error) {
	cfg, err := s.getConfig(in.EndpointConfigName)
	if err != nil {
		return spec.EndpointPlan{}, err
	}
	lookup := func(name string) (spec.CreateModelInput, string, bool) {
		rec, err := s.getModel(name)
		return rec.Input, rec.BaseDir, err == nil
	}
	plan, warns, err := spec.BuildPlan(s.cfg.Region, s.cfg.Account, in, cfg.Input, lookup)
	for _, w := range warns {
		s.log.Warn().Str("endpoint", in.EndpointName).Msg(w)
	}
	return plan, err
}

// CreateEndpoint creates an endpoint on a stored configuration. It answers at
// once; the endpoint is Creating until its containers pass /ping.
func (s *Server) CreateEndpoint(in spec.CreateEndpointInput) (string, error) {
	if err := in.Validate(); err != nil {
		return "", err
	}
	if e := s.reg.get(in.EndpointName); e != nil {
		return "", &spec.AlreadyExistsError{Kind: spec.KindEndpoint, Name: in.EndpointName, ARN: s.arn(spec.KindEndpoint, in.EndpointName)}
	}
	plan, err := s.planFor(in)
	if err != nil {
		return "", err
	}
	e, err := s.startEndpoint(plan, in.EndpointConfigName, in.Tags)
	if err != nil {
		return "", err
	}
	return e.record().ARN, nil
}

func opCreateEndpoint(s *Server, _ context.Context, in *spec.CreateEndpointInput) (any, error) {
	arn, err := s.CreateEndpoint(*in)
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
	SpecifiedImage string `json:"SpecifiedImage"`
	ResolvedImage  string `json:"ResolvedImage,omitempty"`
	ResolutionTime epoch  `json:"ResolutionTime"`
}

type variantSummary struct {
	VariantName          string          `json:"VariantName"`
	DeployedImages       []deployedImage `json:"DeployedImages,omitempty"`
	CurrentWeight        float64         `json:"CurrentWeight"`
	DesiredWeight        float64         `json:"DesiredWeight"`
	CurrentInstanceCount int             `json:"CurrentInstanceCount"`
	DesiredInstanceCount int             `json:"DesiredInstanceCount"`
}

type describeEndpointOutput struct {
	EndpointName       string           `json:"EndpointName"`
	EndpointArn        string           `json:"EndpointArn"`
	EndpointConfigName string           `json:"EndpointConfigName"`
	ProductionVariants []variantSummary `json:"ProductionVariants,omitempty"`
	EndpointStatus     Status           `json:"EndpointStatus"`
	FailureReason      string           `json:"FailureReason,omitempty"`
	CreationTime       epoch            `json:"CreationTime"`
	LastModifiedTime   epoch            `json:"LastModifiedTime"`
	// AsyncInferenceConfig is the queue settings of an asynchronous
	// endpoint, as its configuration gave them.
	AsyncInferenceConfig *spec.AsyncInferenceConfig `json:"AsyncInferenceConfig,omitempty"`
}

// DescribeEndpoint is the endpoint as DescribeEndpoint shows it.
func (s *Server) describe(e *Endpoint) describeEndpointOutput {
	rec := e.record()
	status, reason := e.shown(rec)
	out := describeEndpointOutput{
		EndpointName: rec.Name, EndpointArn: rec.ARN, EndpointConfigName: rec.ConfigName,
		EndpointStatus: status, FailureReason: reason,
		CreationTime: epoch(rec.Created), LastModifiedTime: epoch(rec.Modified),
		AsyncInferenceConfig: asyncConfigOf(rec.Plan.Async),
	}
	if out.EndpointStatus == StatusCreating || out.EndpointStatus == StatusFailed ||
		(out.EndpointStatus == StatusUpdating && e.route.Load() == nil) {
		return out // no variants run (yet): a Failed endpoint being updated runs nothing
	}
	for _, v := range rec.Plan.Variants {
		vs := variantSummary{VariantName: v.Name, CurrentWeight: v.Weight, DesiredWeight: v.Weight,
			CurrentInstanceCount: v.InstanceCount, DesiredInstanceCount: v.InstanceCount}
		if t, ok := rec.Desired[v.Name]; ok {
			vs.DesiredWeight, vs.DesiredInstanceCount = t.Weight, t.Count
		}
		for _, c := range v.Containers {
			vs.DeployedImages = append(vs.DeployedImages, deployedImage{SpecifiedImage: c.Image, ResolvedImage: c.Image, ResolutionTime: epoch(rec.Modified)})
		}
		out.ProductionVariants = append(out.ProductionVariants, vs)
	}
	return out
}

func opDescribeEndpoint(s *Server, _ context.Context, in *endpointInput) (any, error) {
	e, err := s.getEndpoint(in.EndpointName)
	if err != nil {
		return nil, err
	}
	return s.describe(e), nil
}

func opListEndpoints(s *Server, _ context.Context, in *listInput) (any, error) {
	return listOperation(in, "Endpoints", []string{"Name", "CreationTime", "Status"}, func() ([]listItem, error) {
		var items []listItem
		for _, e := range s.reg.all() {
			rec := e.record()
			shown, _ := e.shown(rec)
			st := string(shown)
			items = append(items, listItem{name: rec.Name, created: rec.Created, modified: rec.Modified, status: st,
				out: map[string]any{"EndpointName": rec.Name, "EndpointArn": rec.ARN, "CreationTime": epoch(rec.Created),
					"LastModifiedTime": epoch(rec.Modified), "EndpointStatus": st}})
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

func opUpdateEndpoint(s *Server, _ context.Context, in *updateEndpointInput) (any, error) {
	e, err := s.getEndpoint(in.EndpointName)
	if err != nil {
		return nil, err
	}
	if err := requireName("endpointConfigName", in.EndpointConfigName); err != nil {
		return nil, err
	}
	plan, err := s.planFor(spec.CreateEndpointInput{EndpointName: e.name, EndpointConfigName: in.EndpointConfigName})
	if err != nil {
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
	if err := s.updateEndpoint(e, plan, in.EndpointConfigName); err != nil {
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

func opUpdateWeightsAndCapacities(s *Server, _ context.Context, in *updateWeightsInput) (any, error) {
	e, err := s.getEndpoint(in.EndpointName)
	if err != nil {
		return nil, err
	}
	if len(in.DesiredWeightsAndCapacities) == 0 {
		return nil, validationException("1 validation error detected: Value '[]' at 'desiredWeightsAndCapacities' failed to satisfy constraint: Member must have length greater than or equal to 1")
	}
	current := e.record().Plan
	targets := map[string]VariantTarget{}
	for i, d := range in.DesiredWeightsAndCapacities {
		var cur *spec.VariantPlan
		for j := range current.Variants {
			if current.Variants[j].Name == d.VariantName {
				cur = &current.Variants[j]
			}
		}
		if cur == nil {
			return nil, validationException("The variant name(s) [%s] is/are not present in the endpoint %q.", d.VariantName, e.record().ARN)
		}
		t := VariantTarget{Weight: cur.Weight, Count: cur.InstanceCount}
		if d.DesiredWeight != nil {
			if *d.DesiredWeight < 0 {
				return nil, validationException("1 validation error detected: Value '%v' at 'desiredWeightsAndCapacities.%d.member.desiredWeight' failed to satisfy constraint: Member must have value greater than or equal to 0", *d.DesiredWeight, i+1)
			}
			t.Weight = *d.DesiredWeight
		}
		if d.DesiredInstanceCount != nil {
			if *d.DesiredInstanceCount < 1 {
				return nil, validationException("1 validation error detected: Value '%d' at 'desiredWeightsAndCapacities.%d.member.desiredInstanceCount' failed to satisfy constraint: Member must have value greater than or equal to 1", *d.DesiredInstanceCount, i+1)
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

func opDeleteEndpoint(s *Server, _ context.Context, in *endpointInput) (any, error) {
	e, err := s.getEndpoint(in.EndpointName)
	if err != nil {
		return nil, err
	}
	s.deleteEndpoint(e)
	return struct{}{}, nil
}

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
		if _, err := s.CreateModel(m.CreateModelInput, m.Dir); err != nil {
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
		if _, err := s.CreateEndpointConfig(c.CreateEndpointConfigInput); err != nil {
			return nil, fmt.Errorf("%s: %s: %w", c.File, c.Path, err)
		}
	}
	var names []string
	for _, ep := range b.Endpoints {
		names = append(names, ep.EndpointName)
		e := s.reg.get(ep.EndpointName)
		if e != nil && e.Status() == StatusFailed {
			if err := s.DeleteEndpoint(ctx, ep.EndpointName); err != nil {
				return nil, err
			}
			e = nil
		}
		digest := fileDigest(b, ep)
		if e == nil {
			if _, err := s.CreateEndpoint(ep.CreateEndpointInput); err != nil {
				return nil, fmt.Errorf("%s: %s: %w", ep.File, ep.Path, err)
			}
			if e = s.reg.get(ep.EndpointName); e != nil {
				s.save(e, func(r *EndpointRecord) { r.Applied = digest })
			}
			continue
		}
		plan, err := s.planFor(ep.CreateEndpointInput)
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
			if err := s.WaitEndpoint(ctx, ep.EndpointName); err != nil && e.Status() != StatusInService {
				return nil, err
			}
			if err := s.updateEndpoint(e, plan, ep.EndpointConfigName); err != nil {
				return nil, err
			}
		}
		s.save(e, func(r *EndpointRecord) { r.Applied = digest })
	}
	return names, nil
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
		for _, v := range c.ProductionVariants {
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
