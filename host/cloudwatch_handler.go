package host

import (
	"context"
	"errors"
	"net/http"

	"github.com/labstack/echo/v4"

	"github.com/mce-run/mce/authz"
	"github.com/mce-run/mce/containers"
	"github.com/mce-run/mce/host/apierr"
	"github.com/mce-run/mce/host/cloudwatch"
	"github.com/mce-run/mce/host/sagemakermetrics"
	"github.com/mce-run/mce/internal/awsquery"
)

// CloudWatch's front: the metrics API's calls (an X-Amz-Target of
// GraniteServiceVersion20100801 or a query-protocol form on POST /, which
// controlPlane passes on, and the RPC v2 CBOR path) are let in here — the
// request ID, authentication of the caller (signed for "monitoring"), the
// body within its limit — and the cloudwatch Service answers them with the
// decision taken for that caller. What fills the store is
// host/sagemakermetrics, fed by host/metrics' sink.

// maxCloudWatchBody bounds a CloudWatch request: far above the largest
// valid one (500 GetMetricData queries of 30 dimensions each).
const maxCloudWatchBody = 1 << 20

// serveCloudWatch lets one CloudWatch metrics call in and has the Service
// answer it. Every refusal is written in the call's own protocol.
func serveCloudWatch(s *Server, c echo.Context) error {
	r, w := c.Request(), c.Response()
	if w.Header().Get(hdrRequestID) == "" {
		w.Header().Set(hdrRequestID, s.ids.next())
	}
	if e := accessOf(c); e != nil {
		e.Operation = "cloudwatch:" + cloudwatch.OperationOf(r)
	}
	refuse := func(api *apierr.Error) error {
		cloudwatch.WriteError(w, r, api.Status, cloudwatch.QueryCode(api.Code), api.Message)
		return nil
	}
	body, p, release, api := letIn(s, w, r, maxCloudWatchBody, &apierr.Error{Status: http.StatusRequestEntityTooLarge,
		Code: "RequestEntityTooLarge", Message: "The request body is larger than mce accepts for CloudWatch."})
	if api != nil {
		return refuse(api)
	}
	defer release()
	// A form is read once: STS's and IAM's go to their services
	// (identity_handler.go); a form of another Version is refused by
	// CloudWatch's Service.
	var form *awsquery.Form
	if cloudwatch.IsForm(r) {
		if form, _ = awsquery.Parse(body, awsquery.Limits{}); form != nil && serveIdentity(s, c, form, p) {
			return nil
		}
	}
	svc := s.cfg.CloudWatch
	if svc == nil {
		return refuse(&apierr.Error{Status: http.StatusBadRequest, Code: apierr.CodeUnknownOperation,
			Message: "This mce serves no CloudWatch metrics: it runs without a state folder for them."})
	}
	svc.ServeForm(w, r, body, form, func(ctx context.Context, r *http.Request, action string) error {
		if api := s.gate.decide(ctx, r, p, action, "*", nil); api != nil {
			return errors.New(api.Message) // answered as AccessDenied (403) with this message
		}
		return nil
	})
	return nil
}

// letIn lets in a call of an AWS service host serves beside SageMaker
// (CloudWatch, Application Auto Scaling): pre-authorization, the body
// within limit (tooLarge past it), the caller authenticated. The body is
// valid until release.
func letIn(s *Server, w http.ResponseWriter, r *http.Request, limit int, tooLarge *apierr.Error) (body []byte, p authz.Principal, release func(), api *apierr.Error) {
	if _, api := s.gate.preAuthorize(r.Context(), r, "", "", nil); api != nil {
		return nil, p, nil, api
	}
	rb, api := s.readBody(w, r, limit, func(int64) *apierr.Error { return tooLarge })
	if api != nil {
		return nil, p, nil, api
	}
	if p, api = s.gate.authenticate(r, rb.bytes()); api != nil {
		rb.release()
		return nil, p, nil, api
	}
	return rb.bytes(), p, rb.release, nil
}

// newPublisher makes the publisher of SageMaker's CloudWatch metrics and
// makes it host/metrics' sink, when the server has a CloudWatch store. It
// reads the server's endpoints, components and queues through Sources.
func newPublisher(s *Server) *sagemakermetrics.Publisher {
	if s.cfg.CloudWatch == nil {
		return nil
	}
	src := sagemakermetrics.Sources{
		Variants: func() (out []sagemakermetrics.VariantLoad) {
			for _, e := range s.reg.all() {
				out = append(out, sagemakermetrics.VariantLoadsOf(e.name, e.route.Load())...)
			}
			return out
		},
		Components: func() (out []sagemakermetrics.ComponentLoad) {
			for _, c := range s.ics.All() {
				out = append(out, sagemakermetrics.ComponentLoadOf(c))
			}
			return out
		},
		Backlogs: func() []sagemakermetrics.Backlog {
			bs := s.async.Backlogs()
			out := make([]sagemakermetrics.Backlog, len(bs))
			for i, b := range bs {
				out[i] = sagemakermetrics.Backlog(b)
			}
			return out
		},
	}
	if u, ok := s.cfg.Backend.(containers.UsageSource); ok {
		src.Usage = u
	}
	p, err := sagemakermetrics.New(sagemakermetrics.Options{Service: s.cfg.CloudWatch, Sources: src, Logger: s.cfg.Logger})
	if err != nil {
		s.log.Error().Err(err).Msg("SageMaker's CloudWatch metrics are not published")
		return nil
	}
	s.metrics.SetSink(p)
	return p
}
