package authz

import (
	"fmt"
	"net/netip"
	"strconv"
	"strings"
	"time"
)

// Limits on IAM policy documents. IAM's own are smaller (6,144 characters
// for a managed policy); these only keep a bad file from hurting the host.
const (
	maxPolicyBytes     = 128 << 10
	maxStatements      = 1000
	maxElementValues   = 1000
	maxValueLen        = 2048
	maxConditionKeyLen = 256 // "sagemaker:ResourceTag/" and a tag key of up to 128
)

// policyDoc is one IAM identity-based policy, validated.
type policyDoc struct {
	name  string // display name, used in statement ids
	file  string // where it was read (for errors)
	line  int
	stmts []*stmt
}

// stmt is one validated statement.
type stmt struct {
	id        string // "<policy>:<Sid>" or "<policy>:statement[N]", the Decision's By
	sid       string
	deny      bool
	notAction bool
	actions   []string
	notRes    bool
	resources []string
	conds     []*cond
	file      string
	line      int
}

// cond is one condition: operator, key and values, normalized for the Rego
// evaluator.
type cond struct {
	op       string // as written, e.g. "StringLikeIfExists"
	set      string // "any" (ForAnyValue:), "all" (ForAllValues:) or "" (single-valued)
	key      string // as written
	line     int
	lkey     string // lower-cased (condition keys are case-insensitive)
	values   []string
	ifExists bool
	spec     opSpec
	norm     []any // values as the evaluator wants them
}

// opSpec says how an operator tests: t is the test ("eq", "ieq", "like",
// "ip", "lt", "le", "gt", "ge", "null"), src where the request value comes
// from ("s" string, "n" number, "d" date as epoch seconds), neg whether the
// operator is a negation (true when the key is missing; NOR over values).
type opSpec struct {
	t, src string
	neg    bool
}

// lookupOp maps an IAM condition operator (without IfExists) to its test.
func lookupOp(op string) (opSpec, bool) {
	switch op {
	case "StringEquals", "ArnEquals":
		return opSpec{"eq", "s", false}, true
	case "StringNotEquals", "ArnNotEquals":
		return opSpec{"eq", "s", true}, true
	case "StringEqualsIgnoreCase", "Bool":
		return opSpec{"ieq", "s", false}, true
	case "StringNotEqualsIgnoreCase":
		return opSpec{"ieq", "s", true}, true
	case "StringLike", "ArnLike":
		return opSpec{"like", "s", false}, true
	case "StringNotLike", "ArnNotLike":
		return opSpec{"like", "s", true}, true
	case "NumericEquals":
		return opSpec{"eq", "n", false}, true
	case "NumericNotEquals":
		return opSpec{"eq", "n", true}, true
	case "NumericLessThan":
		return opSpec{"lt", "n", false}, true
	case "NumericLessThanEquals":
		return opSpec{"le", "n", false}, true
	case "NumericGreaterThan":
		return opSpec{"gt", "n", false}, true
	case "NumericGreaterThanEquals":
		return opSpec{"ge", "n", false}, true
	case "DateEquals":
		return opSpec{"eq", "d", false}, true
	case "DateNotEquals":
		return opSpec{"eq", "d", true}, true
	case "DateLessThan":
		return opSpec{"lt", "d", false}, true
	case "DateLessThanEquals":
		return opSpec{"le", "d", false}, true
	case "DateGreaterThan":
		return opSpec{"gt", "d", false}, true
	case "DateGreaterThanEquals":
		return opSpec{"ge", "d", false}, true
	case "IpAddress":
		return opSpec{"ip", "s", false}, true
	case "NotIpAddress":
		return opSpec{"ip", "s", true}, true
	case "Null":
		return opSpec{"null", "s", false}, true
	}
	return opSpec{}, false
}

// parsePolicyJSON parses and validates an IAM policy document read from file.
func parsePolicyJSON(name, file string, data []byte) (*policyDoc, error) {
	if len(data) > maxPolicyBytes {
		return nil, &lineError{file, 0, fmt.Sprintf("policy document is %d bytes; the limit is %d", len(data), maxPolicyBytes)}
	}
	root, err := parseJSONTree(file, data)
	if err != nil {
		return nil, err
	}
	return parsePolicyTree(name, file, root)
}

// parsePolicyTree validates an IAM policy document strictly: known elements
// only, the types IAM accepts, known condition operators.
func parsePolicyTree(name, file string, root *node) (*policyDoc, error) {
	fail := func(n *node, format string, args ...any) error {
		return &lineError{file, n.line, fmt.Sprintf("policy %q: ", name) + fmt.Sprintf(format, args...)}
	}
	if root.kind != kObject {
		return nil, fail(root, "a policy document must be a JSON object, not %s", root.kind)
	}
	doc := &policyDoc{name: name, file: file, line: root.line}
	var stmtsNode *node
	for i, k := range root.keys {
		v := root.vals[i]
		switch k {
		case "Version":
			if v.kind != kString || (v.str != "2012-10-17" && v.str != "2008-10-17") {
				return nil, fail(v, `Version must be "2012-10-17" or "2008-10-17"`)
			}
		case "Id":
			if v.kind != kString || len(v.str) > maxValueLen {
				return nil, fail(v, "Id must be a string")
			}
		case "Statement":
			stmtsNode = v
		default:
			return nil, fail(v, "unknown policy element %q (want Version, Id, Statement)", k)
		}
	}
	if stmtsNode == nil {
		return nil, fail(root, "Statement is required")
	}
	var list []*node
	switch stmtsNode.kind {
	case kObject:
		list = []*node{stmtsNode}
	case kArray:
		list = stmtsNode.items
	default:
		return nil, fail(stmtsNode, "Statement must be an object or an array of objects")
	}
	if len(list) == 0 {
		return nil, fail(stmtsNode, "Statement is empty")
	}
	if len(list) > maxStatements {
		return nil, fail(stmtsNode, "more than %d statements", maxStatements)
	}
	sids := map[string]bool{}
	for i, sn := range list {
		s, err := parseStatement(name, file, i+1, sn)
		if err != nil {
			return nil, err
		}
		if s.sid != "" {
			if sids[s.sid] {
				return nil, fail(sn, "statement %d: duplicate Sid %q", i+1, s.sid)
			}
			sids[s.sid] = true
		}
		doc.stmts = append(doc.stmts, s)
	}
	return doc, nil
}

func parseStatement(policy, file string, index int, sn *node) (*stmt, error) {
	s := &stmt{file: file, line: sn.line}
	label := fmt.Sprintf("statement %d", index)
	fail := func(n *node, format string, args ...any) error {
		return &lineError{file, n.line, fmt.Sprintf("policy %q: %s: ", policy, label) + fmt.Sprintf(format, args...)}
	}
	if sn.kind != kObject {
		return nil, fail(sn, "a statement must be an object, not %s", sn.kind)
	}
	if sid := sn.get("Sid"); sid != nil {
		if sid.kind != kString || len(sid.str) > 256 {
			return nil, fail(sid, "Sid must be a string")
		}
		s.sid = sid.str
		if s.sid != "" {
			label = fmt.Sprintf("statement %d (Sid %q)", index, s.sid)
		}
	}
	var haveEffect, haveAction, haveResource bool
	for i, k := range sn.keys {
		v := sn.vals[i]
		switch k {
		case "Sid":
		case "Effect":
			if v.kind != kString || (v.str != "Allow" && v.str != "Deny") {
				return nil, fail(v, `Effect must be "Allow" or "Deny"`)
			}
			s.deny, haveEffect = v.str == "Deny", true
		case "Action", "NotAction":
			if haveAction {
				return nil, fail(v, "a statement has either Action or NotAction, not both")
			}
			vals, err := stringList(v)
			if err != nil {
				return nil, fail(v, "%s: %v", k, err)
			}
			for _, a := range vals {
				if !validAction(a) {
					return nil, fail(v, `%s %q: want "*" or "service:Action" (wildcards * and ? allowed in Action)`, k, a)
				}
			}
			s.notAction, s.actions, haveAction = k == "NotAction", vals, true
		case "Resource", "NotResource":
			if haveResource {
				return nil, fail(v, "a statement has either Resource or NotResource, not both")
			}
			vals, err := stringList(v)
			if err != nil {
				return nil, fail(v, "%s: %v", k, err)
			}
			for _, r := range vals {
				if r != "*" && !strings.HasPrefix(r, "arn:") {
					return nil, fail(v, `%s %q: want "*" or an ARN`, k, r)
				}
				if strings.Contains(r, "${") {
					return nil, fail(v, "%s %q: policy variables (${…}) are not supported", k, r)
				}
			}
			s.notRes, s.resources, haveResource = k == "NotResource", vals, true
		case "Condition":
			conds, err := parseConditions(v, func(n *node, format string, args ...any) error { return fail(n, format, args...) })
			if err != nil {
				return nil, err
			}
			s.conds = conds
		case "Principal", "NotPrincipal":
			return nil, fail(v, "%s is not allowed in an identity-based policy", k)
		default:
			return nil, fail(v, "unknown statement element %q", k)
		}
	}
	switch {
	case !haveEffect:
		return nil, fail(sn, "Effect is required")
	case !haveAction:
		return nil, fail(sn, "Action or NotAction is required")
	case !haveResource:
		return nil, fail(sn, "Resource or NotResource is required")
	}
	if s.sid != "" {
		s.id = policy + ":" + s.sid
	} else {
		s.id = fmt.Sprintf("%s:statement[%d]", policy, index)
	}
	return s, nil
}

// stringList reads an element that is a string or a non-empty array of
// strings.
func stringList(n *node) ([]string, error) {
	switch n.kind {
	case kString:
		if len(n.str) > maxValueLen {
			return nil, fmt.Errorf("value longer than %d bytes", maxValueLen)
		}
		return []string{n.str}, nil
	case kArray:
		if len(n.items) == 0 {
			return nil, fmt.Errorf("empty array")
		}
		if len(n.items) > maxElementValues {
			return nil, fmt.Errorf("more than %d values", maxElementValues)
		}
		out := make([]string, 0, len(n.items))
		for _, it := range n.items {
			if it.kind != kString {
				return nil, fmt.Errorf("want strings, found %s", it.kind)
			}
			if len(it.str) > maxValueLen {
				return nil, fmt.Errorf("value longer than %d bytes", maxValueLen)
			}
			out = append(out, it.str)
		}
		return out, nil
	}
	return nil, fmt.Errorf("want a string or an array of strings, found %s", n.kind)
}

func validAction(a string) bool {
	if a == "*" {
		return true
	}
	svc, act, ok := strings.Cut(a, ":")
	if !ok || svc == "" || act == "" || len(a) > 256 {
		return false
	}
	for i := 0; i < len(svc); i++ {
		c := svc[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-') {
			return false
		}
	}
	for i := 0; i < len(act); i++ {
		c := act[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '*' || c == '?' || c == '-' || c == '_') {
			return false
		}
	}
	return true
}

type failFunc func(n *node, format string, args ...any) error

// parseConditions reads {"Operator": {"key": value | [values]}}.
func parseConditions(n *node, fail failFunc) ([]*cond, error) {
	if n.kind != kObject {
		return nil, fail(n, "Condition must be an object")
	}
	var out []*cond
	for i, op := range n.keys {
		block := n.vals[i]
		setOp := ""
		base := op
		if b, ok := strings.CutPrefix(op, "ForAnyValue:"); ok {
			setOp, base = "any", b
		} else if b, ok := strings.CutPrefix(op, "ForAllValues:"); ok {
			setOp, base = "all", b
		}
		base, ifExists := strings.CutSuffix(base, "IfExists")
		spec, ok := lookupOp(base)
		if !ok {
			return nil, fail(block, "unknown condition operator %q", op)
		}
		if setOp != "" && (spec.src != "s" || spec.t == "ip" || spec.t == "null" || base == "Bool") {
			return nil, fail(block, "condition operator %q: mce applies ForAnyValue:/ForAllValues: to the String and Arn operators only", op)
		}
		if ifExists && spec.t == "null" {
			return nil, fail(block, "condition operator %q: Null has no IfExists form", op)
		}
		if block.kind != kObject || len(block.keys) == 0 {
			return nil, fail(block, "condition operator %q: want an object of condition keys", op)
		}
		for j, key := range block.keys {
			vn := block.vals[j]
			if !validConditionKey(key) {
				return nil, fail(vn, `condition key %q: want "prefix:Name"`, key)
			}
			vals, err := conditionValues(vn)
			if err != nil {
				return nil, fail(vn, "%s %s: %v", op, key, err)
			}
			c := &cond{op: op, set: setOp, key: key, lkey: strings.ToLower(key), line: vn.line, values: vals, ifExists: ifExists, spec: spec}
			if err := c.normalize(); err != nil {
				return nil, fail(vn, "%s %s: %v", op, key, err)
			}
			out = append(out, c)
		}
	}
	return out, nil
}

func validConditionKey(k string) bool {
	if len(k) > maxConditionKeyLen {
		return false
	}
	pfx, name, ok := strings.Cut(k, ":")
	if !ok || pfx == "" || name == "" {
		return false
	}
	for i := 0; i < len(k); i++ {
		c := k[i]
		if c <= ' ' || c >= 0x7f {
			return false
		}
	}
	return true
}

// conditionValues reads a condition value: a string, number or boolean, or
// an array of those (IAM accepts all three and compares their text).
func conditionValues(n *node) ([]string, error) {
	scalar := func(n *node) (string, error) {
		switch n.kind {
		case kString, kNumber, kBool:
			if len(n.str) > maxValueLen {
				return "", fmt.Errorf("value longer than %d bytes", maxValueLen)
			}
			return n.str, nil
		}
		return "", fmt.Errorf("want a string, number or boolean, found %s", n.kind)
	}
	if n.kind != kArray {
		v, err := scalar(n)
		if err != nil {
			return nil, err
		}
		return []string{v}, nil
	}
	if len(n.items) == 0 {
		return nil, fmt.Errorf("empty array")
	}
	if len(n.items) > maxElementValues {
		return nil, fmt.Errorf("more than %d values", maxElementValues)
	}
	out := make([]string, 0, len(n.items))
	for _, it := range n.items {
		v, err := scalar(it)
		if err != nil {
			return nil, err
		}
		out = append(out, v)
	}
	return out, nil
}

// normalize checks the values against the operator and converts them.
func (c *cond) normalize() error {
	c.norm = make([]any, 0, len(c.values))
	for _, v := range c.values {
		if strings.Contains(v, "${") {
			return fmt.Errorf("value %q: policy variables (${…}) are not supported", v)
		}
		switch c.spec.t {
		case "null":
			b, err := strconv.ParseBool(strings.ToLower(v))
			if err != nil || (strings.ToLower(v) != "true" && strings.ToLower(v) != "false") {
				return fmt.Errorf("value %q: Null takes true or false", v)
			}
			c.norm = append(c.norm, b)
		case "eq":
			if c.spec.src == "s" {
				c.norm = append(c.norm, v)
				continue
			}
			fallthrough
		case "lt", "le", "gt", "ge":
			x, err := c.number(v)
			if err != nil {
				return err
			}
			c.norm = append(c.norm, x)
		case "ieq":
			if c.op == "Bool" || c.op == "BoolIfExists" {
				lv := strings.ToLower(v)
				if lv != "true" && lv != "false" {
					return fmt.Errorf("value %q: Bool takes true or false", v)
				}
			}
			c.norm = append(c.norm, strings.ToLower(v))
		case "like":
			c.norm = append(c.norm, globPattern(v, false))
		case "ip":
			p, err := parseCIDR(v)
			if err != nil {
				return err
			}
			c.norm = append(c.norm, p)
		}
	}
	return nil
}

// number converts a Numeric or Date condition value.
func (c *cond) number(v string) (any, error) {
	if c.spec.src == "d" {
		t, err := parseDate(v)
		if err != nil {
			return nil, fmt.Errorf("value %q: want an ISO 8601 date/time (2026-01-02T15:04:05Z) or epoch seconds", v)
		}
		return t, nil
	}
	f, err := strconv.ParseFloat(v, 64)
	if err != nil {
		return nil, fmt.Errorf("value %q: want a number", v)
	}
	return f, nil
}

// parseDate reads an IAM date: RFC 3339 (with or without fractional
// seconds), a bare date, or epoch seconds. The result is epoch seconds.
func parseDate(v string) (int64, error) {
	if n, err := strconv.ParseInt(v, 10, 64); err == nil {
		return n, nil
	}
	for _, layout := range []string{time.RFC3339Nano, "2006-01-02T15:04:05Z0700", "2006-01-02T15:04Z07:00", "2006-01-02"} {
		if t, err := time.Parse(layout, v); err == nil {
			return t.Unix(), nil
		}
	}
	return 0, fmt.Errorf("not a date: %q", v)
}

// parseCIDR accepts "203.0.113.0/24", "2001:db8::/32" or a bare address
// (a /32 or /128), and returns the masked prefix text.
func parseCIDR(v string) (string, error) {
	if p, err := netip.ParsePrefix(v); err == nil {
		return p.Masked().String(), nil
	}
	if a, err := netip.ParseAddr(v); err == nil {
		return netip.PrefixFrom(a, a.BitLen()).String(), nil
	}
	return "", fmt.Errorf("value %q: want an IPv4 or IPv6 address or CIDR block", v)
}

// globPattern turns an IAM wildcard pattern (* any run, ? one character,
// nothing else special) into the form the Rego evaluator matches with:
// {"k": "a"} any value; {"k": "e", "s": s} exact; {"k": "p", "s": prefix}
// prefix*; {"k": "g", "s": glob} where glob is the pattern for OPA's
// glob.match with every gobwas/glob metacharacter except * and ? escaped.
func globPattern(p string, lower bool) map[string]any {
	if lower {
		p = strings.ToLower(p)
	}
	if p == "*" {
		return map[string]any{"k": "a", "s": ""}
	}
	i := strings.IndexAny(p, "*?")
	switch {
	case i < 0:
		return map[string]any{"k": "e", "s": p}
	case i == len(p)-1 && p[i] == '*':
		return map[string]any{"k": "p", "s": p[:i]}
	}
	var b strings.Builder
	for _, r := range p {
		switch {
		case r == '*' || r == '?':
			b.WriteRune(r)
		case r < 0x80 && (r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9'):
			b.WriteRune(r)
		default:
			b.WriteByte('\\')
			b.WriteRune(r)
		}
	}
	return map[string]any{"k": "g", "s": b.String()}
}
