package authz

import (
	"net/netip"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/open-policy-agent/opa/v1/ast"
)

// request is an Input validated and normalized for evaluation.
type request struct {
	in       Input
	set      string              // data.mce.sets key of the principal
	action   string              // lower-cased
	lc       map[string]string   // condition keys, lower-cased, with mce's aws:* keys
	lm       map[string][]string // multi-valued condition keys, lower-cased; none empty
	t        time.Time
	num      [][2]*ast.Term
	date     [][2]*ast.Term
	sourceIP string
}

// request checks in against the limits and derives the condition keys.
func (a *Authorizer) request(st *state, in Input) (*request, error) {
	switch {
	case in.Action == "" || len(in.Action) > maxActionLen:
		return nil, errorf("action must be 1 to %d bytes", maxActionLen)
	case in.Resource == "" || len(in.Resource) > maxResourceLen:
		return nil, errorf("resource must be 1 to %d bytes", maxResourceLen)
	case len(in.Context)+len(in.MultiContext) > maxContextKeys:
		return nil, errorf("more than %d context keys", maxContextKeys)
	}
	r := &request{in: in, set: st.setFor(in.Principal), action: strings.ToLower(in.Action), t: in.Time}
	if r.t.IsZero() {
		r.t = a.now()
	}
	r.t = r.t.UTC()

	lc := make(map[string]string, len(in.Context)+6)
	for k, v := range in.Context {
		if len(k) > maxConditionKeyLen || len(v) > maxContextValue {
			return nil, errorf("context key %.64q: key or value too long", k)
		}
		lk := strings.ToLower(k)
		switch lk {
		case "aws:username", "aws:principalarn", "aws:principalaccount":
			continue // identity comes from the principal only
		}
		lc[lk] = v
	}
	p := in.Principal
	if !p.Anonymous {
		if p.ARN != "" {
			lc["aws:principalarn"] = p.ARN
			if role, ok := st.roleOf[p.ARN]; ok {
				lc["aws:principalarn"] = role // a session's is its role's, as IAM sets it
			}
			if acct := accountFromARN(p.ARN); acct != "" {
				lc["aws:principalaccount"] = acct
			}
		}
		if p.Username != "" {
			lc["aws:username"] = p.Username
		}
	}
	if in.SourceIP != "" {
		if ip, err := netip.ParseAddr(in.SourceIP); err == nil {
			lc["aws:sourceip"] = ip.Unmap().String()
		}
	} else if v, ok := lc["aws:sourceip"]; ok {
		if _, err := netip.ParseAddr(v); err != nil {
			delete(lc, "aws:sourceip")
		}
	}
	if _, ok := lc["aws:currenttime"]; !ok {
		lc["aws:currenttime"] = r.t.Format(time.RFC3339)
	}
	if _, ok := lc["aws:epochtime"]; !ok {
		lc["aws:epochtime"] = strconv.FormatInt(r.t.Unix(), 10)
	}
	r.lc = lc
	r.sourceIP = lc["aws:sourceip"]
	n := 0
	for k, vs := range in.MultiContext {
		if len(k) > maxConditionKeyLen {
			return nil, errorf("context key %.64q: key too long", k)
		}
		if n += len(vs); n > maxMultiValues {
			return nil, errorf("more than %d values of multi-valued context keys", maxMultiValues)
		}
		for _, v := range vs {
			if len(v) > maxContextValue {
				return nil, errorf("context key %.64q: value too long", k)
			}
		}
		if len(vs) == 0 {
			continue
		}
		lk := strings.ToLower(k)
		if _, ok := lc[lk]; ok {
			return nil, errorf("context key %.64q given both single- and multi-valued", k)
		}
		if r.lm == nil {
			r.lm = make(map[string][]string, len(in.MultiContext))
		}
		r.lm[lk] = append(r.lm[lk], vs...)
	}

	for _, k := range st.numKeys {
		if v, ok := lc[k]; ok {
			if f, err := strconv.ParseFloat(v, 64); err == nil {
				r.num = append(r.num, [2]*ast.Term{ast.StringTerm(k), ast.FloatNumberTerm(f)})
			}
		}
	}
	for _, k := range st.dateKeys {
		if v, ok := lc[k]; ok {
			if s, err := parseDate(v); err == nil {
				r.date = append(r.date, [2]*ast.Term{ast.StringTerm(k), ast.IntNumberTerm(int(s))})
			}
		}
	}
	return r, nil
}

// ast is the typed Rego input (its public fields are documented in doc.go).
func (r *request) ast() ast.Value {
	ctxKV := make([][2]*ast.Term, 0, len(r.lc)+len(r.lm))
	for k, v := range r.lc {
		ctxKV = append(ctxKV, [2]*ast.Term{ast.StringTerm(k), ast.StringTerm(v)})
	}
	multiKV := make([][2]*ast.Term, 0, len(r.lm))
	for k, vs := range r.lm {
		terms := make([]*ast.Term, len(vs))
		for i, v := range vs {
			terms[i] = ast.StringTerm(v)
		}
		arr := ast.NewTerm(ast.NewArray(terms...))
		ctxKV = append(ctxKV, [2]*ast.Term{ast.StringTerm(k), arr})
		multiKV = append(multiKV, [2]*ast.Term{ast.StringTerm(k), arr})
	}
	p := r.in.Principal
	principal := ast.NewObject(
		[2]*ast.Term{ast.StringTerm("arn"), ast.StringTerm(p.ARN)},
		[2]*ast.Term{ast.StringTerm("access_key_id"), ast.StringTerm(p.AccessKeyID)},
		[2]*ast.Term{ast.StringTerm("username"), ast.StringTerm(p.Username)},
		[2]*ast.Term{ast.StringTerm("anonymous"), ast.BooleanTerm(p.Anonymous)},
	)
	context := ast.NewTerm(ast.NewObject(ctxKV...))
	internal := ast.NewObject(
		[2]*ast.Term{ast.StringTerm("set"), ast.StringTerm(r.set)},
		[2]*ast.Term{ast.StringTerm("action"), ast.StringTerm(r.action)},
		[2]*ast.Term{ast.StringTerm("v"), ast.NewTerm(ast.NewObject(
			[2]*ast.Term{ast.StringTerm("s"), context},
			[2]*ast.Term{ast.StringTerm("n"), ast.NewTerm(ast.NewObject(r.num...))},
			[2]*ast.Term{ast.StringTerm("d"), ast.NewTerm(ast.NewObject(r.date...))},
			[2]*ast.Term{ast.StringTerm("m"), ast.NewTerm(ast.NewObject(multiKV...))},
		))},
	)
	return ast.NewObject(
		[2]*ast.Term{ast.StringTerm("principal"), ast.NewTerm(principal)},
		[2]*ast.Term{ast.StringTerm("action"), ast.StringTerm(r.in.Action)},
		[2]*ast.Term{ast.StringTerm("resource"), ast.StringTerm(r.in.Resource)},
		[2]*ast.Term{ast.StringTerm("context"), context},
		[2]*ast.Term{ast.StringTerm("source_ip"), ast.StringTerm(r.sourceIP)},
		[2]*ast.Term{ast.StringTerm("time"), ast.StringTerm(r.t.Format(time.RFC3339Nano))},
		[2]*ast.Term{ast.StringTerm("mce"), ast.NewTerm(internal)},
	)
}

// cacheKey is everything the IAM statements of r's policy set can read:
// the set, the action, the resource, and the value (or absence) of each
// condition key those statements name. Two requests with the same key get
// the same IAM decision.
func (c *compiled) cacheKey(r *request) string {
	var b strings.Builder
	b.Grow(len(r.set) + len(r.action) + len(r.in.Resource) + 64)
	b.WriteString(r.set)
	b.WriteByte(0)
	b.WriteString(r.action)
	b.WriteByte(0)
	b.WriteString(r.in.Resource)
	for _, k := range c.setKeys[r.set] {
		b.WriteByte(0)
		if v, ok := r.lc[k]; ok {
			b.WriteByte(1)
			b.WriteString(v)
		} else if vs, ok := r.lm[k]; ok {
			b.WriteByte(3)
			for _, v := range vs { // length-prefixed: values may hold any byte
				b.WriteString(strconv.Itoa(len(v)))
				b.WriteByte(':')
				b.WriteString(v)
			}
		} else {
			b.WriteByte(2)
		}
	}
	return b.String()
}

// decisionCache remembers the decisions of one policy generation (it dies
// with it on reload). It holds at most max entries and forgets the oldest
// first. Safe for concurrent use.
type decisionCache struct {
	mu    sync.Mutex
	max   int
	m     map[string]Decision
	order []string // ring of keys in insertion order
	next  int
}

func newDecisionCache(max int) *decisionCache {
	return &decisionCache{max: max, m: make(map[string]Decision, min(max, 1024))}
}

func (c *decisionCache) get(key string) (Decision, bool) {
	c.mu.Lock()
	d, ok := c.m[key]
	c.mu.Unlock()
	if ok { // callers may keep and change the slices
		d.Statements = append([]string(nil), d.Statements...)
		d.Reasons = append([]string(nil), d.Reasons...)
	}
	return d, ok
}

func (c *decisionCache) put(key string, d Decision) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.m[key]; ok {
		return
	}
	if len(c.order) < c.max {
		c.order = append(c.order, key)
	} else {
		delete(c.m, c.order[c.next])
		c.order[c.next] = key
		c.next = (c.next + 1) % c.max
	}
	d.Statements = append([]string(nil), d.Statements...)
	d.Reasons = append([]string(nil), d.Reasons...)
	c.m[key] = d
}

// conditionKeys lists the lower-cased condition keys of statements, sorted.
func conditionKeys(stmts []*stmt) []string {
	seen := map[string]bool{}
	for _, s := range stmts {
		for _, c := range s.conds {
			seen[c.lkey] = true
		}
	}
	out := make([]string, 0, len(seen))
	for k := range seen {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
