# Unit tests of the embedded IAM evaluator (run by TestEmbeddedRego).
package mce.iam_test

import data.mce.authz
import data.mce.iam

allow_invoke := {
	"id": "p:AllowInvoke", "deny": false,
	"na": false, "aa": false, "ae": {"sagemaker:invokeendpoint": true}, "ap": [], "ag": [],
	"nr": false, "ra": false, "re": {}, "rp": ["arn:aws:sagemaker:us-east-1:123456789012:endpoint/"], "rg": [],
	"c": [{"k": "sagemaker:targetcontainerhostname", "m": "pos", "src": "s",
		"v": [["prefix", "customIps"], ["glob", "comm?n*"]]}],
}

deny_special := {
	"id": "p:DenySpecial", "deny": true,
	"na": false, "aa": true, "ae": {}, "ap": [], "ag": [],
	"nr": false, "ra": true, "re": {}, "rp": [], "rg": [],
	"c": [{"k": "sagemaker:targetcontainerhostname", "m": "pos", "src": "s",
		"v": [["prefix", "special"]]}],
}

sets := {"s": {
	"all": [allow_invoke, deny_special],
	"exact": {"sagemaker:invokeendpoint": [allow_invoke]},
	"other": [deny_special],
}}

req(host) := {
	"action": "sagemaker:InvokeEndpoint",
	"resource": "arn:aws:sagemaker:us-east-1:123456789012:endpoint/my-mce",
	"context": {"sagemaker:targetcontainerhostname": host},
	"mce": {
		"set": "s", "action": "sagemaker:invokeendpoint",
		"v": {"s": {"sagemaker:targetcontainerhostname": host}, "n": {}, "d": {}},
	},
}

test_allow_prefix if {
	iam.allowed with data.mce.sets as sets with input as req("customIps-7")
}

test_allow_glob if {
	iam.allow_by == {"p:AllowInvoke"} with data.mce.sets as sets with input as req("common-1")
}

test_implicit_deny if {
	not iam.allowed with data.mce.sets as sets with input as req("other")
	not iam.explicit_deny with data.mce.sets as sets with input as req("other")
}

test_explicit_deny_wins if {
	d := authz.decision_custom with data.mce.sets as sets with input as req("special-1")
	d.explicit_deny
	not d.allowed
	d.deny_by == {"p:DenySpecial"}
}

test_missing_key_positive_false if {
	r := object.remove(req("customIps-1"), ["context", "mce"])
	no_key := object.union(r, {"context": {}, "mce": {"set": "s", "action": "sagemaker:invokeendpoint", "v": {"s": {}}}})
	not iam.allowed with data.mce.sets as sets with input as no_key
}

test_unknown_set_denies if {
	r := req("customIps-1")
	not iam.allowed with data.mce.sets as sets with input as object.union(r, {"mce": {"set": "nobody"}})
}

test_negated_missing_key_true if {
	c := {"k": "a:b", "m": "neg", "src": "s", "v": [["eq", "x"]]}
	iam.cond(c.m, c) with input as {"context": {}}
}

test_if_exists_missing_key_true if {
	c := {"k": "a:b", "m": "posie", "src": "s", "v": [["eq", "x"]]}
	iam.cond(c.m, c) with input as {"context": {}}
}

test_null if {
	absent := {"k": "a:b", "m": "null", "src": "s", "v": [["null", true]]}
	iam.cond("null", absent) with input as {"context": {}}
	not iam.cond("null", absent) with input as {"context": {"a:b": "v"}}
}

test_numeric_unparsable_fails_both_forms if {
	pos := {"k": "a:n", "m": "pos", "src": "n", "v": [["lt", 10]]}
	neg := {"k": "a:n", "m": "neg", "src": "n", "v": [["eq", 10]]}
	unparsable := {"context": {"a:n": "x"}, "mce": {"v": {"s": {"a:n": "x"}, "n": {}}}}
	not iam.cond("pos", pos) with input as unparsable
	not iam.cond("neg", neg) with input as unparsable
	iam.cond("pos", pos) with input as {"context": {"a:n": "5"}, "mce": {"v": {"s": {"a:n": "5"}, "n": {"a:n": 5}}}}
}
