# Custom rules on top of the IAM policies (package mce.custom).
#
# input: principal {arn, access_key_id, username, anonymous}, action,
# resource, context (condition keys in lower case), source_ip, time, and
# iam {allowed, explicit_deny, allow_by, deny_by}.
package mce.custom

# Freeze an endpoint: nobody invokes it, whatever IAM allows.
frozen := {"arn:aws:sagemaker:us-east-1:123456789012:endpoint/legacy"}

deny contains msg if {
	startswith(input.action, "sagemaker:InvokeEndpoint")
	input.resource in frozen
	msg := sprintf("endpoint %s is frozen", [input.resource])
}

# Model paths may not climb out of the model store.
deny contains "TargetModel may not contain '..'" if {
	contains(input.context["sagemaker:targetmodel"], "..")
}

# The on-call user may invoke any endpoint IAM does not explicitly deny.
allow if {
	input.principal.username == "oncall"
	startswith(input.action, "sagemaker:InvokeEndpoint")
	not input.iam.explicit_deny
}
