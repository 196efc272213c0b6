package authz

import (
	"context"
	"testing"
)

// TestTagConditions: the tag keys evaluate as IAM does — aws:ResourceTag/…,
// sagemaker:ResourceTag/… and aws:RequestTag/… single-valued with the tag
// key compared case-insensitively, aws:TagKeys multi-valued under
// ForAnyValue:/ForAllValues: (absent: ForAnyValue false, ForAllValues true).
func TestTagConditions(t *testing.T) {
	type single = map[string]string
	type multi = map[string][]string
	const allowAll = `{"Version": "2012-10-17", "Statement": {"Effect": "Allow", "Action": "*", "Resource": "*"}}`
	deny := func(cond string) string {
		return `{"Version": "2012-10-17", "Statement": {"Sid": "D", "Effect": "Deny", "Action": "sagemaker:*", "Resource": "*", "Condition": ` + cond + `}}`
	}
	cases := []struct {
		name  string
		docs  []string
		ctx   single
		multi multi
		allow bool
	}{
		{"resource tag matches", []string{allowAll, deny(`{"StringEquals": {"aws:ResourceTag/env": "prod"}}`)}, single{"aws:ResourceTag/env": "prod"}, nil, false},
		{"resource tag key is case-insensitive", []string{allowAll, deny(`{"StringEquals": {"aws:ResourceTag/ENV": "prod"}}`)}, single{"aws:ResourceTag/Env": "prod"}, nil, false},
		{"resource tag value is case-sensitive", []string{allowAll, deny(`{"StringEquals": {"aws:ResourceTag/env": "prod"}}`)}, single{"aws:ResourceTag/env": "Prod"}, nil, true},
		{"resource tag other value", []string{allowAll, deny(`{"StringEquals": {"aws:ResourceTag/env": "prod"}}`)}, single{"aws:ResourceTag/env": "dev"}, nil, true},
		{"resource untagged", []string{allowAll, deny(`{"StringEquals": {"aws:ResourceTag/env": "prod"}}`)}, nil, nil, true},
		{"sagemaker:ResourceTag", []string{allowAll, deny(`{"StringLike": {"sagemaker:ResourceTag/env": "prod*"}}`)}, single{"sagemaker:ResourceTag/env": "prod-eu"}, nil, false},
		{"request tag", []string{allowAll, deny(`{"StringEquals": {"aws:RequestTag/env": "prod"}}`)}, single{"aws:RequestTag/env": "prod"}, nil, false},
		{"ForAnyValue TagKeys hit", []string{allowAll, deny(`{"ForAnyValue:StringEquals": {"aws:TagKeys": ["owner", "env"]}}`)}, nil, multi{"aws:TagKeys": {"team", "env"}}, false},
		{"ForAnyValue TagKeys miss", []string{allowAll, deny(`{"ForAnyValue:StringEquals": {"aws:TagKeys": ["owner", "env"]}}`)}, nil, multi{"aws:TagKeys": {"team"}}, true},
		{"ForAnyValue TagKeys absent", []string{allowAll, deny(`{"ForAnyValue:StringEquals": {"aws:TagKeys": "env"}}`)}, nil, nil, true},
		{"ForAnyValue TagKeys empty", []string{allowAll, deny(`{"ForAnyValue:StringEquals": {"aws:TagKeys": "env"}}`)}, nil, multi{"aws:TagKeys": {}}, true},
		{"ForAnyValue IfExists absent", []string{allowAll, deny(`{"ForAnyValue:StringEqualsIfExists": {"aws:TagKeys": "env"}}`)}, nil, nil, false},
		{"ForAnyValue negated", []string{allowAll, deny(`{"ForAnyValue:StringNotLike": {"aws:TagKeys": "team-*"}}`)}, nil, multi{"aws:TagKeys": {"team-a", "x"}}, false},
		{"ForAnyValue negated, all excluded", []string{allowAll, deny(`{"ForAnyValue:StringNotLike": {"aws:TagKeys": "team-*"}}`)}, nil, multi{"aws:TagKeys": {"team-a"}}, true},
		{"ForAllValues every key listed", []string{deny(`{"ForAllValues:StringLike": {"aws:TagKeys": ["team-*", "env"]}}`)}, nil, multi{"aws:TagKeys": {"team-a", "env"}}, false},
		{"ForAllValues one key not listed", []string{allowAll, deny(`{"ForAllValues:StringLike": {"aws:TagKeys": ["team-*", "env"]}}`)}, nil, multi{"aws:TagKeys": {"team-a", "owner"}}, true},
		{"ForAllValues absent is true", []string{allowAll, deny(`{"ForAllValues:StringEquals": {"aws:TagKeys": "env"}}`)}, nil, nil, false},
		{"ForAllValues negated", []string{allowAll, deny(`{"ForAllValues:StringNotEquals": {"aws:TagKeys": "env"}}`)}, nil, multi{"aws:TagKeys": {"a", "b"}}, false},
		{"ForAllValues negated, one excluded", []string{allowAll, deny(`{"ForAllValues:StringNotEquals": {"aws:TagKeys": "env"}}`)}, nil, multi{"aws:TagKeys": {"a", "env"}}, true},
		{"TagKeys key name case-insensitive", []string{allowAll, deny(`{"ForAnyValue:StringEquals": {"AWS:tagkeys": "env"}}`)}, nil, multi{"aws:TagKeys": {"env"}}, false},
		{"Null TagKeys false (tags given)", []string{allowAll, deny(`{"Null": {"aws:TagKeys": "false"}}`)}, nil, multi{"aws:TagKeys": {"env"}}, false},
		{"Null TagKeys false (none given)", []string{allowAll, deny(`{"Null": {"aws:TagKeys": "false"}}`)}, nil, nil, true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			a := authzWithDocs(t, c.docs...)
			in := Input{Principal: alice(), Action: ActionDescribeEndpoint, Resource: mceARN, Context: c.ctx, MultiContext: c.multi, Time: testNow}
			for range 2 { // the second answer comes from the decision cache
				d, err := a.Authorize(context.Background(), in)
				if err != nil {
					t.Fatal(err)
				}
				if d.Allowed != c.allow {
					t.Fatalf("Allowed = %v, want %v (%+v)", d.Allowed, c.allow, d)
				}
			}
		})
	}
}

// TestTagKeysCacheKey: two requests that differ only in aws:TagKeys are
// different questions to the decision cache.
func TestTagKeysCacheKey(t *testing.T) {
	a := authzWithDocs(t, `{"Version": "2012-10-17", "Statement": [{"Effect": "Allow", "Action": "*", "Resource": "*"},
		{"Effect": "Deny", "Action": "*", "Resource": "*", "Condition": {"ForAnyValue:StringEquals": {"aws:TagKeys": "env"}}}]}`)
	for _, c := range []struct {
		keys  []string
		allow bool
	}{{[]string{"a"}, true}, {[]string{"env"}, false}, {[]string{"a"}, true}, {[]string{"a", "env"}, false}, {[]string{"ae", "nv"}, true}, {nil, true}} {
		in := Input{Principal: alice(), Action: ActionAddTags, Resource: mceARN, MultiContext: map[string][]string{KeyTagKeys: c.keys}, Time: testNow}
		d, err := a.Authorize(context.Background(), in)
		if err != nil || d.Allowed != c.allow {
			t.Fatalf("TagKeys %q: %+v %v; want allowed %v", c.keys, d, err, c.allow)
		}
	}
}

// TestReadsResourceTags: the host looks tags up only when a decision can
// depend on them.
func TestReadsResourceTags(t *testing.T) {
	if a := authzWithDocs(t, allowWhen(`{"StringEquals": {"sagemaker:TargetModel": "m"}}`)); a.ReadsResourceTags() {
		t.Error("no statement names a resource tag, yet ReadsResourceTags")
	}
	for _, key := range []string{"aws:ResourceTag/env", "SageMaker:resourcetag/env"} {
		if a := authzWithDocs(t, allowWhen(`{"StringEquals": {"`+key+`": "m"}}`)); !a.ReadsResourceTags() {
			t.Errorf("%s: ReadsResourceTags false", key)
		}
	}
}
