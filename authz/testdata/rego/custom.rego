# A custom policy: no one invokes endpoints named "frozen-*", and the
# "ops" user may invoke anything IAM does not explicitly deny.
package mce.custom

deny contains msg if {
	input.action == "sagemaker:InvokeEndpoint"
	endswith(input.resource, "/frozen")
	msg := sprintf("endpoint %s is frozen", [input.resource])
}

deny contains "model names may not contain '..'" if {
	contains(input.context["sagemaker:targetmodel"], "..")
}

allow if {
	input.principal.username == "ops"
	not input.iam.explicit_deny
}
