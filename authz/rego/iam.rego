# IAM identity-policy evaluation, as AWS documents it, over the statements
# package authz compiled from the principal's IAM JSON documents.
#
#   data.mce.sets[SET]   the statements of one principal, indexed by action:
#     exact[ACTION]      statements whose Action lists only exact names, under
#                        each (lower-cased) name
#     other              every other statement (wildcards, NotAction)
#     all                every statement, in policy order (for explanations)
#   statement:
#     {"id", "deny", "simple" (Resource "*", no Condition),
#      "na" NotAction, "aa" Action "*", "ae" {exact: true}, "ap" [prefix*], "ag" [glob],
#      "nr" NotResource, "ra", "re", "rp", "rg" (the same for Resource),
#      "c" [condition]}
#   condition:
#     {"k" lower-cased key, "m" mode (see cond), "n" negated operator,
#      "src" "s"|"n"|"d",
#      "v" [[test, value]]} (see test; StringLike patterns become "eq",
#      "any", "prefix" or "glob" tests; in globs only * and ? are wild)
#   input.mce            request fields prepared by package authz: set (which
#                        data.mce.sets entry), action (lower-cased), v (the
#                        condition values: {"s": context, "n": numbers,
#                        "d": dates as epoch seconds, "m": multi-valued
#                        keys → non-empty arrays of strings})
#   input.resource, input.context (lower-cased keys → string values)
#
# Rules: explicit Deny beats Allow; no Allow → implicit deny. Several values
# of one key OR together (NOR for negated operators); keys and operators AND.
# A key missing from the request makes an operator false, except negated
# operators and …IfExists (true) and Null (which tests presence).
package mce.iam

set := data.mce.sets[input.mce.set]

# matched: [deny, id] of every statement that applies to the request.
# (s.simple: Resource "*" and no Condition, decided by the action alone.)
matched contains [s.deny, s.id] if {
	some s in set.exact[input.mce.action]
	s.simple
}

matched contains [s.deny, s.id] if {
	some s in set.exact[input.mce.action]
	not s.simple
	rest_ok(s)
}

matched contains [s.deny, s.id] if {
	some s in set.other
	applies(s)
}

allow_by contains id if some [false, id] in matched

deny_by contains id if some [true, id] in matched

default explicit_deny := false

explicit_deny if some [true, _] in matched

default allowed := false

allowed if {
	not explicit_deny
	some [false, _] in matched
}

# applies(s): the statement's Effect applies to the request.
applies(s) if {
	action_ok(s)
	rest_ok(s)
}

rest_ok(s) if {
	resource_ok(s)
	not some_cond_fails(s)
}

some_cond_fails(s) if {
	some c in s.c
	not cond(c.m, c)
}

action_ok(s) if {
	not s.na
	action_match(s)
}

action_ok(s) if {
	s.na
	not action_match(s)
}

action_match(s) if s.aa

action_match(s) if s.ae[input.mce.action]

action_match(s) if {
	some p in s.ap
	startswith(input.mce.action, p)
}

action_match(s) if {
	some g in s.ag
	glob.match(g, null, input.mce.action)
}

resource_ok(s) if {
	not s.nr
	resource_match(s)
}

resource_ok(s) if {
	s.nr
	not resource_match(s)
}

resource_match(s) if s.ra

resource_match(s) if s.re[input.resource]

resource_match(s) if {
	some p in s.rp
	startswith(input.resource, p)
}

resource_match(s) if {
	some g in s.rg
	glob.match(g, null, input.resource)
}

has(k) if {
	_ = input.context[k]
}

# cond(MODE, c) — MODE (c.m) is set at load:
#   "pos"    positive operator: the key must be present and some value match
#   "posie"  positive …IfExists: absent, or some value matches
#   "neg"    negated operator (with or without IfExists): absent, or no value
#            matches
#   "null"   Null: presence tested against each value (true = absent)
# c.v is a list of [test, value]; the request value comes from
# input.mce.v[c.src][c.k] (src "s": the string, "n"/"d": as a number). A
# present value that does not convert (a Numeric key that is not a number)
# fails every mode.
cond("pos", c) if {
	v := input.mce.v[c.src][c.k]
	some [t, x] in c.v
	test(t, x, v)
}

cond("posie", c) if not has(c.k)

cond("posie", c) if {
	v := input.mce.v[c.src][c.k]
	some [t, x] in c.v
	test(t, x, v)
}

cond("neg", c) if not has(c.k)

cond("neg", c) if {
	v := input.mce.v[c.src][c.k]
	not some_test(c.v, v)
}

cond("null", c) if {
	some [_, x] in c.v
	x == true
	not has(c.k)
}

# Set operators on multi-valued keys (input.mce.v.m; an empty key is
# absent):
#   "any"    ForAnyValue: some request value passes (for a negated
#            operator: matches none of the policy values); absent: false
#   "anyie"  ForAnyValue:…IfExists: absent, or as "any"
#   "all"    ForAllValues: (…IfExists alike): every request value passes;
#            absent: true
cond("any", c) if any_value(c)

cond("anyie", c) if not has(c.k)

cond("anyie", c) if any_value(c)

cond("all", c) if {
	not some_value_fails(c)
}

any_value(c) if {
	some v in input.mce.v.m[c.k]
	value_passes(c, v)
}

some_value_fails(c) if {
	some v in input.mce.v.m[c.k]
	not value_passes(c, v)
}

value_passes(c, v) if {
	not c.n
	some [t, x] in c.v
	test(t, x, v)
}

value_passes(c, v) if {
	c.n
	not some_test(c.v, v)
}

cond("null", c) if {
	some [_, x] in c.v
	x == false
	has(c.k)
}

some_test(tests, v) if {
	some [t, x] in tests
	test(t, x, v)
}

# test(TEST, x, v): the request value v passes the policy value x.
test("eq", x, v) if x == v

test("ieq", x, v) if x == lower(v)

test("any", _, _)

test("prefix", x, v) if startswith(v, x)

test("glob", x, v) if glob.match(x, null, v)

test("ip", x, v) if net.cidr_contains(x, v)

test("lt", x, v) if v < x

test("le", x, v) if v <= x

test("gt", x, v) if v > x

test("ge", x, v) if v >= x
