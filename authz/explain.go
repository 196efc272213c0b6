package authz

import (
	"context"
	"fmt"
	"io"
	"strings"

	"github.com/open-policy-agent/opa/v1/rego"
)

// Explanation is a decision with the evaluation of every IAM statement
// attached to the principal, for people (mce policy eval).
type Explanation struct {
	Decision   Decision
	Message    string // DeniedMessage, when denied
	Statements []StatementResult
}

// StatementResult is how one statement evaluated.
type StatementResult struct {
	ID         string
	Effect     string
	Line       string // FILE:LINE of the statement
	Action     bool   // Action matched (or NotAction did not)
	Resource   bool   // Resource matched (or NotResource did not)
	Conditions []ConditionResult
	Applies    bool // all of the above: the statement's Effect applies
}

// ConditionResult is how one condition evaluated.
type ConditionResult struct {
	Operator string
	Key      string
	Values   []string
	Request  string // the request's value; "" with Present false when absent
	// RequestValues are the values of a multi-valued key (aws:TagKeys);
	// Present is false when there are none.
	RequestValues []string `json:",omitempty"`
	Present       bool
	Result        bool
}

// Explain evaluates in like Authorize (without logging) and reports, for
// each IAM statement of the principal, which parts matched. It is slower
// than Authorize; do not use it on the request path.
func (a *Authorizer) Explain(ctx context.Context, in Input) (Explanation, error) {
	st := a.st.Load()
	var ex Explanation
	if !st.enabled {
		ex.Decision = Decision{Allowed: true, By: "authz-disabled"}
		return ex, nil
	}
	d, _, err := a.decide(ctx, st, in)
	if err != nil {
		return ex, err
	}
	ex.Decision, ex.Message = d, d.DeniedMessage(in)

	q, err := st.explainQuery(ctx)
	if err != nil {
		return ex, errorf("preparing the explanation: %v", err)
	}
	req, err := a.request(st, in)
	if err != nil {
		return ex, err
	}
	rs, err := q.Eval(ctx, rego.EvalParsedInput(req.ast()))
	if err != nil {
		return ex, errorf("%v", err)
	}
	if len(rs) != 1 || len(rs[0].Expressions) != 1 {
		return ex, nil
	}
	items, _ := rs[0].Expressions[0].Value.([]any)
	stmts := st.setStmts[st.setFor(in.Principal)]
	lc := map[string]string{}
	for k, v := range in.Context {
		lc[strings.ToLower(k)] = v
	}
	for i, it := range items {
		m, _ := it.(map[string]any)
		if m == nil || i >= len(stmts) {
			break
		}
		s := stmts[i]
		r := StatementResult{ID: s.id, Effect: "Allow", Line: fmt.Sprintf("%s:%d", s.file, s.line)}
		if s.deny {
			r.Effect = "Deny"
		}
		r.Action, _ = m["action"].(bool)
		r.Resource, _ = m["resource"].(bool)
		r.Applies, _ = m["applies"].(bool)
		conds, _ := m["conditions"].([]any)
		for j, c := range s.conds {
			cr := ConditionResult{Operator: c.op, Key: c.key, Values: c.values}
			cr.Request, cr.Present = requestValue(in, c.lkey, lc)
			for k, vs := range in.MultiContext {
				if strings.EqualFold(k, c.key) && len(vs) > 0 {
					cr.RequestValues, cr.Present = append(cr.RequestValues, vs...), true
				}
			}
			if j < len(conds) {
				cr.Result, _ = conds[j].(bool)
			}
			r.Conditions = append(r.Conditions, cr)
		}
		ex.Statements = append(ex.Statements, r)
	}
	return ex, nil
}

// requestValue is the value a condition key had in the request, including
// the keys mce derives.
func requestValue(in Input, lkey string, lc map[string]string) (string, bool) {
	switch lkey {
	case "aws:principalarn":
		if !in.Principal.Anonymous && in.Principal.ARN != "" {
			return in.Principal.ARN, true
		}
		return "", false
	case "aws:username":
		if !in.Principal.Anonymous && in.Principal.Username != "" {
			return in.Principal.Username, true
		}
		return "", false
	case "aws:sourceip":
		if in.SourceIP != "" {
			return in.SourceIP, true
		}
	}
	v, ok := lc[lkey]
	return v, ok
}

// WriteText prints the explanation for a terminal.
func (ex Explanation) WriteText(w io.Writer) error {
	d := ex.Decision
	verdict := "ALLOW"
	switch {
	case !d.Allowed && d.ExplicitDeny:
		verdict = "DENY (explicit deny)"
	case !d.Allowed:
		verdict = "DENY (implicit deny: nothing allows it)"
	}
	var b strings.Builder
	fmt.Fprintf(&b, "decision: %s\nby:       %s\n", verdict, d.By)
	if ex.Message != "" {
		fmt.Fprintf(&b, "message:  %s\n", ex.Message)
	}
	for _, r := range d.Reasons {
		fmt.Fprintf(&b, "custom deny: %s\n", r)
	}
	if len(ex.Statements) == 0 {
		b.WriteString("statements: none attached to this principal\n")
	} else {
		b.WriteString("statements:\n")
	}
	for _, s := range ex.Statements {
		mark := "  "
		if s.Applies {
			mark = "=>"
		}
		fmt.Fprintf(&b, "%s %-5s %s (%s): action %s, resource %s",
			mark, s.Effect, s.ID, s.Line, yesNo(s.Action), yesNo(s.Resource))
		if len(s.Conditions) == 0 {
			b.WriteString(", no conditions\n")
			continue
		}
		b.WriteString("\n")
		for _, c := range s.Conditions {
			req := "absent"
			switch {
			case len(c.RequestValues) > 0:
				req = fmt.Sprintf("%q", c.RequestValues)
			case c.Present:
				req = fmt.Sprintf("%q", c.Request)
			}
			fmt.Fprintf(&b, "        %s %s %q: request %s -> %t\n", c.Operator, c.Key, c.Values, req, c.Result)
		}
	}
	_, err := io.WriteString(w, b.String())
	return err
}

func yesNo(b bool) string {
	if b {
		return "matches"
	}
	return "does not match"
}
