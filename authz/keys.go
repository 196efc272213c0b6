package authz

import (
	"fmt"
	"strings"
)

// Condition keys of resource and request tags. The tag key follows the
// slash; IAM compares it case-insensitively, as every condition key name.
const (
	KeyResourceTagPrefix          = "aws:ResourceTag/"
	KeySageMakerResourceTagPrefix = "sagemaker:ResourceTag/"
	KeyRequestTagPrefix           = "aws:RequestTag/"
	// KeyTagKeys is multi-valued: the tag keys a request names (CreateX
	// with Tags, AddTags, DeleteTags' TagKeys). Policies test it with
	// ForAnyValue: or ForAllValues:.
	KeyTagKeys = "aws:TagKeys"
)

// singleKeys are the single-valued condition keys mce sets (lower-cased):
// the host fills the sagemaker:Target* keys of InvokeEndpoint calls, the
// authorizer the aws:* keys of every call.
var singleKeys = map[string]bool{
	"aws:username":                      true,
	"aws:sourceip":                      true,
	"aws:currenttime":                   true,
	"aws:epochtime":                     true,
	"aws:principalarn":                  true,
	"aws:principalaccount":              true,
	"sagemaker:targetmodel":             true,
	"sagemaker:targetvariant":           true,
	"sagemaker:targetcontainerhostname": true,
}

// tagPrefixes are the single-valued key families "<prefix><TagKey>".
var tagPrefixes = []string{"aws:resourcetag/", "sagemaker:resourcetag/", "aws:requesttag/"}

// keyKind says whether mce can evaluate the lower-cased condition key lkey:
// "single", "multi", or "" (unknown). extra are single-valued keys the
// embedding program promises to supply (Config.ExtraConditionKeys).
func keyKind(lkey string, extra map[string]bool) string {
	if singleKeys[lkey] || extra[lkey] {
		return "single"
	}
	if lkey == "aws:tagkeys" {
		return "multi"
	}
	for _, p := range tagPrefixes {
		if rest, ok := strings.CutPrefix(lkey, p); ok && rest != "" {
			return "single"
		}
	}
	return ""
}

// supportedKeysText lists the keys mce evaluates, for error messages.
const supportedKeysText = "aws:username, aws:SourceIp, aws:CurrentTime, aws:EpochTime, aws:PrincipalArn, " +
	"aws:PrincipalAccount, sagemaker:TargetModel, sagemaker:TargetVariant, sagemaker:TargetContainerHostname, " +
	"aws:ResourceTag/<key>, sagemaker:ResourceTag/<key>, aws:RequestTag/<key> and aws:TagKeys"

// checkConditionKeys refuses a condition on a key mce never sets (IAM
// would treat it as absent: a Deny that never applies, or an Allow with a
// negated operator that always does) and an operator of the wrong
// arity: a plain operator on the multi-valued aws:TagKeys, a set operator
// (ForAnyValue:/ForAllValues:) on a single-valued key.
func checkConditionKeys(docs []*policyDoc, extra map[string]bool) error {
	for _, d := range docs {
		for _, s := range d.stmts {
			for _, c := range s.conds {
				fail := func(format string, args ...any) error {
					return &lineError{s.file, c.line, fmt.Sprintf("policy %q: statement %s: ", d.name, s.id) + fmt.Sprintf(format, args...)}
				}
				switch keyKind(c.lkey, extra) {
				case "":
					return fail("condition key %q: mce cannot evaluate it (it never sets this key, so the condition would act as if it were absent); mce evaluates %s", c.key, supportedKeysText)
				case "multi":
					if c.set == "" && c.spec.t != "null" {
						return fail("condition key %q is multi-valued: use ForAnyValue:%s or ForAllValues:%s", c.key, c.op, c.op)
					}
				case "single":
					if c.set != "" {
						return fail("condition key %q is single-valued: use the plain operator, not %s", c.key, c.op)
					}
				}
			}
		}
	}
	return nil
}

// attachedDocs lists every document attached to someone, each once.
func (l *loaded) attachedDocs() []*policyDoc {
	var out []*policyDoc
	out = appendUnique(out, l.anonymous...)
	out = appendUnique(out, l.everyone...)
	for _, docs := range l.byARN {
		out = appendUnique(out, docs...)
	}
	return out
}
