package authz

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/open-policy-agent/opa/v1/rego"
)

const (
	testRegion  = "us-east-1"
	testAccount = "123456789012"
)

var mceARN = EndpointARN(testRegion, testAccount, "my-mce")

// authzWithDocs loads an Authorizer whose every authenticated principal has
// the given IAM documents.
func authzWithDocs(t testing.TB, docs ...string) *Authorizer {
	t.Helper()
	dir := t.TempDir()
	var names []string
	var b strings.Builder
	b.WriteString("Policies:\n")
	for i, d := range docs {
		name := fmt.Sprintf("doc%d", i)
		if err := os.WriteFile(filepath.Join(dir, name+".json"), []byte(d), 0o600); err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(&b, "  %s: %s.json\n", name, name)
		names = append(names, name)
	}
	fmt.Fprintf(&b, "Attach:\n  \"*\": [%s]\n", strings.Join(names, ", "))
	pf := filepath.Join(dir, "policies.yaml")
	if err := os.WriteFile(pf, []byte(b.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	a, err := Load(context.Background(), Config{PoliciesFile: pf, Now: func() time.Time { return testNow },
		ExtraConditionKeys: []string{"mce:Count", "mce:Flag"}, // keys of the operator tests below
		ReloadSettle:       5 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// allowWhen is one Allow statement for InvokeEndpoint on any resource with
// the given Condition JSON ("" for none).
func allowWhen(condition string) string {
	c := ""
	if condition != "" {
		c = `, "Condition": ` + condition
	}
	return `{"Version": "2012-10-17", "Statement": {"Sid": "S", "Effect": "Allow", "Action": "sagemaker:InvokeEndpoint", "Resource": "*"` + c + `}}`
}

func alice() Principal {
	p := PrincipalFromARN(aliceARN)
	p.AccessKeyID = aliceKey
	return p
}

func invoke(ctx map[string]string) Input {
	return Input{Principal: alice(), Action: ActionInvokeEndpoint, Resource: mceARN, Context: ctx, Time: testNow}
}

func TestConditionOperators(t *testing.T) {
	type req = map[string]string
	cases := []struct {
		name      string
		condition string
		ctx       req
		sourceIP  string
		want      bool
	}{
		{"StringEquals match", `{"StringEquals": {"sagemaker:TargetModel": "a.tar.gz"}}`, req{"sagemaker:TargetModel": "a.tar.gz"}, "", true},
		{"StringEquals is case-sensitive", `{"StringEquals": {"sagemaker:TargetModel": "a.tar.gz"}}`, req{"sagemaker:TargetModel": "A.tar.gz"}, "", false},
		{"StringEquals missing key", `{"StringEquals": {"sagemaker:TargetModel": "a.tar.gz"}}`, nil, "", false},
		{"StringEquals values OR", `{"StringEquals": {"sagemaker:TargetModel": ["x", "a.tar.gz"]}}`, req{"sagemaker:TargetModel": "a.tar.gz"}, "", true},
		{"key names case-insensitive", `{"StringEquals": {"SageMaker:targetmodel": "a"}}`, req{"sagemaker:TargetModel": "a"}, "", true},
		{"key names case-insensitive in request", `{"StringEquals": {"sagemaker:TargetModel": "a"}}`, req{"SAGEMAKER:TARGETMODEL": "a"}, "", true},
		{"StringNotEquals other", `{"StringNotEquals": {"sagemaker:TargetVariant": "blue"}}`, req{"sagemaker:TargetVariant": "green"}, "", true},
		{"StringNotEquals same", `{"StringNotEquals": {"sagemaker:TargetVariant": "blue"}}`, req{"sagemaker:TargetVariant": "blue"}, "", false},
		{"StringNotEquals missing key is true", `{"StringNotEquals": {"sagemaker:TargetVariant": "blue"}}`, nil, "", true},
		{"StringNotEquals values NOR", `{"StringNotEquals": {"sagemaker:TargetVariant": ["blue", "green"]}}`, req{"sagemaker:TargetVariant": "green"}, "", false},
		{"StringEqualsIgnoreCase", `{"StringEqualsIgnoreCase": {"sagemaker:TargetVariant": "Blue"}}`, req{"sagemaker:TargetVariant": "bLUE"}, "", true},
		{"StringEqualsIgnoreCase missing", `{"StringEqualsIgnoreCase": {"sagemaker:TargetVariant": "Blue"}}`, nil, "", false},
		{"StringNotEqualsIgnoreCase same", `{"StringNotEqualsIgnoreCase": {"sagemaker:TargetVariant": "Blue"}}`, req{"sagemaker:TargetVariant": "BLUE"}, "", false},
		{"StringNotEqualsIgnoreCase other", `{"StringNotEqualsIgnoreCase": {"sagemaker:TargetVariant": "Blue"}}`, req{"sagemaker:TargetVariant": "red"}, "", true},
		{"StringNotEqualsIgnoreCase missing", `{"StringNotEqualsIgnoreCase": {"sagemaker:TargetVariant": "Blue"}}`, nil, "", true},
		{"StringLike star", `{"StringLike": {"sagemaker:TargetModel": "company_a/*"}}`, req{"sagemaker:TargetModel": "company_a/m/1.tar.gz"}, "", true},
		{"StringLike star no match", `{"StringLike": {"sagemaker:TargetModel": "company_a/*"}}`, req{"sagemaker:TargetModel": "company_b/m.tar.gz"}, "", false},
		{"StringLike question", `{"StringLike": {"sagemaker:TargetModel": "v?/m"}}`, req{"sagemaker:TargetModel": "v2/m"}, "", true},
		{"StringLike question is one char", `{"StringLike": {"sagemaker:TargetModel": "v?/m"}}`, req{"sagemaker:TargetModel": "v10/m"}, "", false},
		{"StringLike inner star", `{"StringLike": {"sagemaker:TargetModel": "a*z"}}`, req{"sagemaker:TargetModel": "a/b:c*z"}, "", true},
		{"StringLike suffix", `{"StringLike": {"sagemaker:TargetModel": "*.tar.gz"}}`, req{"sagemaker:TargetModel": "m.tar.gz"}, "", true},
		{"StringLike is case-sensitive", `{"StringLike": {"sagemaker:TargetModel": "Company*"}}`, req{"sagemaker:TargetModel": "company"}, "", false},
		{"StringLike other glob syntax is literal", `{"StringLike": {"sagemaker:TargetModel": "a[bc]{d,e}\\*?"}}`, req{"sagemaker:TargetModel": "a[bc]{d,e}\\xy"}, "", true},
		{"StringLike brackets not a class", `{"StringLike": {"sagemaker:TargetModel": "a[bc]*"}}`, req{"sagemaker:TargetModel": "ab"}, "", false},
		{"StringLike missing", `{"StringLike": {"sagemaker:TargetModel": "*"}}`, nil, "", false},
		{"StringNotLike matching", `{"StringNotLike": {"sagemaker:TargetModel": "secret/*"}}`, req{"sagemaker:TargetModel": "secret/m"}, "", false},
		{"StringNotLike other", `{"StringNotLike": {"sagemaker:TargetModel": "secret/*"}}`, req{"sagemaker:TargetModel": "public/m"}, "", true},
		{"StringNotLike missing", `{"StringNotLike": {"sagemaker:TargetModel": "secret/*"}}`, nil, "", true},
		{"StringLikeIfExists missing", `{"StringLikeIfExists": {"sagemaker:TargetModel": "a/*"}}`, nil, "", true},
		{"StringLikeIfExists present match", `{"StringLikeIfExists": {"sagemaker:TargetModel": "a/*"}}`, req{"sagemaker:TargetModel": "a/x"}, "", true},
		{"StringLikeIfExists present other", `{"StringLikeIfExists": {"sagemaker:TargetModel": "a/*"}}`, req{"sagemaker:TargetModel": "b/x"}, "", false},
		{"StringEqualsIfExists present other", `{"StringEqualsIfExists": {"sagemaker:TargetVariant": "blue"}}`, req{"sagemaker:TargetVariant": "red"}, "", false},
		{"StringNotEqualsIfExists present same", `{"StringNotEqualsIfExists": {"sagemaker:TargetVariant": "blue"}}`, req{"sagemaker:TargetVariant": "blue"}, "", false},
		{"Null true, key absent", `{"Null": {"sagemaker:TargetModel": "true"}}`, nil, "", true},
		{"Null true, key present", `{"Null": {"sagemaker:TargetModel": "true"}}`, req{"sagemaker:TargetModel": "m"}, "", false},
		{"Null false, key present", `{"Null": {"sagemaker:TargetModel": false}}`, req{"sagemaker:TargetModel": "m"}, "", true},
		{"Null false, key absent", `{"Null": {"sagemaker:TargetModel": "false"}}`, nil, "", false},
		{"keys AND (both)", `{"StringEquals": {"sagemaker:TargetModel": "m", "sagemaker:TargetVariant": "v"}}`, req{"sagemaker:TargetModel": "m", "sagemaker:TargetVariant": "v"}, "", true},
		{"keys AND (one)", `{"StringEquals": {"sagemaker:TargetModel": "m", "sagemaker:TargetVariant": "v"}}`, req{"sagemaker:TargetModel": "m"}, "", false},
		{"operators AND", `{"StringEquals": {"sagemaker:TargetModel": "m"}, "StringNotEquals": {"sagemaker:TargetVariant": "v"}}`, req{"sagemaker:TargetModel": "m", "sagemaker:TargetVariant": "v"}, "", false},
		{"IpAddress in", `{"IpAddress": {"aws:SourceIp": ["10.0.0.0/8", "192.0.2.7"]}}`, nil, "10.1.2.3", true},
		{"IpAddress bare address", `{"IpAddress": {"aws:SourceIp": "192.0.2.7"}}`, nil, "192.0.2.7", true},
		{"IpAddress out", `{"IpAddress": {"aws:SourceIp": "10.0.0.0/8"}}`, nil, "192.168.1.1", false},
		{"IpAddress v6", `{"IpAddress": {"aws:SourceIp": "::1/128"}}`, nil, "::1", true},
		{"IpAddress no source", `{"IpAddress": {"aws:SourceIp": "10.0.0.0/8"}}`, nil, "", false},
		{"NotIpAddress out", `{"NotIpAddress": {"aws:SourceIp": "10.0.0.0/8"}}`, nil, "127.0.0.1", true},
		{"NotIpAddress in", `{"NotIpAddress": {"aws:SourceIp": "127.0.0.0/8"}}`, nil, "127.0.0.1", false},
		{"NotIpAddress no source", `{"NotIpAddress": {"aws:SourceIp": "10.0.0.0/8"}}`, nil, "", true},
		{"DateGreaterThan now", `{"DateGreaterThan": {"aws:CurrentTime": "2020-01-01T00:00:00Z"}}`, nil, "", true},
		{"DateLessThan now", `{"DateLessThan": {"aws:CurrentTime": "2020-01-01T00:00:00Z"}}`, nil, "", false},
		{"DateLessThanEquals epoch", `{"DateLessThanEquals": {"aws:EpochTime": 1795348800}}`, nil, "", true},
		{"DateEquals", `{"DateEquals": {"aws:CurrentTime": "2026-11-22T12:00:00Z"}}`, nil, "", true},
		{"DateNotEquals", `{"DateNotEquals": {"aws:CurrentTime": "2026-11-22T12:00:00Z"}}`, nil, "", false},
		{"DateGreaterThanEquals date only", `{"DateGreaterThanEquals": {"aws:CurrentTime": "2026-11-22"}}`, nil, "", true},
		{"NumericLessThan", `{"NumericLessThan": {"mce:Count": 10}}`, req{"mce:Count": "5"}, "", true},
		{"NumericGreaterThan", `{"NumericGreaterThan": {"mce:Count": "10"}}`, req{"mce:Count": "5"}, "", false},
		{"NumericEquals", `{"NumericEquals": {"mce:Count": "5"}}`, req{"mce:Count": "5.0"}, "", true},
		{"NumericLessThanEquals", `{"NumericLessThanEquals": {"mce:Count": "5"}}`, req{"mce:Count": "5"}, "", true},
		{"NumericGreaterThanEquals", `{"NumericGreaterThanEquals": {"mce:Count": "6"}}`, req{"mce:Count": "5"}, "", false},
		{"NumericNotEquals", `{"NumericNotEquals": {"mce:Count": "6"}}`, req{"mce:Count": "5"}, "", true},
		{"Numeric on a non-number fails", `{"NumericNotEquals": {"mce:Count": "6"}}`, req{"mce:Count": "five"}, "", false},
		{"Bool", `{"Bool": {"mce:Flag": true}}`, req{"mce:Flag": "True"}, "", true},
		{"Bool false", `{"Bool": {"mce:Flag": "true"}}`, req{"mce:Flag": "false"}, "", false},
		{"ArnLike principal", `{"ArnLike": {"aws:PrincipalArn": "arn:aws:iam::123456789012:user/*"}}`, nil, "", true},
		{"ArnEquals principal", `{"ArnEquals": {"aws:PrincipalArn": "arn:aws:iam::123456789012:user/bob"}}`, nil, "", false},
		{"ArnNotLike principal", `{"ArnNotLike": {"aws:PrincipalArn": "arn:aws:iam::*:user/bob"}}`, nil, "", true},
		{"ArnNotEquals principal", `{"ArnNotEquals": {"aws:PrincipalArn": "arn:aws:iam::123456789012:user/alice"}}`, nil, "", false},
		{"aws:username", `{"StringEquals": {"aws:username": "alice"}}`, nil, "", true},
		{"aws:username cannot be spoofed", `{"StringEquals": {"aws:username": "root"}}`, req{"aws:username": "root"}, "", false},
		{"aws:PrincipalAccount", `{"StringEquals": {"aws:PrincipalAccount": "123456789012"}}`, nil, "", true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			a := authzWithDocs(t, allowWhen(c.condition))
			in := invoke(c.ctx)
			in.SourceIP = c.sourceIP
			d, err := a.Authorize(context.Background(), in)
			if err != nil {
				t.Fatal(err)
			}
			if d.Allowed != c.want {
				t.Fatalf("Allowed = %v, want %v (%+v)", d.Allowed, c.want, d)
			}
			if d.ExplicitDeny {
				t.Fatalf("ExplicitDeny set by an Allow-only policy")
			}
			if d.Allowed && d.By != "doc0:S" {
				t.Fatalf("By = %q", d.By)
			}
		})
	}
}

func TestActionsAndResources(t *testing.T) {
	doc := func(stmts ...string) string {
		return `{"Version": "2012-10-17", "Statement": [` + strings.Join(stmts, ",") + `]}`
	}
	cases := []struct {
		name     string
		doc      string
		action   string
		resource string
		want     bool
		explicit bool
		by       string
	}{
		{"action case-insensitive", doc(`{"Effect": "Allow", "Action": "SageMaker:invokeENDPOINT", "Resource": "*"}`), ActionInvokeEndpoint, mceARN, true, false, "doc0:statement[1]"},
		{"action wildcard", doc(`{"Effect": "Allow", "Action": "sagemaker:Invoke*", "Resource": "*"}`), ActionInvokeEndpointAsync, mceARN, true, false, ""},
		{"action wildcard other", doc(`{"Effect": "Allow", "Action": "sagemaker:Describe*", "Resource": "*"}`), ActionInvokeEndpoint, mceARN, false, false, "implicit-deny"},
		{"action question mark", doc(`{"Effect": "Allow", "Action": "sagemaker:?nvokeEndpoint", "Resource": "*"}`), ActionInvokeEndpoint, mceARN, true, false, ""},
		{"action star", doc(`{"Effect": "Allow", "Action": "*", "Resource": "*"}`), ActionDeleteModel, "*", true, false, ""},
		{"action list", doc(`{"Effect": "Allow", "Action": ["sagemaker:CreateModel", "sagemaker:InvokeEndpoint"], "Resource": "*"}`), ActionInvokeEndpoint, mceARN, true, false, ""},
		{"NotAction allows others", doc(`{"Effect": "Allow", "NotAction": "sagemaker:Delete*", "Resource": "*"}`), ActionInvokeEndpoint, mceARN, true, false, ""},
		{"NotAction excludes", doc(`{"Effect": "Allow", "NotAction": "sagemaker:Delete*", "Resource": "*"}`), ActionDeleteEndpoint, mceARN, false, false, "implicit-deny"},
		{"resource exact", doc(`{"Effect": "Allow", "Action": "sagemaker:InvokeEndpoint", "Resource": "arn:aws:sagemaker:us-east-1:123456789012:endpoint/my-mce"}`), ActionInvokeEndpoint, mceARN, true, false, ""},
		{"resource case-sensitive", doc(`{"Effect": "Allow", "Action": "sagemaker:InvokeEndpoint", "Resource": "arn:aws:sagemaker:us-east-1:123456789012:endpoint/My-MCE"}`), ActionInvokeEndpoint, mceARN, false, false, ""},
		{"resource glob", doc(`{"Effect": "Allow", "Action": "sagemaker:InvokeEndpoint", "Resource": "arn:aws:sagemaker:*:123456789012:endpoint/my-*"}`), ActionInvokeEndpoint, mceARN, true, false, ""},
		{"resource glob other type", doc(`{"Effect": "Allow", "Action": "sagemaker:InvokeEndpoint", "Resource": "arn:aws:sagemaker:*:*:model/*"}`), ActionInvokeEndpoint, mceARN, false, false, ""},
		{"NotResource allows others", doc(`{"Effect": "Allow", "Action": "sagemaker:InvokeEndpoint", "NotResource": "arn:aws:sagemaker:*:*:endpoint/secret-*"}`), ActionInvokeEndpoint, mceARN, true, false, ""},
		{"NotResource excludes", doc(`{"Effect": "Allow", "Action": "sagemaker:InvokeEndpoint", "NotResource": "arn:aws:sagemaker:*:*:endpoint/secret-*"}`), ActionInvokeEndpoint, EndpointARN(testRegion, testAccount, "Secret-1"), false, false, ""},
		{"explicit deny beats allow", doc(
			`{"Sid": "All", "Effect": "Allow", "Action": "*", "Resource": "*"}`,
			`{"Sid": "NoInvoke", "Effect": "Deny", "Action": "sagemaker:InvokeEndpoint", "Resource": "*"}`),
			ActionInvokeEndpoint, mceARN, false, true, "doc0:NoInvoke"},
		{"deny of another action", doc(
			`{"Sid": "All", "Effect": "Allow", "Action": "*", "Resource": "*"}`,
			`{"Sid": "NoDelete", "Effect": "Deny", "Action": "sagemaker:Delete*", "Resource": "*"}`),
			ActionInvokeEndpoint, mceARN, true, false, "doc0:All"},
		{"deny alone is still implicit for others", doc(`{"Effect": "Deny", "Action": "sagemaker:Delete*", "Resource": "*"}`), ActionInvokeEndpoint, mceARN, false, false, "implicit-deny"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			a := authzWithDocs(t, c.doc)
			in := Input{Principal: alice(), Action: c.action, Resource: c.resource}
			d, err := a.Authorize(context.Background(), in)
			if err != nil {
				t.Fatal(err)
			}
			if d.Allowed != c.want || d.ExplicitDeny != c.explicit || (c.by != "" && d.By != c.by) {
				t.Fatalf("got %+v, want allowed=%v explicit=%v by=%q", d, c.want, c.explicit, c.by)
			}
			// The Go fast path combines matched statements as the Rego
			// rules data.mce.iam.allowed / explicit_deny do.
			if got := regoBool(t, a, in, "data.mce.iam.allowed"); got != d.Allowed {
				t.Fatalf("data.mce.iam.allowed = %v, decision %+v", got, d)
			}
			if got := regoBool(t, a, in, "data.mce.iam.explicit_deny"); got != d.ExplicitDeny {
				t.Fatalf("data.mce.iam.explicit_deny = %v, decision %+v", got, d)
			}
		})
	}
}

func regoBool(t *testing.T, a *Authorizer, in Input, query string) bool {
	t.Helper()
	st := a.st.Load()
	req, err := a.request(st, in)
	if err != nil {
		t.Fatal(err)
	}
	rs, err := rego.New(rego.Query(query), rego.Compiler(st.compiler), rego.Store(st.store), rego.ParsedInput(req.ast())).Eval(context.Background())
	if err != nil || len(rs) != 1 {
		t.Fatalf("%s: %v %v", query, rs, err)
	}
	b, ok := rs[0].Expressions[0].Value.(bool)
	if !ok {
		t.Fatalf("%s = %v", query, rs[0].Expressions[0].Value)
	}
	return b
}

func TestDecisionCache(t *testing.T) {
	ctx := context.Background()
	a := authzWithDocs(t, allowWhen(`{"StringLike": {"sagemaker:TargetModel": "a/*"}, "DateLessThan": {"aws:CurrentTime": "2026-11-22T12:00:01Z"}}`))
	if a.st.Load().cache == nil {
		t.Fatal("no cache")
	}
	model := func(m string) Input {
		in := invoke(map[string]string{KeyTargetModel: m})
		in.Time = time.Time{} // a.now: testNow
		return in
	}
	for i, c := range []struct {
		in   Input
		want bool
	}{
		{model("a/x"), true}, {model("b/x"), false}, {model("a/x"), true}, {model("b/x"), false},
		{invoke(nil), false}, {invoke(map[string]string{KeyTargetVariant: "v"}), false},
		{Input{Principal: alice(), Action: ActionInvokeEndpoint, Resource: mceARN, Context: map[string]string{KeyTargetModel: "a/x"}, Time: testNow.Add(time.Second)}, false},
		{Input{Principal: alice(), Action: ActionDeleteEndpoint, Resource: mceARN, Context: map[string]string{KeyTargetModel: "a/x"}}, false},
	} {
		d, err := a.Authorize(ctx, c.in)
		if err != nil || d.Allowed != c.want {
			t.Fatalf("%d: got %+v, %v; want allowed=%v", i, d, err, c.want)
		}
	}
	st := a.st.Load()
	// TargetVariant is named by no statement, so it is not part of the key.
	if n := len(st.cache.m); n != 5 {
		t.Fatalf("%d cached decisions, want 5", n)
	}
	// Eviction keeps at most max entries.
	small := newDecisionCache(2)
	for _, k := range []string{"a", "b", "c", "a"} {
		small.put(k, Decision{By: k})
	}
	if _, ok := small.get("a"); !ok || len(small.m) != 2 {
		t.Fatalf("cache %+v", small.m)
	}
	if _, ok := small.get("b"); ok {
		t.Fatal("oldest entry kept")
	}
}

// TestDocumentationPolicies runs the SageMaker developer guide's examples
// (testdata/policies/doc-*.json, attached in testdata/credentials.yaml).
func TestDocumentationPolicies(t *testing.T) {
	a := loadTestdata(t)
	ctx := context.Background()
	user := func(key string) Principal {
		p, ok := a.LookupAccessKey(key)
		if !ok {
			t.Fatalf("no key %s", key)
		}
		return p
	}
	alice, bob, carol, dave := user(aliceKey), user("AKIABOB00000EXAMPLE"), user("AKIACAROL000EXAMPLE"), user(tokenKey)
	mme := EndpointARN(testRegion, testAccount, "My-MME")
	host := func(h string) map[string]string { return map[string]string{KeyTargetContainerHostname: h} }
	model := func(m string) map[string]string { return map[string]string{KeyTargetModel: m} }
	cases := []struct {
		name     string
		p        Principal
		action   string
		resource string
		ctx      map[string]string
		want     bool
		explicit bool
		msg      string
	}{
		{"alice customIps", alice, ActionInvokeEndpoint, mceARN, host("customIps-1"), true, false, ""},
		{"alice common", alice, ActionInvokeEndpoint, mceARN, host("common"), true, false, ""},
		{"alice other container", alice, ActionInvokeEndpoint, mceARN, host("special"), false, false,
			"User: arn:aws:iam::123456789012:user/alice is not authorized to perform: sagemaker:InvokeEndpoint on resource: arn:aws:sagemaker:us-east-1:123456789012:endpoint/my-mce because no identity-based policy allows the sagemaker:InvokeEndpoint action"},
		{"alice no hostname", alice, ActionInvokeEndpoint, mceARN, nil, false, false, ""},
		{"alice other endpoint", alice, ActionInvokeEndpoint, mme, host("common"), false, false, ""},
		{"bob any container", bob, ActionInvokeEndpoint, mceARN, host("english"), true, false, ""},
		{"bob special", bob, ActionInvokeEndpoint, mceARN, host("special-1"), false, true,
			"User: arn:aws:iam::123456789012:user/team/bob is not authorized to perform: sagemaker:InvokeEndpoint on resource: arn:aws:sagemaker:us-east-1:123456789012:endpoint/my-mce with an explicit deny in an identity-based policy"},
		{"bob no hostname (StringLike * needs the key)", bob, ActionInvokeEndpoint, mceARN, nil, false, false, ""},
		{"carol company_a model", carol, ActionInvokeEndpoint, mme, model("company_a/model-1.tar.gz"), true, false, ""},
		{"carol common model", carol, ActionInvokeEndpoint, mme, model("common/m.tar.gz"), true, false, ""},
		{"carol company_b model", carol, ActionInvokeEndpoint, mme, model("company_b/model-1.tar.gz"), false, false, ""},
		{"carol no model", carol, ActionInvokeEndpoint, mme, nil, false, false, ""},
		{"carol describe (named policy)", carol, ActionDescribeEndpoint, mme, nil, true, false, ""},
		{"carol delete (everyone deny)", carol, ActionDeleteEndpoint, mme, nil, false, true, ""},
		{"dave inline sagemaker:*", dave, ActionCreateEndpoint, mceARN, nil, true, false, ""},
		{"dave delete denied", dave, ActionDeleteModel, ModelARN(testRegion, testAccount, "m"), nil, false, true, ""},
		{"anonymous list", Principal{Anonymous: true}, ActionListEndpoints, "*", nil, true, false, ""},
		{"anonymous invoke", Principal{Anonymous: true}, ActionInvokeEndpoint, mceARN, nil, false, false,
			"User: anonymous is not authorized to perform: sagemaker:InvokeEndpoint on resource: arn:aws:sagemaker:us-east-1:123456789012:endpoint/my-mce because no identity-based policy allows the sagemaker:InvokeEndpoint action"},
		{"unknown principal gets only *", PrincipalFromARN("arn:aws:iam::123456789012:user/zed"), ActionDescribeEndpoint, mceARN, nil, false, false, ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			in := Input{Principal: c.p, Action: c.action, Resource: c.resource, Context: c.ctx}
			d, err := a.Authorize(ctx, in)
			if err != nil {
				t.Fatal(err)
			}
			if d.Allowed != c.want || d.ExplicitDeny != c.explicit {
				t.Fatalf("got %+v, want allowed=%v explicit=%v", d, c.want, c.explicit)
			}
			if c.msg != "" && d.DeniedMessage(in) != c.msg {
				t.Fatalf("message\n got %s\nwant %s", d.DeniedMessage(in), c.msg)
			}
			if d.Allowed && d.DeniedMessage(in) != "" {
				t.Fatal("DeniedMessage of an allowed decision")
			}
		})
	}
}

func TestCustomRego(t *testing.T) {
	a := loadTestdata(t, "testdata/rego")
	ctx := context.Background()
	dave, _ := a.LookupAccessKey(tokenKey)
	ops := PrincipalFromARN("arn:aws:iam::123456789012:user/ops")
	frozen := EndpointARN(testRegion, testAccount, "frozen")
	cases := []struct {
		name     string
		in       Input
		want     bool
		explicit bool
		by       string
	}{
		{"IAM allows, custom denies", Input{Principal: dave, Action: ActionInvokeEndpoint, Resource: frozen}, false, true, "rego:mce.custom.deny: endpoint arn:aws:sagemaker:us-east-1:123456789012:endpoint/frozen is frozen"},
		{"IAM allows, custom silent", Input{Principal: dave, Action: ActionInvokeEndpoint, Resource: mceARN}, true, false, "dave-inline:statement[1]"},
		{"custom deny on context", Input{Principal: dave, Action: ActionInvokeEndpoint, Resource: mceARN, Context: map[string]string{KeyTargetModel: "../x"}}, false, true, "rego:mce.custom.deny: model names may not contain '..'"},
		{"custom allow without IAM", Input{Principal: ops, Action: ActionInvokeEndpoint, Resource: mceARN}, true, false, "rego:mce.custom.allow"},
		{"custom allow cannot beat IAM deny", Input{Principal: ops, Action: ActionDeleteEndpoint, Resource: mceARN}, false, true, "everyone-deny-delete:NoDeletes"},
		{"custom allow cannot beat custom deny", Input{Principal: ops, Action: ActionInvokeEndpoint, Resource: frozen}, false, true, ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			d, err := a.Authorize(ctx, c.in)
			if err != nil {
				t.Fatal(err)
			}
			if d.Allowed != c.want || d.ExplicitDeny != c.explicit || (c.by != "" && d.By != c.by) {
				t.Fatalf("got %+v, want allowed=%v explicit=%v by=%q", d, c.want, c.explicit, c.by)
			}
		})
	}
}

func TestFailClosed(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	// Two values for one complete rule: a conflict at evaluation time.
	if err := os.WriteFile(filepath.Join(dir, "conflict.rego"), []byte(`package mce.custom

allow if input.action == "sagemaker:InvokeEndpoint"

allow := false if input.resource != ""
`), 0o600); err != nil {
		t.Fatal(err)
	}
	a, err := Load(ctx, Config{RegoPaths: []string{dir}})
	if err != nil {
		t.Fatal(err)
	}
	in := Input{Principal: alice(), Action: ActionInvokeEndpoint, Resource: mceARN}
	d, err := a.Authorize(ctx, in)
	if err == nil || d.Allowed || !strings.Contains(err.Error(), "conflict") {
		t.Fatalf("got %+v, %v; want a denied decision and a conflict error", d, err)
	}
	if d.DeniedMessage(in) == "" {
		t.Fatal("no denied message")
	}

	// Inputs over the limits are refused, not evaluated.
	b := authzWithDocs(t, allowWhen(""))
	for name, in := range map[string]Input{
		"long action":    {Principal: alice(), Action: strings.Repeat("a", 300), Resource: mceARN},
		"empty resource": {Principal: alice(), Action: ActionInvokeEndpoint},
		"long value":     {Principal: alice(), Action: ActionInvokeEndpoint, Resource: mceARN, Context: map[string]string{KeyTargetModel: strings.Repeat("m", 3000)}},
	} {
		if d, err := b.Authorize(ctx, in); err == nil || d.Allowed {
			t.Errorf("%s: got %+v, %v; want deny with error", name, d, err)
		}
	}
}

func TestExplain(t *testing.T) {
	a := loadTestdata(t)
	bob, _ := a.LookupAccessKey("AKIABOB00000EXAMPLE")
	in := Input{Principal: bob, Action: ActionInvokeEndpoint, Resource: mceARN, Context: map[string]string{KeyTargetContainerHostname: "special-2"}}
	ex, err := a.Explain(context.Background(), in)
	if err != nil {
		t.Fatal(err)
	}
	if ex.Decision.Allowed || !ex.Decision.ExplicitDeny || len(ex.Statements) != 3 {
		t.Fatalf("got %+v", ex)
	}
	deny := ex.Statements[1]
	if deny.ID != "policies/doc-allow-all-deny-special.json:DenySpecial" || !deny.Applies || len(deny.Conditions) != 1 ||
		!deny.Conditions[0].Result || deny.Conditions[0].Request != "special-2" || !strings.HasSuffix(deny.Line, "doc-allow-all-deny-special.json:19") {
		t.Fatalf("deny statement: %+v", deny)
	}
	var b strings.Builder
	if err := ex.WriteText(&b); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"DENY (explicit deny)", "=> Deny", `StringLike sagemaker:TargetContainerHostname ["special*"]: request "special-2" -> true`} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("explanation lacks %q:\n%s", want, b.String())
		}
	}
}
