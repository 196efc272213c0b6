package host

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/sagemaker"
	smtypes "github.com/aws/aws-sdk-go-v2/service/sagemaker/types"
	"github.com/rs/zerolog"

	"github.com/mce-run/mce/authz"
	"github.com/mce-run/mce/host/store"
)

const testARNPrefix = "arn:aws:sagemaker:us-east-1:123456789012:"

// TestDescribeModelEchoesEnvironment: the SageMaker Python SDK sends
// Environment: {} for every container; DescribeModel shows it back, and a
// container sent without Environment still has none.
func TestDescribeModelEchoesEnvironment(t *testing.T) {
	h := newHarness(t, Config{})
	sm, ctx := h.sm(), context.Background()
	if _, err := sm.CreateModel(ctx, &sagemaker.CreateModelInput{ModelName: aws.String("env"),
		InferenceExecutionConfig: &smtypes.InferenceExecutionConfig{Mode: smtypes.InferenceExecutionModeDirect},
		Containers: []smtypes.ContainerDefinition{
			{ContainerHostname: aws.String("empty"), Image: aws.String("A"), Environment: map[string]string{}},
			{ContainerHostname: aws.String("absent"), Image: aws.String("A")},
			{ContainerHostname: aws.String("set"), Image: aws.String("A"), Environment: map[string]string{"K": ""}},
		}}); err != nil {
		t.Fatal(err)
	}
	out, err := sm.DescribeModel(ctx, &sagemaker.DescribeModelInput{ModelName: aws.String("env")})
	if err != nil {
		t.Fatal(err)
	}
	if len(out.Containers) != 3 {
		t.Fatalf("Containers = %d, want 3", len(out.Containers))
	}
	if env := out.Containers[0].Environment; env == nil || len(env) != 0 {
		t.Errorf("Environment {} came back as %#v", env)
	}
	if env := out.Containers[1].Environment; env != nil {
		t.Errorf("an absent Environment came back as %#v", env)
	}
	if v, ok := out.Containers[2].Environment["K"]; !ok || v != "" {
		t.Errorf("Environment {K: \"\"} came back as %#v", out.Containers[2].Environment)
	}
	if out.InferenceExecutionConfig == nil || out.InferenceExecutionConfig.Mode != smtypes.InferenceExecutionModeDirect {
		t.Errorf("InferenceExecutionConfig = %+v", out.InferenceExecutionConfig)
	}
}

func tags(kv ...string) []smtypes.Tag {
	var out []smtypes.Tag
	for i := 0; i+1 < len(kv); i += 2 {
		out = append(out, smtypes.Tag{Key: aws.String(kv[i]), Value: aws.String(kv[i+1])})
	}
	return out
}

func tagMap(ts []smtypes.Tag) map[string]string {
	m := map[string]string{}
	for _, t := range ts {
		m[aws.ToString(t.Key)] = aws.ToString(t.Value)
	}
	return m
}

func listTags(t *testing.T, sm *sagemaker.Client, arn string) map[string]string {
	t.Helper()
	var all []smtypes.Tag
	p := sagemaker.NewListTagsPaginator(sm, &sagemaker.ListTagsInput{ResourceArn: aws.String(arn), MaxResults: aws.Int32(50)})
	for p.HasMorePages() {
		page, err := p.NextPage(context.Background())
		if err != nil {
			t.Fatalf("ListTags %s: %v", arn, err)
		}
		all = append(all, page.Tags...)
	}
	return tagMap(all)
}

// TestTags: tags given at creation come back from ListTags on every kind of
// resource; AddTags adds and overwrites, DeleteTags removes, both durably,
// and a deleted resource takes its tags with it.
func TestTags(t *testing.T) {
	h := newHarness(t, Config{})
	sm, ctx := h.sm(), context.Background()
	if _, err := sm.CreateModel(ctx, &sagemaker.CreateModelInput{ModelName: aws.String("Tagged"),
		PrimaryContainer: &smtypes.ContainerDefinition{Image: aws.String("A")}, Tags: tags("team", "ml", "empty", "")}); err != nil {
		t.Fatal(err)
	}
	if _, err := sm.CreateEndpointConfig(ctx, &sagemaker.CreateEndpointConfigInput{EndpointConfigName: aws.String("tagged"),
		ProductionVariants: []smtypes.ProductionVariant{{VariantName: aws.String("AllTraffic"), ModelName: aws.String("Tagged"),
			InitialInstanceCount: aws.Int32(1), InstanceType: smtypes.ProductionVariantInstanceTypeMlM5Large}},
		Tags: tags("cfg", "1")}); err != nil {
		t.Fatal(err)
	}
	if _, err := sm.CreateEndpoint(ctx, &sagemaker.CreateEndpointInput{EndpointName: aws.String("tagged"), EndpointConfigName: aws.String("tagged"),
		Tags: tags("ep", "2")}); err != nil {
		t.Fatal(err)
	}
	waitStatus(t, sm, "tagged", smtypes.EndpointStatusInService)
	model, config, endpoint := testARNPrefix+"model/tagged", testARNPrefix+"endpoint-config/tagged", testARNPrefix+"endpoint/tagged"

	for arn, want := range map[string]string{model: "map[empty: team:ml]", config: "map[cfg:1]", endpoint: "map[ep:2]"} {
		if got := fmt.Sprint(listTags(t, sm, arn)); got != want {
			t.Errorf("ListTags %s = %s, want %s", arn, got, want)
		}
	}
	// The name in an ARN is matched as SageMaker's names are, regardless of case.
	if got := fmt.Sprint(listTags(t, sm, testARNPrefix+"model/TAGGED")); got != "map[empty: team:ml]" {
		t.Errorf("ListTags with an upper-case name = %s", got)
	}

	for _, arn := range []string{model, config, endpoint} {
		out, err := sm.AddTags(ctx, &sagemaker.AddTagsInput{ResourceArn: aws.String(arn), Tags: tags("team", "infra", "new", "x")})
		if err != nil {
			t.Fatalf("AddTags %s: %v", arn, err)
		}
		if got := fmt.Sprint(tagMap(out.Tags)); got != "map[new:x team:infra]" {
			t.Errorf("AddTags answered %s", got)
		}
		if _, err := sm.DeleteTags(ctx, &sagemaker.DeleteTagsInput{ResourceArn: aws.String(arn), TagKeys: []string{"new", "never-set"}}); err != nil {
			t.Fatalf("DeleteTags %s: %v", arn, err)
		}
	}
	for arn, want := range map[string]string{model: "map[empty: team:infra]", config: "map[cfg:1 team:infra]", endpoint: "map[ep:2 team:infra]"} {
		if got := fmt.Sprint(listTags(t, sm, arn)); got != want {
			t.Errorf("after AddTags and DeleteTags, ListTags %s = %s, want %s", arn, got, want)
		}
	}
	// Durable: the records in the store hold the tags.
	var mrec ModelRecord
	var erec EndpointRecord
	if err := h.srv.store.Get(store.Models, "tagged", &mrec); err != nil {
		t.Fatal(err)
	}
	if err := h.srv.store.Get(store.Endpoints, "tagged", &erec); err != nil {
		t.Fatal(err)
	}
	if len(mrec.Tags) != 2 || len(erec.Tags) != 2 {
		t.Errorf("stored tags: model %v, endpoint %v", mrec.Tags, erec.Tags)
	}
	// Describe does not show tags (as SageMaker), but echoes the rest.
	if _, err := sm.DescribeModel(ctx, &sagemaker.DescribeModelInput{ModelName: aws.String("tagged")}); err != nil {
		t.Fatal(err)
	}

	// Up to 50 tags, listed on one page of MaxResults 50.
	var many []smtypes.Tag
	for i := range 48 {
		many = append(many, tags(fmt.Sprintf("k%02d", i), "v")...)
	}
	if _, err := sm.AddTags(ctx, &sagemaker.AddTagsInput{ResourceArn: aws.String(config), Tags: many}); err != nil {
		t.Fatal(err)
	}
	if got := len(listTags(t, sm, config)); got != 50 {
		t.Errorf("ListTags after 48 more tags: %d, want 50", got)
	}
	_, err := sm.AddTags(ctx, &sagemaker.AddTagsInput{ResourceArn: aws.String(config), Tags: tags("one-too-many", "v")})
	if code, msg := apiCode(t, err); code != "ValidationException" || !strings.Contains(msg, "at most 50") {
		t.Errorf("a 51st tag: %s %s", code, msg)
	}

	// Deleting a resource deletes its tags: a new one of the same name starts bare.
	if _, err := sm.DeleteModel(ctx, &sagemaker.DeleteModelInput{ModelName: aws.String("tagged")}); err != nil {
		t.Fatal(err)
	}
	_, err = sm.ListTags(ctx, &sagemaker.ListTagsInput{ResourceArn: aws.String(model)})
	if code, msg := apiCode(t, err); code != "ValidationException" || !strings.Contains(msg, "not found") {
		t.Errorf("ListTags on a deleted model: %s %s", code, msg)
	}
	if _, err := sm.CreateModel(ctx, &sagemaker.CreateModelInput{ModelName: aws.String("tagged"),
		PrimaryContainer: &smtypes.ContainerDefinition{Image: aws.String("A")}}); err != nil {
		t.Fatal(err)
	}
	if got := listTags(t, sm, model); len(got) != 0 {
		t.Errorf("a recreated model has the old one's tags: %v", got)
	}
	if _, err := sm.DeleteEndpoint(ctx, &sagemaker.DeleteEndpointInput{EndpointName: aws.String("tagged")}); err != nil {
		t.Fatal(err)
	}
	if err := h.srv.DeleteEndpoint(ctx, "tagged"); err != nil && !strings.Contains(err.Error(), "Could not find") {
		t.Fatal(err)
	}
	_, err = sm.AddTags(ctx, &sagemaker.AddTagsInput{ResourceArn: aws.String(endpoint), Tags: tags("a", "b")})
	if code, msg := apiCode(t, err); code != "ValidationException" || !strings.Contains(msg, "not found") {
		t.Errorf("AddTags on a deleted endpoint: %s %s", code, msg)
	}
	if _, err := h.srv.store.Update(store.Endpoints, "tagged", func(b []byte) ([]byte, error) { return b, nil }); err != nil {
		t.Fatal(err)
	} else if ok, _ := h.srv.store.Update(store.Endpoints, "tagged", func(b []byte) ([]byte, error) { return b, nil }); ok {
		t.Error("the deleted endpoint's record came back")
	}
}

// TestTagsValidation: hostile and malformed tag calls get SageMaker's
// ValidationException and change nothing.
func TestTagsValidation(t *testing.T) {
	h := newHarness(t, Config{})
	sm, ctx := h.sm(), context.Background()
	if _, err := sm.CreateModel(ctx, &sagemaker.CreateModelInput{ModelName: aws.String("m"),
		PrimaryContainer: &smtypes.ContainerDefinition{Image: aws.String("A")}, Tags: tags("keep", "1")}); err != nil {
		t.Fatal(err)
	}
	model := testARNPrefix + "model/m"
	var fiftyOne []smtypes.Tag
	for i := range 51 {
		fiftyOne = append(fiftyOne, tags(fmt.Sprint("k", i), "")...)
	}
	adds := []struct {
		name, arn string
		tags      []smtypes.Tag
		want      string
	}{
		{"unknown model", testARNPrefix + "model/nope", tags("a", "b"), "not found"},
		{"other account", "arn:aws:sagemaker:us-east-1:000000000000:model/m", tags("a", "b"), "not found"},
		{"other region", "arn:aws:sagemaker:eu-west-1:123456789012:model/m", tags("a", "b"), "not found"},
		{"other type", testARNPrefix + "training-job/m", tags("a", "b"), "not found"},
		{"not an ARN", "m", tags("a", "b"), "not found"},
		{"long ARN", model + strings.Repeat("x", 300), tags("a", "b"), "length less than or equal to 256"},
		{"51 tags", model, fiftyOne, "length less than or equal to 50"},
		{"empty key", model, tags("", "v"), "Member must not be null"},
		{"long key", model, tags(strings.Repeat("k", 129), "v"), "length less than or equal to 128"},
		{"long value", model, tags("k", strings.Repeat("v", 257)), "length less than or equal to 256"},
		{"key pattern", model, tags("a*b", "v"), "regular expression pattern"},
		{"value pattern", model, tags("k", "a;b"), "regular expression pattern"},
		{"aws: prefix", model, tags("AWS:cloudformation:stack", "v"), "reserved"},
	}
	for _, c := range adds {
		t.Run("AddTags/"+c.name, func(t *testing.T) {
			in := &sagemaker.AddTagsInput{Tags: c.tags}
			if c.arn != "" {
				in.ResourceArn = aws.String(c.arn)
			}
			_, err := sm.AddTags(ctx, in)
			if err == nil {
				t.Fatal("accepted")
			}
			if code, msg := apiCode(t, err); code != "ValidationException" || !strings.Contains(msg, c.want) {
				t.Errorf("%s %s, want ValidationException with %q", code, msg, c.want)
			}
		})
	}
	deletes := []struct {
		name string
		keys []string
		want string
	}{
		{"empty list", []string{}, "length greater than or equal to 1"},
		{"empty key", []string{""}, "Member must not be null"},
		{"aws: prefix", []string{"aws:x"}, "reserved"},
	}
	for _, c := range deletes {
		t.Run("DeleteTags/"+c.name, func(t *testing.T) {
			_, err := sm.DeleteTags(ctx, &sagemaker.DeleteTagsInput{ResourceArn: aws.String(model), TagKeys: c.keys})
			if err == nil {
				t.Fatal("accepted")
			}
			if code, msg := apiCode(t, err); code != "ValidationException" || !strings.Contains(msg, c.want) {
				t.Errorf("%s %s, want ValidationException with %q", code, msg, c.want)
			}
		})
	}
	// Members the SDK refuses to leave out, sent as other clients may.
	for _, c := range []struct{ op, body, want string }{
		{"AddTags", `{"Tags":[{"Key":"a","Value":"b"}]}`, "Value null at 'resourceArn'"},
		{"AddTags", `{"ResourceArn":"` + model + `"}`, "Value null at 'tags'"},
		{"DeleteTags", `{"ResourceArn":"` + model + `"}`, "Value null at 'tagKeys'"},
		{"ListTags", `{}`, "Value null at 'resourceArn'"},
		{"AddTags", `{"ResourceArn":"` + model + `","Tags":[{"Key":"a","Value":"b"}],"Extra":1}`, "Extra"},
	} {
		req, _ := http.NewRequest(http.MethodPost, h.http.URL+"/", strings.NewReader(c.body))
		req.Header.Set("X-Amz-Target", "SageMaker."+c.op)
		req.Header.Set("Content-Type", "application/x-amz-json-1.1")
		resp, err := h.http.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 400 || !strings.Contains(string(b), "ValidationException") || !strings.Contains(string(b), c.want) {
			t.Errorf("%s %s: %d %s, want ValidationException with %q", c.op, c.body, resp.StatusCode, b, c.want)
		}
	}
	for _, c := range []struct {
		name string
		in   sagemaker.ListTagsInput
		want string
	}{
		{"MaxResults 10", sagemaker.ListTagsInput{ResourceArn: aws.String(model), MaxResults: aws.Int32(10)}, "between 50 and 100"},
		{"bad NextToken", sagemaker.ListTagsInput{ResourceArn: aws.String(model), NextToken: aws.String("!!")}, "NextToken"},
		{"unknown endpoint", sagemaker.ListTagsInput{ResourceArn: aws.String(testARNPrefix + "endpoint/nope")}, "not found"},
	} {
		t.Run("ListTags/"+c.name, func(t *testing.T) {
			_, err := sm.ListTags(ctx, &c.in)
			if err == nil {
				t.Fatal("accepted")
			}
			if code, msg := apiCode(t, err); code != "ValidationException" || !strings.Contains(msg, c.want) {
				t.Errorf("%s %s, want ValidationException with %q", code, msg, c.want)
			}
		})
	}
	if got := fmt.Sprint(listTags(t, sm, model)); got != "map[keep:1]" {
		t.Errorf("refused calls changed the tags: %s", got)
	}
}

// TestTagsAuthorization: tag operations are authorized on the ResourceArn
// (sagemaker:AddTags etc.), however its name is cased.
func TestTagsAuthorization(t *testing.T) {
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "creds.yaml"), []byte(`
Credentials:
  - AccessKeyId: AKIAOPS00000EXAMPLE
    SecretAccessKey: ops-secret
    Arn: arn:aws:iam::123456789012:user/ops
    Policies:
      - Name: all-but-tagging-victim
        Document:
          Version: "2012-10-17"
          Statement:
            - {Effect: Allow, Action: "sagemaker:*", Resource: "*"}
            - {Effect: Deny, Action: ["sagemaker:AddTags", "sagemaker:DeleteTags"], Resource: "arn:aws:sagemaker:us-east-1:123456789012:model/victim"}
`), 0o600)
	a, err := authz.Load(context.Background(), authz.Config{CredentialsFile: filepath.Join(dir, "creds.yaml"), Region: "us-east-1", Logger: zerolog.Nop()})
	if err != nil {
		t.Fatal(err)
	}
	h := newHarness(t, Config{Authz: a})
	sm := sagemaker.New(sagemaker.Options{Region: "us-east-1", BaseEndpoint: aws.String(h.http.URL),
		Credentials: credentials.NewStaticCredentialsProvider("AKIAOPS00000EXAMPLE", "ops-secret", ""), HTTPClient: h.http.Client()})
	ctx := context.Background()
	for _, name := range []string{"victim", "other"} {
		if _, err := sm.CreateModel(ctx, &sagemaker.CreateModelInput{ModelName: aws.String(name),
			PrimaryContainer: &smtypes.ContainerDefinition{Image: aws.String("A")}, Tags: tags("k", "v")}); err != nil {
			t.Fatal(err)
		}
	}
	for _, arn := range []string{testARNPrefix + "model/victim", testARNPrefix + "model/VICTIM"} {
		_, err := sm.AddTags(ctx, &sagemaker.AddTagsInput{ResourceArn: aws.String(arn), Tags: tags("k", "changed")})
		if code, msg := apiCode(t, err); code != "AccessDeniedException" || !strings.Contains(msg, "sagemaker:AddTags") {
			t.Errorf("AddTags %s: %s %s", arn, code, msg)
		}
		_, err = sm.DeleteTags(ctx, &sagemaker.DeleteTagsInput{ResourceArn: aws.String(arn), TagKeys: []string{"k"}})
		if code, _ := apiCode(t, err); code != "AccessDeniedException" {
			t.Errorf("DeleteTags %s: %s", arn, code)
		}
	}
	if got := fmt.Sprint(listTags(t, sm, testARNPrefix+"model/victim")); got != "map[k:v]" {
		t.Errorf("the victim's tags changed: %s", got)
	}
	if _, err := sm.AddTags(ctx, &sagemaker.AddTagsInput{ResourceArn: aws.String(testARNPrefix + "model/other"), Tags: tags("k", "changed")}); err != nil {
		t.Fatalf("AddTags other: %v", err)
	}
	if got := fmt.Sprint(listTags(t, sm, testARNPrefix+"model/other")); got != "map[k:changed]" {
		t.Errorf("other's tags: %s", got)
	}
}

// TestTagActions: the IAM actions of the tag operations are the ones
// policies name.
func TestTagActions(t *testing.T) {
	for target, want := range map[string]string{"SageMaker.AddTags": authz.ActionAddTags,
		"SageMaker.ListTags": authz.ActionListTags, "SageMaker.DeleteTags": authz.ActionDeleteTags} {
		if got, ok := authz.ControlPlaneAction(target); !ok || got != want {
			t.Errorf("ControlPlaneAction(%q) = %q, %v; want %q", target, got, ok, want)
		}
		if operations[strings.TrimPrefix(target, "SageMaker.")] == nil {
			t.Errorf("%s is not an operation", target)
		}
	}
}
