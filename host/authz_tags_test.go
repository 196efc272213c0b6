package host

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/sagemaker"
	smtypes "github.com/aws/aws-sdk-go-v2/service/sagemaker/types"
	"github.com/aws/aws-sdk-go-v2/service/sagemakerruntime"
	"github.com/aws/smithy-go"
	"github.com/rs/zerolog"

	"github.com/mce-run/mce/authz"
)

// devAuthz loads an authorizer with two identities: admin
// (AKIAADMIN0000EXAMPLE / admin-secret) may do everything; dev
// (AKIADEV00000EXAMPLE / dev-secret) may do every sagemaker:* action but
// what the Deny statements deny, given as YAML flow mappings, one a line.
func devAuthz(t *testing.T, denies ...string) *authz.Authorizer {
	t.Helper()
	dir := t.TempDir()
	creds := `
Credentials:
  - {AccessKeyId: AKIAADMIN0000EXAMPLE, SecretAccessKey: admin-secret, Arn: "arn:aws:iam::123456789012:user/admin",
     Policies: [{Statement: {Effect: Allow, Action: "*", Resource: "*"}}]}
  - AccessKeyId: AKIADEV00000EXAMPLE
    SecretAccessKey: dev-secret
    Arn: arn:aws:iam::123456789012:user/dev
    Policies:
      - Name: dev
        Document:
          Version: "2012-10-17"
          Statement:
            - {Effect: Allow, Action: "sagemaker:*", Resource: "*"}
`
	for _, d := range denies {
		creds += "            - " + d + "\n"
	}
	if err := os.WriteFile(filepath.Join(dir, "creds.yaml"), []byte(creds), 0o600); err != nil {
		t.Fatal(err)
	}
	a, err := authz.Load(context.Background(), authz.Config{CredentialsFile: filepath.Join(dir, "creds.yaml"), Region: "us-east-1", Logger: zerolog.Nop()})
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// tagPolicyAuthz: admin may do everything; dev may do everything except
// touch what is tagged env=prod (aws:ResourceTag), models tagged team=red
// (sagemaker:ResourceTag), give anything the tag env=prod
// (aws:RequestTag), or add or remove the tag key "owner" (aws:TagKeys).
func tagPolicyAuthz(t *testing.T) *authz.Authorizer {
	t.Helper()
	return devAuthz(t,
		`{Sid: NotProd, Effect: Deny, Action: "sagemaker:*", Resource: "*", Condition: {StringEquals: {"aws:ResourceTag/env": prod}}}`,
		`{Sid: NotRed, Effect: Deny, Action: "sagemaker:*", Resource: "*", Condition: {StringEquals: {"sagemaker:ResourceTag/team": red}}}`,
		`{Sid: NoProdTag, Effect: Deny, Action: "sagemaker:*", Resource: "*", Condition: {StringEquals: {"aws:RequestTag/env": prod}}}`,
		`{Sid: NoOwnerKey, Effect: Deny, Action: ["sagemaker:AddTags", "sagemaker:DeleteTags"], Resource: "*", Condition: {"ForAnyValue:StringEquals": {"aws:TagKeys": owner}}}`)
}

func (h *harness) smAs(key, secret string) *sagemaker.Client {
	return sagemaker.New(sagemaker.Options{Region: "us-east-1", BaseEndpoint: aws.String(h.http.URL),
		Credentials: credentials.NewStaticCredentialsProvider(key, secret, ""), HTTPClient: h.http.Client()})
}

func isAccessDenied(err error) bool {
	var ae smithy.APIError
	return errors.As(err, &ae) && ae.ErrorCode() == "AccessDeniedException"
}

// TestTagConditionsApply: tag condition keys reach the policies through the
// real SDK clients. A Deny on aws:ResourceTag/env: prod used to match
// nothing (mce set no tag key), so dev could invoke, describe, re-tag and
// delete the production endpoint.
func TestTagConditionsApply(t *testing.T) {
	h := newHarness(t, Config{Authz: tagPolicyAuthz(t)})
	ctx := context.Background()
	for _, name := range []string{"prod-ep", "dev-ep"} {
		if err := h.deploy(plan(name, "Serial", map[string][]string{"AllTraffic": {"c:A"}})); err != nil {
			t.Fatal(err)
		}
	}
	admin, dev := h.smAs("AKIAADMIN0000EXAMPLE", "admin-secret"), h.smAs("AKIADEV00000EXAMPLE", "dev-secret")
	arn := func(kind, name string) *string {
		return aws.String("arn:aws:sagemaker:us-east-1:123456789012:" + kind + "/" + name)
	}
	tag := func(k, v string) []smtypes.Tag { return []smtypes.Tag{{Key: aws.String(k), Value: aws.String(v)}} }
	if _, err := admin.AddTags(ctx, &sagemaker.AddTagsInput{ResourceArn: arn("endpoint", "prod-ep"), Tags: tag("Env", "prod")}); err != nil {
		t.Fatal(err)
	}
	if _, err := admin.AddTags(ctx, &sagemaker.AddTagsInput{ResourceArn: arn("endpoint", "dev-ep"), Tags: tag("env", "dev")}); err != nil {
		t.Fatal(err)
	}
	for _, m := range []struct{ name, team string }{{"red-model", "red"}, {"blue-model", "blue"}} {
		if _, err := admin.CreateModel(ctx, &sagemaker.CreateModelInput{ModelName: aws.String(m.name),
			PrimaryContainer: &smtypes.ContainerDefinition{Image: aws.String("A")}, Tags: tag("team", m.team)}); err != nil {
			t.Fatal(err)
		}
	}

	// The resource's tags: InvokeEndpoint (however the name is cased),
	// Describe, AddTags, DeleteTags, Delete.
	rt := h.runtimeAs("AKIADEV00000EXAMPLE", "dev-secret")
	for _, name := range []string{"prod-ep", "PROD-EP"} {
		if _, err := rt.InvokeEndpoint(ctx, &sagemakerruntime.InvokeEndpointInput{EndpointName: aws.String(name), Body: []byte("x")}); !isAccessDenied(err) {
			t.Errorf("dev invoked %s (tagged env=prod): %v", name, err)
		}
	}
	if _, err := rt.InvokeEndpoint(ctx, &sagemakerruntime.InvokeEndpointInput{EndpointName: aws.String("dev-ep"), Body: []byte("x")}); err != nil {
		t.Errorf("dev invoking dev-ep: %v", err)
	}
	denied := map[string]error{}
	_, denied["DescribeEndpoint"] = dev.DescribeEndpoint(ctx, &sagemaker.DescribeEndpointInput{EndpointName: aws.String("Prod-Ep")})
	_, denied["AddTags (re-tag)"] = dev.AddTags(ctx, &sagemaker.AddTagsInput{ResourceArn: arn("endpoint", "prod-ep"), Tags: tag("Env", "dev")})
	_, denied["DeleteTags"] = dev.DeleteTags(ctx, &sagemaker.DeleteTagsInput{ResourceArn: arn("endpoint", "PROD-EP"), TagKeys: []string{"Env"}})
	_, denied["DeleteEndpoint"] = dev.DeleteEndpoint(ctx, &sagemaker.DeleteEndpointInput{EndpointName: aws.String("prod-ep")})
	_, denied["DescribeModel (sagemaker:ResourceTag)"] = dev.DescribeModel(ctx, &sagemaker.DescribeModelInput{ModelName: aws.String("red-model")})
	_, denied["DeleteModel (sagemaker:ResourceTag)"] = dev.DeleteModel(ctx, &sagemaker.DeleteModelInput{ModelName: aws.String("Red-Model")})
	// The request's tags and tag keys.
	_, denied["CreateModel with env=prod"] = dev.CreateModel(ctx, &sagemaker.CreateModelInput{ModelName: aws.String("sneaky"),
		PrimaryContainer: &smtypes.ContainerDefinition{Image: aws.String("A")}, Tags: tag("env", "prod")})
	_, denied["AddTags env=prod"] = dev.AddTags(ctx, &sagemaker.AddTagsInput{ResourceArn: arn("endpoint", "dev-ep"), Tags: tag("env", "prod")})
	_, denied["AddTags owner"] = dev.AddTags(ctx, &sagemaker.AddTagsInput{ResourceArn: arn("endpoint", "dev-ep"), Tags: tag("owner", "me")})
	_, denied["DeleteTags owner"] = dev.DeleteTags(ctx, &sagemaker.DeleteTagsInput{ResourceArn: arn("model", "blue-model"), TagKeys: []string{"x", "owner"}})
	for what, err := range denied {
		if !isAccessDenied(err) {
			t.Errorf("dev %s: %v; want AccessDeniedException", what, err)
		}
	}
	if e := h.srv.reg.get("prod-ep"); e == nil {
		t.Fatal("dev deleted prod-ep")
	}
	if out, err := admin.ListTags(ctx, &sagemaker.ListTagsInput{ResourceArn: arn("endpoint", "prod-ep")}); err != nil || len(out.Tags) != 1 || *out.Tags[0].Value != "prod" {
		t.Fatalf("prod-ep's tags after dev's tries: %+v %v", out, err)
	}
	if _, err := dev.DescribeModel(ctx, &sagemaker.DescribeModelInput{ModelName: aws.String("sneaky")}); err == nil {
		t.Fatal("dev created a model tagged env=prod")
	}

	// What the Denies do not cover stays allowed.
	allowed := map[string]error{}
	_, allowed["DescribeEndpoint dev-ep"] = dev.DescribeEndpoint(ctx, &sagemaker.DescribeEndpointInput{EndpointName: aws.String("dev-ep")})
	_, allowed["DescribeModel blue-model"] = dev.DescribeModel(ctx, &sagemaker.DescribeModelInput{ModelName: aws.String("blue-model")})
	_, allowed["CreateModel env=dev"] = dev.CreateModel(ctx, &sagemaker.CreateModelInput{ModelName: aws.String("mine"),
		PrimaryContainer: &smtypes.ContainerDefinition{Image: aws.String("A")}, Tags: tag("env", "dev")})
	_, allowed["AddTags team"] = dev.AddTags(ctx, &sagemaker.AddTagsInput{ResourceArn: arn("endpoint", "dev-ep"), Tags: tag("team", "a")})
	_, allowed["DeleteTags team"] = dev.DeleteTags(ctx, &sagemaker.DeleteTagsInput{ResourceArn: arn("endpoint", "dev-ep"), TagKeys: []string{"team"}})
	for what, err := range allowed {
		if err != nil {
			t.Errorf("dev %s: %v", what, err)
		}
	}
}
