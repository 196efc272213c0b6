package loadtest

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sagemakerruntime"
	"github.com/aws/aws-sdk-go-v2/service/sagemakerruntime/types"
	"github.com/aws/smithy-go"
)

// SDK invokes an endpoint through aws-sdk-go-v2's SageMaker Runtime client,
// exactly as an application does: InvokeEndpoint, or
// InvokeEndpointWithResponseStream when Request.Stream is set.
type SDK struct {
	Client   *sagemakerruntime.Client
	Endpoint string
	Request  Request
	// NewClient makes the clients of streamed calls, one per concurrent
	// call. smithy-go (v1.28.9) decodes a client's event streams with one
	// codec whose payload buffer it reuses: two streams read at once on one
	// client race on it (the race detector shows it, and parts can be
	// corrupted). Each streamed call therefore takes a client of its own
	// from a pool; they share the HTTP client and its connections. Nil uses
	// Client for every call.
	NewClient func() *sagemakerruntime.Client

	pool sync.Pool
}

var _ Invoker = (*SDK)(nil)

func optional(s string) *string {
	if s == "" {
		return nil
	}
	return aws.String(s)
}

// Invoke sends one call and reads its whole answer.
func (s *SDK) Invoke(ctx context.Context, c Call) Outcome {
	q := s.Request
	if q.Stream {
		return s.stream(ctx, c)
	}
	out, err := s.Client.InvokeEndpoint(ctx, &sagemakerruntime.InvokeEndpointInput{
		EndpointName: aws.String(s.Endpoint), Body: c.Body, TargetModel: optional(c.Model),
		ContentType: optional(q.ContentType), Accept: optional(q.Accept), CustomAttributes: optional(q.CustomAttributes),
		TargetContainerHostname: optional(q.TargetContainer), TargetVariant: optional(q.TargetVariant),
		InferenceComponentName: optional(q.InferenceComponent),
	})
	o := outcome(ctx, err)
	if err == nil {
		o.Variant = aws.ToString(out.InvokedProductionVariant)
	}
	return o
}

func outcome(ctx context.Context, err error) Outcome {
	if err == nil {
		return Outcome{}
	}
	return Outcome{Code: ErrorCode(ctx, err), Message: err.Error()}
}

func (s *SDK) streamClient() *sagemakerruntime.Client {
	if s.NewClient == nil {
		return s.Client
	}
	if c, ok := s.pool.Get().(*sagemakerruntime.Client); ok {
		return c
	}
	return s.NewClient()
}

func (s *SDK) stream(ctx context.Context, c Call) Outcome {
	q := s.Request
	cli := s.streamClient()
	if s.NewClient != nil {
		defer s.pool.Put(cli) // after the stream is read and closed
	}
	start := time.Now()
	out, err := cli.InvokeEndpointWithResponseStream(ctx, &sagemakerruntime.InvokeEndpointWithResponseStreamInput{
		EndpointName: aws.String(s.Endpoint), Body: c.Body,
		ContentType: optional(q.ContentType), Accept: optional(q.Accept), CustomAttributes: optional(q.CustomAttributes),
		TargetContainerHostname: optional(q.TargetContainer), TargetVariant: optional(q.TargetVariant),
		InferenceComponentName: optional(q.InferenceComponent),
	})
	if err != nil {
		return outcome(ctx, err)
	}
	es := out.GetStream()
	defer es.Close()
	o := Outcome{Variant: aws.ToString(out.InvokedProductionVariant)}
	for ev := range es.Events() {
		if p, ok := ev.(*types.ResponseStreamMemberPayloadPart); ok && o.TTFB == 0 && len(p.Value.Bytes) > 0 {
			o.TTFB = max(time.Since(start), time.Microsecond)
		}
	}
	if err := es.Err(); err != nil {
		o.Code, o.Message, o.Variant = ErrorCode(ctx, err), err.Error(), ""
	}
	return o
}

// ErrorCode classifies an SDK error: "" for none; the SageMaker error code
// of a typed error (ModelError with the container's status, e.g.
// "ModelError:500"; ModelStreamError with its code); Timeout when ctx
// expired; ConnectionError when the endpoint could not be reached or the
// connection broke; ClientError for anything else.
func ErrorCode(ctx context.Context, err error) string {
	if err == nil {
		return ""
	}
	var me *types.ModelError
	if errors.As(err, &me) {
		if me.OriginalStatusCode != nil {
			return fmt.Sprintf("ModelError:%d", *me.OriginalStatusCode)
		}
		return "ModelError"
	}
	var se *types.ModelStreamError
	if errors.As(err, &se) {
		return "ModelStreamError:" + aws.ToString(se.ErrorCode_)
	}
	if errors.Is(err, context.DeadlineExceeded) || ctx.Err() == context.DeadlineExceeded {
		return "Timeout"
	}
	var ae smithy.APIError
	if errors.As(err, &ae) {
		return ae.ErrorCode()
	}
	var ne net.Error
	var oe *net.OpError
	if errors.As(err, &oe) || errors.As(err, &ne) {
		return "ConnectionError"
	}
	return "ClientError"
}
