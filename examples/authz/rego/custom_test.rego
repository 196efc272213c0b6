package mce.custom_test

import data.mce.custom

request := {
	"principal": {"arn": "arn:aws:iam::123456789012:user/alice", "username": "alice", "anonymous": false},
	"action": "sagemaker:InvokeEndpoint",
	"resource": "arn:aws:sagemaker:us-east-1:123456789012:endpoint/my-mce",
	"context": {},
	"iam": {"allowed": true, "explicit_deny": false},
}

test_frozen_endpoint_denied if {
	custom.deny["endpoint arn:aws:sagemaker:us-east-1:123456789012:endpoint/legacy is frozen"] with input as object.union(request, {"resource": "arn:aws:sagemaker:us-east-1:123456789012:endpoint/legacy"})
}

test_other_endpoint_not_denied if {
	count(custom.deny) == 0 with input as request
}

test_dotdot_model_denied if {
	custom.deny["TargetModel may not contain '..'"] with input as object.union(request, {"context": {"sagemaker:targetmodel": "../../etc/passwd"}})
}

test_oncall_allowed if {
	custom.allow with input as object.union(request, {"principal": {"username": "oncall"}, "iam": {"allowed": false, "explicit_deny": false}})
}

test_oncall_not_over_explicit_deny if {
	not custom.allow with input as object.union(request, {"principal": {"username": "oncall"}, "iam": {"allowed": false, "explicit_deny": true}})
}
