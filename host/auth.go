package host

import (
	"context"
	"net"
	"net/http"
	"time"

	"github.com/mce-run/mce/authz"
)

// authorize authenticates the request (SigV4, or anonymous when unsigned)
// and asks the policies whether it may perform action on resource with the
// given condition keys. A nil result means go ahead; otherwise the error to
// write. With no authorizer, or one without policies, everything is allowed
// (mce serve refuses that off loopback unless --insecure).
func (s *Server) authorize(ctx context.Context, r *http.Request, body []byte, action, resource string, keys map[string]string) *APIError {
	p, api := s.authenticate(r, body)
	if api != nil {
		return api
	}
	return s.decide(ctx, r, p, action, resource, keys)
}

// authenticate verifies the request's signature over body and returns its
// principal (anonymous when unsigned, or when no policies are in force).
func (s *Server) authenticate(r *http.Request, body []byte) (authz.Principal, *APIError) {
	a := s.cfg.Authz
	if a == nil || !a.Enabled() {
		return authz.Principal{Anonymous: true}, nil
	}
	p, err := a.Authenticate(r, body)
	if err != nil {
		return p, authError(err)
	}
	return p, nil
}

// authError is the answer to a request whose authentication failed.
func authError(err error) *APIError {
	if ae, ok := authz.IsAuthError(err); ok {
		return &APIError{Status: ae.Status, Code: ae.Code, Message: ae.Message, err: err}
	}
	return &APIError{Status: http.StatusForbidden, Code: CodeAccessDenied, Message: "The request could not be authenticated.", err: err}
}

// decide asks the policies whether principal p may perform action on
// resource; nil means go ahead.
func (s *Server) decide(ctx context.Context, r *http.Request, p authz.Principal, action, resource string, keys map[string]string) *APIError {
	a := s.cfg.Authz
	if a == nil || !a.Enabled() {
		return nil
	}
	in := authz.Input{Principal: p, Action: action, Resource: resource, Context: keys, SourceIP: sourceIP(r), Time: time.Now()}
	d, err := a.Authorize(ctx, in)
	if err != nil || !d.Allowed {
		return &APIError{Status: http.StatusForbidden, Code: CodeAccessDenied, Message: d.DeniedMessage(in), err: err}
	}
	return nil
}

func sourceIP(r *http.Request) string {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		return r.RemoteAddr
	}
	return host
}
