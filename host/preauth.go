package host

import (
	"context"
	"net/http"

	"github.com/mce-run/mce/host/apierr"
)

// preAuthorize refuses, before its body is read, a request that cannot be
// authorized: one whose headers fail authentication (no such key, a stale
// date, a malformed signature) and, where the body plays no part in either
// decision (an unsigned request, or no credentials file, for an operation
// whose resource the path names), one the policies deny. done reports that
// authorization is complete: the request may go ahead without authorize.
// An empty resource means the body names it: only authentication is checked.
func (g *gate) preAuthorize(ctx context.Context, r *http.Request, action, resource string, keys map[string]string) (done bool, api *apierr.Error) {
	if !g.enabled() {
		return true, nil
	}
	p, complete, err := g.az.AuthenticateHeaders(r)
	if err != nil {
		return false, authError(err)
	}
	if !complete || resource == "" {
		return false, nil
	}
	if api := g.decide(ctx, r, p, action, resource, keys); api != nil {
		return false, api
	}
	return true, nil
}
