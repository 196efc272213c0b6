package host

import (
	"context"

	"github.com/labstack/echo/v4"

	"github.com/mce-run/mce/host/apierr"
	"github.com/mce-run/mce/host/cloudwatchlogs"
)

// The logs API's front: the routes (GET /mce/endpoints/{name}/logs, and
// the Logs_20140328 targets controlPlane passes on) let a call in — the
// request ID, the access log, authentication, the body within its limits —
// and the logs Service answers it.

// newLogService makes the server's logs API; it sees the server's
// endpoints only through logGroups.
func newLogService(s *Server) *cloudwatchlogs.Service {
	return cloudwatchlogs.NewService(cloudwatchlogs.Options{Groups: logGroups{s}, Region: s.cfg.Region, Account: s.cfg.Account,
		Streams: s.streams, Logger: s.cfg.Logger})
}

// containerLogs serves GET /mce/endpoints/{name}/logs (mce logs).
func (s *Server) containerLogs(c echo.Context) error {
	r, w := c.Request(), c.Response()
	w.Header().Set(hdrRequestID, s.ids.next())
	access := accessOf(c)
	if access != nil {
		access.Operation = cloudwatchlogs.ActionLogs
	}
	endpoint := s.logs.Tail(w, r, c.Param("name"), func(ctx context.Context, action, resource string) *apierr.Error {
		return s.gate.authorize(ctx, r, nil, action, resource, nil)
	})
	if access != nil && endpoint != "" {
		access.Endpoint = endpoint
	}
	return nil
}

// cloudWatchLogs lets one CloudWatch Logs call in (controlPlane routes the
// Logs_20140328 targets here; the request ID is set) and has the logs
// Service answer it.
func (s *Server) cloudWatchLogs(c echo.Context, op string) error {
	r, w := c.Request(), c.Response()
	action, api := cloudwatchlogs.Action(op)
	if api != nil {
		apierr.Write(w, api)
		return nil
	}
	if _, api := s.gate.preAuthorize(r.Context(), r, action, "", nil); api != nil {
		apierr.Write(w, api)
		return nil
	}
	rb, api := s.readBody(w, r, maxControlBody, func(int64) *apierr.Error { return cloudwatchlogs.BodyTooLarge(maxControlBody) })
	if api != nil {
		apierr.Write(w, api)
		return nil
	}
	defer rb.release()
	body := rb.bytes()
	p, api := s.gate.authenticate(r, body)
	if api != nil {
		apierr.Write(w, api)
		return nil
	}
	endpoint, err := s.logs.Call(w, r, op, body, func(ctx context.Context, action, resource string) *apierr.Error {
		return s.gate.decide(ctx, r, p, action, resource, nil)
	})
	if e := accessOf(c); e != nil && endpoint != "" {
		e.Endpoint = endpoint
	}
	if err != nil {
		apierr.Write(w, s.internalError(w.Header().Get(hdrRequestID), err))
	}
	return nil
}

// logGroups is what the logs API sees of the server's endpoints.
type logGroups struct{ s *Server }

var _ cloudwatchlogs.Groups = logGroups{}

func (g logGroups) Group(name string) cloudwatchlogs.Group {
	e := g.s.reg.get(name)
	if e == nil {
		return nil
	}
	return logGroup{e}
}

// logGroup is one endpoint as the logs API sees it.
type logGroup struct{ e *Endpoint }

func (g logGroup) Name() string { return g.e.name }

// Containers lists the containers of the endpoint's serving generation, in
// the plan's variant order, by copy, in chain order.
func (g logGroup) Containers() cloudwatchlogs.Containers {
	e := g.e
	e.mu.Lock()
	rec, launched := e.rec, e.launched
	e.mu.Unlock()
	out := cloudwatchlogs.Containers{Running: launched != nil, Created: rec.Created}
	if launched == nil {
		status, _ := e.shown(rec)
		out.Status = string(status)
		return out
	}
	for _, v := range rec.Plan.Variants {
		out.Variants = append(out.Variants, v.Name)
		for i, cp := range launched.Copies(v.Name) {
			for _, c := range cp {
				src, _ := c.(cloudwatchlogs.Source)
				out.List = append(out.List, cloudwatchlogs.Container{Variant: v.Name, Copy: i, Host: c.Hostname(), Source: src})
			}
		}
	}
	return out
}
