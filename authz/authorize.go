package authz

import (
	"context"
	"sort"
	"time"

	"github.com/open-policy-agent/opa/v1/rego"
	"github.com/rs/zerolog"
)

// Limits on a request's authorization input.
const (
	maxActionLen    = 256
	maxResourceLen  = 2048
	maxContextKeys  = 256 // a resource's 50 tags twice (aws: and sagemaker:) and a request's 50
	maxContextValue = 2048
	maxMultiValues  = 256 // values of all multi-valued keys together
)

// Input is one question: may Principal perform Action on Resource?
type Input struct {
	Principal Principal
	Action    string // e.g. "sagemaker:InvokeEndpoint"
	Resource  string // e.g. "arn:aws:sagemaker:us-east-1:123456789012:endpoint/my-endpoint"
	// Context holds condition keys and their values, e.g.
	// "sagemaker:TargetModel". Key names are case-insensitive. mce adds
	// aws:username, aws:PrincipalArn, aws:PrincipalAccount (from Principal;
	// these cannot be overridden), aws:SourceIp (SourceIP), aws:CurrentTime
	// and aws:EpochTime (Time).
	Context map[string]string
	// MultiContext holds multi-valued condition keys (aws:TagKeys) and
	// their values; policies test them with ForAnyValue: and
	// ForAllValues:. A key with no values counts as absent.
	MultiContext map[string][]string
	SourceIP     string    // client address, without port
	Time         time.Time // request time; zero means now
}

// Decision is the answer.
type Decision struct {
	Allowed bool
	// ExplicitDeny is set when a Deny statement or a custom deny rule
	// matched (rather than nothing allowing).
	ExplicitDeny bool
	// By names what decided: "<policy>:<Sid>" or "<policy>:statement[N]" of
	// an IAM statement, "rego:mce.custom.deny: <message>",
	// "rego:mce.custom.allow", "implicit-deny", "authz-disabled" or "error".
	By string
	// Statements are every IAM statement that matched, denies first.
	Statements []string
	// Reasons are the messages of custom deny rules.
	Reasons []string
}

// DeniedMessage is SageMaker's AccessDeniedException message for a denied
// decision (empty when allowed), e.g. "User: arn:aws:iam::123456789012:user/bob
// is not authorized to perform: sagemaker:InvokeEndpoint on resource:
// arn:aws:sagemaker:us-east-1:123456789012:endpoint/ep because no
// identity-based policy allows the sagemaker:InvokeEndpoint action".
func (d Decision) DeniedMessage(in Input) string {
	if d.Allowed {
		return ""
	}
	user := in.Principal.ARN
	if in.Principal.Anonymous || user == "" {
		user = "anonymous"
	}
	msg := "User: " + user + " is not authorized to perform: " + in.Action + " on resource: " + in.Resource
	if d.ExplicitDeny {
		return msg + " with an explicit deny in an identity-based policy"
	}
	return msg + " because no identity-based policy allows the " + in.Action + " action"
}

// Authorize evaluates the IAM policies of in.Principal and the custom Rego
// for in. When no policies are configured (Enabled false) everything is
// allowed. An input over the limits or an evaluation error is a deny
// together with an error wrapping ErrEvaluation (fail closed). Every
// decision is logged at info.
func (a *Authorizer) Authorize(ctx context.Context, in Input) (Decision, error) {
	st := a.st.Load()
	if !st.enabled {
		d := Decision{Allowed: true, By: "authz-disabled"}
		a.logDecision(zerolog.DebugLevel, in, d, false, nil)
		return d, nil
	}
	d, cached, err := a.decide(ctx, st, in)
	if err != nil {
		d = Decision{By: "error"}
		a.logDecision(zerolog.ErrorLevel, in, d, false, err)
		return d, err
	}
	a.logDecision(zerolog.InfoLevel, in, d, cached, nil)
	return d, nil
}

// decide answers in from the cache or by evaluating the policies. cached
// reports which.
func (a *Authorizer) decide(ctx context.Context, st *state, in Input) (d Decision, cached bool, err error) {
	req, err := a.request(st, in)
	if err != nil {
		return Decision{}, false, err
	}
	var key string
	if st.cache != nil {
		key = st.cacheKey(req)
		if d, ok := st.cache.get(key); ok {
			return d, true, nil
		}
	}
	d, err = a.evaluate(ctx, st, req)
	if err == nil && st.cache != nil {
		st.cache.put(key, d)
	}
	return d, false, err
}

// evaluate runs the prepared query on req.
func (a *Authorizer) evaluate(ctx context.Context, st *state, req *request) (Decision, error) {
	rs, err := st.decision.Eval(ctx, rego.EvalParsedInput(req.ast()))
	if err != nil {
		return Decision{}, errorf("%v", err)
	}
	if len(rs) != 1 || len(rs[0].Expressions) != 1 {
		return Decision{}, errorf("the decision is undefined")
	}
	var d Decision
	var denyBy, allowBy []string
	customAllow := false
	if st.custom == 0 {
		// IAM alone: the set of [deny, id] of the statements that apply;
		// explicit deny beats allow, as data.mce.iam.allowed says.
		matched, ok := rs[0].Expressions[0].Value.([]any)
		if !ok {
			return Decision{}, errorf("the IAM result is not a set")
		}
		for _, m := range matched {
			pair, _ := m.([]any)
			if len(pair) != 2 {
				return Decision{}, errorf("the IAM result has the wrong shape")
			}
			deny, ok1 := pair[0].(bool)
			id, ok2 := pair[1].(string)
			if !ok1 || !ok2 {
				return Decision{}, errorf("the IAM result has the wrong shape")
			}
			if deny {
				denyBy = append(denyBy, id)
			} else {
				allowBy = append(allowBy, id)
			}
		}
		d.ExplicitDeny = len(denyBy) > 0
		d.Allowed = !d.ExplicitDeny && len(allowBy) > 0
	} else {
		m, ok := rs[0].Expressions[0].Value.(map[string]any)
		if !ok {
			return Decision{}, errorf("the decision is not an object")
		}
		var ok1, ok2, ok3, ok4, ok5, ok6 bool
		d.Allowed, ok1 = m["allowed"].(bool)
		d.ExplicitDeny, ok2 = m["explicit_deny"].(bool)
		customAllow, ok3 = m["custom_allow"].(bool)
		denyBy, ok4 = stringsOf(m["deny_by"])
		allowBy, ok5 = stringsOf(m["allow_by"])
		d.Reasons, ok6 = stringsOf(m["custom_deny"])
		if !(ok1 && ok2 && ok3 && ok4 && ok5 && ok6) {
			return Decision{}, errorf("the decision has the wrong shape (mce.custom.deny must be a set of strings, mce.custom.allow a boolean)")
		}
		explicit := len(denyBy) > 0 || len(d.Reasons) > 0
		if d.ExplicitDeny != explicit || d.Allowed != (!explicit && (len(allowBy) > 0 || customAllow)) {
			return Decision{}, errorf("inconsistent decision")
		}
	}
	sort.Strings(denyBy)
	sort.Strings(allowBy)
	d.Statements = append(denyBy, allowBy...)
	switch {
	case len(denyBy) > 0:
		d.By = denyBy[0]
	case len(d.Reasons) > 0:
		d.By = "rego:mce.custom.deny: " + d.Reasons[0]
	case d.Allowed && len(allowBy) > 0:
		d.By = allowBy[0]
	case d.Allowed && customAllow:
		d.By = "rego:mce.custom.allow"
	default:
		d.By = "implicit-deny"
	}
	return d, nil
}

// stringsOf reads a Rego set/array of strings (sorted by OPA for sets).
func stringsOf(v any) ([]string, bool) {
	arr, ok := v.([]any)
	if !ok {
		return nil, false
	}
	out := make([]string, 0, len(arr))
	for _, x := range arr {
		s, ok := x.(string)
		if !ok {
			return nil, false
		}
		out = append(out, s)
	}
	return out, true
}
