# The decision mce asks for on every request.
#
# decision         IAM alone (used when no custom Rego is loaded).
# decision_custom  IAM first, then the user's package mce.custom, which sees
#                  the IAM result as input.iam:
#   explicit deny  — an IAM Deny statement applies, or mce.custom.deny has a
#                    message. Always wins.
#   allow          — no explicit deny, and an IAM Allow statement applies or
#                    mce.custom.allow is true.
#   implicit deny  — anything else.
package mce.authz

iam := {
	"allowed": data.mce.iam.allowed,
	"explicit_deny": data.mce.iam.explicit_deny,
	"allow_by": data.mce.iam.allow_by,
	"deny_by": data.mce.iam.deny_by,
}

decision := object.union(iam, {"custom_deny": set(), "custom_allow": false})

default custom_deny := set()

custom_deny := d if {
	d := data.mce.custom.deny with input.iam as iam
	is_set(d)
}

default custom_allow := false

custom_allow if {
	data.mce.custom.allow == true with input.iam as iam
}

default explicit_deny := false

explicit_deny if iam.explicit_deny

explicit_deny if count(custom_deny) > 0

default allowed := false

allowed if {
	not explicit_deny
	iam.allowed
}

allowed if {
	not explicit_deny
	custom_allow
}

decision_custom := {
	"allowed": allowed,
	"explicit_deny": explicit_deny,
	"allow_by": iam.allow_by,
	"deny_by": iam.deny_by,
	"custom_deny": custom_deny,
	"custom_allow": custom_allow,
}
