# Why a decision came out as it did: every statement of the caller, in
# policy order, with the result of each part. Used by `mce policy eval`,
# never on the request path.
package mce.explain

import data.mce.iam

statements := [r |
	some s in iam.set.all
	r := {
		"id": s.id,
		"deny": s.deny,
		"action": truth(s, "action"),
		"resource": truth(s, "resource"),
		"conditions": [truth(c, "cond") | some c in s.c],
		"applies": truth(s, "applies"),
	}
]

truth(x, "action") := true if iam.action_ok(x) else := false

truth(x, "resource") := true if iam.resource_ok(x) else := false

truth(x, "cond") := true if iam.cond(x.m, x) else := false

truth(x, "applies") := true if iam.applies(x) else := false
