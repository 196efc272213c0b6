package host

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"

	"github.com/labstack/echo/v4"

	"github.com/mce-run/mce/authz"
	"github.com/mce-run/mce/host/apierr"
	"github.com/mce-run/mce/host/cloudwatch"
	"github.com/mce-run/mce/host/listing"
	"github.com/mce-run/mce/host/spec"
	"github.com/mce-run/mce/host/store"
	"github.com/mce-run/mce/internal/wire"
)

// The SageMaker control plane, awsJson1_1 (https://smithy.io/2.0/aws/protocols/aws-json-1_1-protocol.html): every
// operation is POST / with X-Amz-Target: SageMaker.<Operation> and a JSON
// body; errors are HTTP 400 with __type and Message.

const (
	jsonContentType = "application/x-amz-json-1.1"
	maxControlBody  = 1 << 20
)

// operation is one control-plane operation. prepare decodes the body once
// into the operation's typed input and returns the resource that input acts
// on and the call that runs on that same decoded value: authorization, in
// between, sees exactly the resource the operation uses (no second parse
// that could read the body differently).
type operation interface {
	prepare(s *Server, body []byte) (resource string, keys requestKeys, run func(context.Context) (any, error), err error)
	// resourceOf is the resource authorized for an input that names
	// nothing: the ARN of its kind with an empty name, "*" for a List
	// operation, "" for a tag operation (any resource mce tags). See
	// AuthzTargets.
	resourceOf(s *Server) string
}

// op is an operation with input In.
type op[In any] struct {
	// resource is the ARN the input acts on; nil means "*" (List operations).
	resource func(s *Server, in *In) string
	run      func(s *Server, ctx context.Context, in *In) (any, error) // a method expression: (*Server).opX
}

func (o op[In]) prepare(s *Server, body []byte) (string, requestKeys, func(context.Context) (any, error), error) {
	in := new(In)
	if err := decode(body, in); err != nil {
		return "", requestKeys{}, nil, err
	}
	resource := "*"
	if o.resource != nil {
		resource = o.resource(s, in)
	}
	keys := requestKeysOf(in)
	keys.reads = s3ReadsOf(in)
	return resource, keys, func(ctx context.Context) (any, error) { return o.run(s, ctx, in) }, nil
}

func (o op[In]) resourceOf(s *Server) string {
	if o.resource == nil {
		return "*"
	}
	return o.resource(s, new(In))
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
	}, (*Server).opCreateModel},
	"DescribeModel": op[modelNameInput]{modelResource, (*Server).opDescribeModel},
	"ListModels":    op[listing.Input]{nil, (*Server).opListModels},
	"DeleteModel":   op[modelNameInput]{modelResource, (*Server).opDeleteModel},
	"CreateEndpointConfig": op[spec.CreateEndpointConfigInput]{func(s *Server, in *spec.CreateEndpointConfigInput) string {
		return s.arn(spec.KindEndpointConfig, in.EndpointConfigName)
	}, (*Server).opCreateEndpointConfig},
	"DescribeEndpointConfig": op[configNameInput]{configResource, (*Server).opDescribeEndpointConfig},
	"ListEndpointConfigs":    op[listing.Input]{nil, (*Server).opListEndpointConfigs},
	"DeleteEndpointConfig":   op[configNameInput]{configResource, (*Server).opDeleteEndpointConfig},
	"CreateEndpoint": op[spec.CreateEndpointInput]{func(s *Server, in *spec.CreateEndpointInput) string {
		return s.arn(spec.KindEndpoint, in.EndpointName)
	}, (*Server).opCreateEndpoint},
	"DescribeEndpoint": op[endpointInput]{endpointResource, (*Server).opDescribeEndpoint},
	"ListEndpoints":    op[listing.Input]{nil, (*Server).opListEndpoints},
	"UpdateEndpoint": op[updateEndpointInput]{func(s *Server, in *updateEndpointInput) string {
		return s.arn(spec.KindEndpoint, in.EndpointName)
	}, (*Server).opUpdateEndpoint},
	"UpdateEndpointWeightsAndCapacities": op[updateWeightsInput]{func(s *Server, in *updateWeightsInput) string {
		return s.arn(spec.KindEndpoint, in.EndpointName)
	}, (*Server).opUpdateWeightsAndCapacities},
	"DeleteEndpoint": op[endpointInput]{endpointResource, (*Server).opDeleteEndpoint},
	"AddTags":        op[addTagsInput]{func(s *Server, in *addTagsInput) string { return s.tagResource(in.ResourceArn) }, (*Server).opAddTags},
	"ListTags":       op[listTagsInput]{func(s *Server, in *listTagsInput) string { return s.tagResource(in.ResourceArn) }, (*Server).opListTags},
	"DeleteTags":     op[deleteTagsInput]{func(s *Server, in *deleteTagsInput) string { return s.tagResource(in.ResourceArn) }, (*Server).opDeleteTags},
	"CreateInferenceComponent": op[spec.CreateInferenceComponentInput]{func(s *Server, in *spec.CreateInferenceComponentInput) string {
		return s.arn(spec.KindInferenceComponent, in.InferenceComponentName)
	}, (*Server).opCreateComponent},
	"DescribeInferenceComponent": op[componentNameInput]{componentResource, (*Server).opDescribeComponent},
	"DeleteInferenceComponent":   op[componentNameInput]{componentResource, (*Server).opDeleteComponent},
	"ListInferenceComponents":    op[listComponentsInput]{nil, (*Server).opListComponents},
	"UpdateInferenceComponent": op[updateComponentInput]{func(s *Server, in *updateComponentInput) string {
		return s.arn(spec.KindInferenceComponent, in.InferenceComponentName)
	}, (*Server).opUpdateComponent},
	"UpdateInferenceComponentRuntimeConfig": op[updateComponentRuntimeInput]{func(s *Server, in *updateComponentRuntimeInput) string {
		return s.arn(spec.KindInferenceComponent, in.InferenceComponentName)
	}, (*Server).opUpdateComponentRuntime},
}

// controlPlane serves POST /.
func (s *Server) controlPlane(c echo.Context) error {
	r, w := c.Request(), c.Response()
	w.Header().Set(hdrRequestID, s.ids.next())
	target := r.Header.Get(wire.HeaderAmzTarget)
	if op, ok := strings.CutPrefix(target, authz.LogsTargetPrefix); ok {
		return s.cloudWatchLogs(c, op)
	}
	if cloudwatch.MayBeRequest(r) {
		return serveCloudWatch(s, c)
	}
	if strings.HasPrefix(target, authz.AutoScalingTargetPrefix) {
		return serveAutoScaling(s, c)
	}
	service, opName, ok := strings.Cut(target, ".")
	op := operations[opName]
	if !ok || service != "SageMaker" || op == nil {
		apierr.Write(w, &apierr.Error{Status: http.StatusBadRequest, Code: apierr.CodeUnknownOperation,
			Message: unknownOperation(target, service, opName)})
		return nil
	}
	action, _ := authz.ControlPlaneAction(target)
	// The body names the resource: before reading it, only what the
	// headers decide (authentication) is checked.
	if _, api := s.gate.preAuthorize(r.Context(), r, action, "", nil); api != nil {
		apierr.Write(w, api)
		return nil
	}
	rb, api := s.readBody(w, r, maxControlBody, func(int64) *apierr.Error {
		return apierr.ValidationException("The request body exceeds %d bytes.", maxControlBody)
	})
	if api != nil {
		if api.Code == apierr.CodeValidation {
			api.Code = apierr.CodeValidationException // the control plane's name for it
		}
		apierr.Write(w, api)
		return nil
	}
	defer rb.release()
	body := rb.bytes()
	// The caller is authenticated before the body is decoded, so that an
	// unsigned or badly signed request learns nothing from the decoder.
	p, api := s.gate.authenticate(r, body)
	if api != nil {
		apierr.Write(w, api)
		return nil
	}
	// An operation that acts on a second, existing resource authorizes it
	// too (alsoAuthorize), with that resource's tags.
	ctx := context.WithValue(r.Context(), alsoAuthorizeKey{}, func(act, resource string, keys requestKeys) *apierr.Error {
		if !s.declaresAlso(opName, act, resource) {
			return s.internalError(w.Header().Get(hdrRequestID), errUndeclaredCheck(opName, act, resource))
		}
		return s.gate.decideOn(r.Context(), r, p, cmp.Or(act, action), resource, keys, true)
	})
	out, err := s.control(ctx, op, body, func(resource string, keys requestKeys) *apierr.Error {
		if e := accessOf(c); e != nil {
			e.Resource = resource
		}
		if api := s.gate.decideWith(r.Context(), r, p, action, resource, keys); api != nil {
			return api
		}
		return s.gate.authorizeReads(r.Context(), r, p, keys.reads) // what the call makes mce read from S3
	})
	if err != nil {
		apierr.Write(w, s.controlError(w.Header().Get(hdrRequestID), err))
		return nil
	}
	b, err := json.Marshal(out)
	if err != nil {
		apierr.Write(w, s.internalError(w.Header().Get(hdrRequestID), fmt.Errorf("encoding the answer of %s: %w", opName, err)))
		return nil
	}
	w.Header().Set("Content-Type", jsonContentType)
	w.WriteHeader(http.StatusOK)
	w.Write(b)
	s.log.Info().Str("operation", opName).Msg("control-plane call")
	return nil
}

// control runs one control-plane operation: the body is decoded once, the
// resource and the condition keys (request tags) of the decoded input are
// authorized, and the operation runs on that same input. A body that does
// not decode is refused without running anything.
func (s *Server) control(ctx context.Context, o operation, body []byte, authorize func(resource string, keys requestKeys) *apierr.Error) (any, error) {
	resource, keys, run, err := o.prepare(s, body)
	if err != nil {
		return nil, err
	}
	if api := authorize(resource, keys); api != nil {
		return nil, api
	}
	return run(ctx)
}

// controlError maps errors to the control plane's shapes: everything a
// caller did wrong is a 400 with its code; SageMaker reports missing and
// existing resources as ValidationException.
func (s *Server) controlError(reqID string, err error) *apierr.Error {
	var api *apierr.Error
	var vErr *spec.ValidationError
	var dErr *spec.DecodeError
	var nf *spec.NotFoundError
	var ae *spec.AlreadyExistsError
	switch {
	case errors.As(err, &api):
		return api
	case errors.As(err, &vErr):
		return apierr.ValidationException("%s", apierr.RedactPaths(vErr.Message()))
	case errors.As(err, &dErr):
		return apierr.ValidationException("%s", apierr.RedactPaths(dErr.Error()))
	case errors.As(err, &nf):
		return apierr.ValidationException("%s", nf.Message())
	case errors.As(err, &ae):
		return apierr.ValidationException("%s", ae.Message())
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
		return apierr.ValidationException("1 validation error detected: Value null at '%s' failed to satisfy constraint: Member must not be null", member)
	}
	if len(v) > 63 || !namePattern.MatchString(v) {
		return apierr.ValidationException("1 validation error detected: Value '%s' at '%s' failed to satisfy constraint: Member must satisfy regular expression pattern: %s", v, member, namePatternText)
	}
	return nil
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

// unknownOperation words the refusal of an operation mce does not serve.
// SageMaker's InferenceExperiment operations (shadow tests run on a
// schedule, https://docs.aws.amazon.com/sagemaker/latest/APIReference/API_CreateInferenceExperiment.html)
// are refused with the way mce offers instead: shadow variants in an
// endpoint configuration.
func unknownOperation(target, service, opName string) string {
	if service == "SageMaker" && (strings.HasSuffix(opName, "InferenceExperiment") || opName == "ListInferenceExperiments") {
		return fmt.Sprintf("mce does not serve SageMaker's InferenceExperiment operations (%s): it runs no scheduled shadow tests. "+
			"It runs shadow variants from endpoint configurations: create one with ShadowProductionVariants and deploy it with "+
			"CreateEndpoint or UpdateEndpoint; UpdateEndpointWeightsAndCapacities changes the shadow's share of the traffic.", opName)
	}
	return fmt.Sprintf("mce does not implement the operation %q (X-Amz-Target).", target)
}
