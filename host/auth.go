package host

import (
	"context"
	"net"
	"net/http"
	"strings"
	"time"

	"github.com/mce-run/mce/authz"
	"github.com/mce-run/mce/host/apierr"
	"github.com/mce-run/mce/host/spec"
)

// gate is the authorization of host's calls: it authenticates requests
// (SigV4) and asks the policies (authz) about the action, resource and
// condition keys each call carries, with the resource tags of what the
// call names when a policy can read them. It holds no state of its own:
// the authorizer, and how to read a named resource's tags.
type gate struct {
	az *authz.Authorizer // nil: everything is allowed
	// tagsOf reads the tags of the model, endpoint configuration, endpoint
	// or inference component an ARN names (ok false: not one of this host).
	tagsOf func(arn string) (tags []spec.Tag, ok bool, err error)
}

// enabled reports whether policies are in force.
func (g *gate) enabled() bool { return g.az != nil && g.az.Enabled() }

// authorize authenticates the request (SigV4, or anonymous when unsigned)
// and asks the policies whether it may perform action on resource with the
// given condition keys. A nil result means go ahead; otherwise the error to
// write. With no authorizer, or one without policies, everything is allowed
// (mce serve refuses that off loopback unless --insecure).
func (g *gate) authorize(ctx context.Context, r *http.Request, body []byte, action, resource string, keys map[string]string) *apierr.Error {
	p, api := g.authenticate(r, body)
	if api != nil {
		return api
	}
	return g.decide(ctx, r, p, action, resource, keys)
}

// authenticate verifies the request's signature over body and returns its
// principal (anonymous when unsigned, or when no policies are in force).
func (g *gate) authenticate(r *http.Request, body []byte) (authz.Principal, *apierr.Error) {
	if !g.enabled() {
		return authz.Principal{Anonymous: true}, nil
	}
	p, err := g.az.Authenticate(r, body)
	if err != nil {
		return p, authError(err)
	}
	return p, nil
}

// authError is the answer to a request whose authentication failed.
func authError(err error) *apierr.Error {
	if ae, ok := authz.IsAuthError(err); ok {
		return &apierr.Error{Status: ae.Status, Code: ae.Code, Message: ae.Message, Cause: err}
	}
	return &apierr.Error{Status: http.StatusForbidden, Code: apierr.CodeAccessDenied, Message: "The request could not be authenticated.", Cause: err}
}

// decide asks the policies whether principal p may perform action on
// resource; nil means go ahead.
func (g *gate) decide(ctx context.Context, r *http.Request, p authz.Principal, action, resource string, keys map[string]string) *apierr.Error {
	return g.decideWith(ctx, r, p, action, resource, requestKeys{single: keys})
}

// requestKeys are the condition keys a request carries: single-valued
// (sagemaker:TargetModel, aws:RequestTag/<key>) and multi-valued
// (aws:TagKeys).
type requestKeys struct {
	single map[string]string
	multi  map[string][]string
	// reads are the S3 locations the call makes mce read, authorized as
	// s3:GetObject after the call's own action (s3reads.go).
	reads []s3Read
}

// tagKeys are the condition keys of the tags a request carries (CreateX
// with Tags, AddTags): aws:RequestTag/<key> for each and aws:TagKeys.
func tagKeys(tags []spec.Tag) requestKeys {
	if len(tags) == 0 {
		return requestKeys{}
	}
	k := requestKeys{single: make(map[string]string, len(tags)), multi: map[string][]string{}}
	addTagKeys(k.single, authz.KeyRequestTagPrefix, tags)
	for _, t := range tags {
		k.multi[authz.KeyTagKeys] = append(k.multi[authz.KeyTagKeys], t.Key)
	}
	return k
}

// addTagKeys sets prefix+key to each tag's value. IAM compares the tag key
// of aws:ResourceTag/<key> case-insensitively; of tags whose keys differ
// only in case, the first counts.
func addTagKeys(m map[string]string, prefix string, tags []spec.Tag) {
	seen := make(map[string]bool, len(tags))
	for _, t := range tags {
		lk := strings.ToLower(t.Key)
		if seen[lk] {
			continue
		}
		seen[lk] = true
		m[prefix+t.Key] = t.Value
	}
}

// decideWith is decide with every kind of request key, on the resource an
// operation acts on: a Create call's resource does not exist yet and has
// no tags (one of that name that exists is refused by the operation).
func (g *gate) decideWith(ctx context.Context, r *http.Request, p authz.Principal, action, resource string, keys requestKeys) *apierr.Error {
	return g.decideOn(ctx, r, p, action, resource, keys, !strings.HasPrefix(action, "sagemaker:Create"))
}

// decideOn is decideWith where existing says whether resource is an
// existing one: when a policy can read them, the tags of the resource it
// names (a model, endpoint configuration, endpoint or inference component
// of this host) become aws:ResourceTag/<key> and
// sagemaker:ResourceTag/<key>. Every check of a second resource (the
// endpoint a component is placed on, an adapter's base, the configuration
// an endpoint is made from) is on an existing one, whatever the action.
func (g *gate) decideOn(ctx context.Context, r *http.Request, p authz.Principal, action, resource string, keys requestKeys, existing bool) *apierr.Error {
	if !g.enabled() {
		return nil
	}
	single := keys.single
	if existing && g.az.ReadsResourceTags() {
		if tags, ok, err := g.tagsOf(resource); ok || err != nil {
			if err != nil { // fail closed: the decision may depend on them
				return &apierr.Error{Status: http.StatusInternalServerError, Code: apierr.CodeInternalFailure,
					Message: "mce could not read the resource's tags to authorize the request.", Cause: err}
			}
			if len(tags) > 0 {
				single = make(map[string]string, len(keys.single)+2*len(tags))
				for k, v := range keys.single {
					single[k] = v
				}
				addTagKeys(single, authz.KeyResourceTagPrefix, tags)
				addTagKeys(single, authz.KeySageMakerResourceTagPrefix, tags)
			}
		}
	}
	in := authz.Input{Principal: p, Action: action, Resource: resource, Context: single, MultiContext: keys.multi, SourceIP: sourceIP(r), Time: time.Now()}
	d, err := g.az.Authorize(ctx, in)
	if err != nil || !d.Allowed {
		return &apierr.Error{Status: http.StatusForbidden, Code: apierr.CodeAccessDenied, Message: d.DeniedMessage(in), Cause: err}
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
