package mce.custom_test

import data.mce.custom

base := {
	"principal": {"arn": "arn:aws:iam::123456789012:user/alice", "username": "alice", "anonymous": false},
	"action": "sagemaker:InvokeEndpoint",
	"resource": "arn:aws:sagemaker:us-east-1:123456789012:endpoint/my-mce",
	"context": {},
	"iam": {"allowed": true, "explicit_deny": false},
}

test_frozen_endpoint_denied if {
	count(custom.deny) == 1 with input as object.union(base, {"resource": "arn:aws:sagemaker:us-east-1:123456789012:endpoint/frozen"})
}

test_normal_endpoint_not_denied if {
	count(custom.deny) == 0 with input as base
}

test_dotdot_model_denied if {
	custom.deny["model names may not contain '..'"] with input as object.union(base, {"context": {"sagemaker:targetmodel": "../etc/passwd"}})
}

test_ops_allowed if {
	custom.allow with input as object.union(base, {"principal": {"username": "ops"}, "iam": {"allowed": false, "explicit_deny": false}})
}

test_alice_not_allowed_by_custom if {
	not custom.allow with input as base
}
