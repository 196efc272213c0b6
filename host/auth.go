package host

import (
	"context"
	"encoding/json"
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
	a := s.cfg.Authz
	if a == nil || !a.Enabled() {
		return nil
	}
	p, err := a.Authenticate(r, body)
	if err != nil {
		if ae, ok := authz.IsAuthError(err); ok {
			return &APIError{Status: ae.Status, Code: ae.Code, Message: ae.Message, err: err}
		}
		return &APIError{Status: http.StatusForbidden, Code: CodeAccessDenied, Message: "The request could not be authenticated.", err: err}
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

// controlResource is the ARN a control-plane operation acts on: the resource
// its body names, or "*" for List operations.
func (s *Server) controlResource(body []byte) string {
	var names struct{ EndpointName, EndpointConfigName, ModelName string }
	json.Unmarshal(body, &names) // a body that does not decode is refused later, after authorization
	switch {
	case names.EndpointName != "":
		return authz.EndpointARN(s.cfg.Region, s.cfg.Account, names.EndpointName)
	case names.EndpointConfigName != "":
		return authz.EndpointConfigARN(s.cfg.Region, s.cfg.Account, names.EndpointConfigName)
	case names.ModelName != "":
		return authz.ModelARN(s.cfg.Region, s.cfg.Account, names.ModelName)
	}
	return "*"
}
