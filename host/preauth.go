package host

import (
	"context"
	"net/http"
	"time"

	"github.com/mce-run/mce/authz"
)

// preAuthorize refuses, before its body is read, a request that cannot be
// authorized: one whose headers fail authentication (no such key, a stale
// date, a malformed signature) and, where the body plays no part in either
// decision (an unsigned request, or no credentials file, for an operation
// whose resource the path names), one the policies deny. done reports that
// authorization is complete: the request may go ahead without authorize.
// An empty resource means the body names it: only authentication is checked.
func (s *Server) preAuthorize(ctx context.Context, r *http.Request, action, resource string, keys map[string]string) (done bool, api *APIError) {
	a := s.cfg.Authz
	if a == nil || !a.Enabled() {
		return true, nil
	}
	p, complete, err := a.AuthenticateHeaders(r)
	if err != nil {
		if ae, ok := authz.IsAuthError(err); ok {
			return false, &APIError{Status: ae.Status, Code: ae.Code, Message: ae.Message, err: err}
		}
		return false, &APIError{Status: http.StatusForbidden, Code: CodeAccessDenied, Message: "The request could not be authenticated.", err: err}
	}
	if !complete || resource == "" {
		return false, nil
	}
	in := authz.Input{Principal: p, Action: action, Resource: resource, Context: keys, SourceIP: sourceIP(r), Time: time.Now()}
	d, err := a.Authorize(ctx, in)
	if err != nil || !d.Allowed {
		return false, &APIError{Status: http.StatusForbidden, Code: CodeAccessDenied, Message: d.DeniedMessage(in), err: err}
	}
	return true, nil
}
