package host

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"
	"github.com/aws/aws-sdk-go-v2/service/cloudwatchlogs"
	"github.com/aws/aws-sdk-go-v2/service/sagemaker"
	smtypes "github.com/aws/aws-sdk-go-v2/service/sagemaker/types"
	"github.com/aws/aws-sdk-go-v2/service/sagemakerruntime"
	"github.com/rs/zerolog"

	"github.com/mce-run/mce/authz"
)

// lockedBuffer is a bytes.Buffer for a logger written from many goroutines.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// targetMatches reports whether resource is one of pattern's (see
// authz.Targets).
func targetMatches(pattern, resource string) bool {
	if pattern == authz.ResourceNone {
		return resource == "*"
	}
	var re strings.Builder
	re.WriteString("^")
	for i := 0; i < len(pattern); i++ {
		switch {
		case strings.HasPrefix(pattern[i:], "**"):
			re.WriteString(".*")
			i++
		case pattern[i] == '*':
			re.WriteString("[^:/]*")
		default:
			re.WriteString(regexp.QuoteMeta(pattern[i : i+1]))
		}
	}
	re.WriteString("$")
	return regexp.MustCompile(re.String()).MatchString(resource)
}

// TestAuthzTargetsCoverEveryDecision keeps AuthzTargets (which mce policy
// check judges statements by) and the decisions mce makes in step: every
// operation, second check, invocation and logs call is made once, and each
// decision the authorizer logs is of an action and resource the table
// holds; every pattern of every sagemaker: and s3: action is used. (The
// asynchronous path, InvokeEndpointAsync, needs S3 and is left to its
// declaration in otherTargets; the s3: reads are made by CreateModel.)
func TestAuthzTargetsCoverEveryDecision(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "creds.yaml"), []byte(`Credentials:
  - {AccessKeyId: AKIAADMIN0000EXAMPLE, SecretAccessKey: admin-secret, Arn: "arn:aws:iam::123456789012:user/admin",
     Policies: [{Statement: {Effect: Allow, Action: "*", Resource: "*"}}]}
`), 0o600); err != nil {
		t.Fatal(err)
	}
	var decisions lockedBuffer
	a, err := authz.Load(context.Background(), authz.Config{CredentialsFile: filepath.Join(dir, "creds.yaml"), Region: "us-east-1",
		Logger: zerolog.New(&decisions), DecisionCache: -1})
	if err != nil {
		t.Fatal(err)
	}
	h := newAdapterHarness(t, Config{Authz: a, Capture: newCaptureWriter(t, newCaptureStore(), nil)})
	sm, rt := h.smAs("AKIAADMIN0000EXAMPLE", "admin-secret"), h.runtimeAs("AKIAADMIN0000EXAMPLE", "admin-secret")
	ctx := context.Background()
	must := func(what string, err error) {
		t.Helper()
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
	}
	arn := func(kind, name string) *string {
		return aws.String("arn:aws:sagemaker:us-east-1:123456789012:" + kind + "/" + name)
	}
	tags := []smtypes.Tag{{Key: aws.String("team"), Value: aws.String("a")}}

	// Models, configurations and plain endpoints.
	_, err = sm.CreateModel(ctx, &sagemaker.CreateModelInput{ModelName: aws.String("m"), PrimaryContainer: &smtypes.ContainerDefinition{Image: aws.String("A")}})
	must("CreateModel", err)
	// Model data in S3: the caller's s3:GetObject on the object, and
	// s3:ListBucket with s3:GetObject under a folder (s3reads.go).
	_, err = sm.CreateModel(ctx, &sagemaker.CreateModelInput{ModelName: aws.String("s3-object"), PrimaryContainer: &smtypes.ContainerDefinition{Image: aws.String("A"),
		ModelDataUrl: aws.String("s3://models/m.tar.gz")}})
	must("CreateModel (S3 object)", err)
	_, err = sm.CreateModel(ctx, &sagemaker.CreateModelInput{ModelName: aws.String("s3-folder"), PrimaryContainer: &smtypes.ContainerDefinition{Image: aws.String("A"),
		ModelDataSource: &smtypes.ModelDataSource{S3DataSource: &smtypes.S3ModelDataSource{S3Uri: aws.String("s3://models/folder/"),
			S3DataType: smtypes.S3ModelDataTypeS3Prefix, CompressionType: smtypes.ModelCompressionTypeNone}}}})
	must("CreateModel (S3 folder)", err)
	// A data capture destination: the caller's s3:PutObject under it.
	_, err = sm.CreateEndpointConfig(ctx, &sagemaker.CreateEndpointConfigInput{EndpointConfigName: aws.String("captured"),
		ProductionVariants: []smtypes.ProductionVariant{{VariantName: aws.String("AllTraffic"), ModelName: aws.String("m"),
			InitialInstanceCount: aws.Int32(1), InstanceType: smtypes.ProductionVariantInstanceTypeMlM5Large}},
		DataCaptureConfig: sdkCapture(true, 20, "s3://capture/dc")})
	must("CreateEndpointConfig (data capture)", err)
	for _, c := range []string{"c1", "c2"} {
		_, err = sm.CreateEndpointConfig(ctx, &sagemaker.CreateEndpointConfigInput{EndpointConfigName: aws.String(c),
			ProductionVariants: []smtypes.ProductionVariant{{VariantName: aws.String("AllTraffic"), ModelName: aws.String("m"),
				InitialInstanceCount: aws.Int32(1), InstanceType: smtypes.ProductionVariantInstanceTypeMlM5Large}}})
		must("CreateEndpointConfig", err)
	}
	_, err = sm.CreateEndpoint(ctx, &sagemaker.CreateEndpointInput{EndpointName: aws.String("plain"), EndpointConfigName: aws.String("c1")})
	must("CreateEndpoint", err)
	must("wait", h.srv.WaitEndpoint(ctx, "plain"))
	_, err = sm.UpdateEndpoint(ctx, &sagemaker.UpdateEndpointInput{EndpointName: aws.String("plain"), EndpointConfigName: aws.String("c2")})
	must("UpdateEndpoint", err)
	must("wait", h.srv.WaitEndpoint(ctx, "plain"))
	_, err = sm.UpdateEndpointWeightsAndCapacities(ctx, &sagemaker.UpdateEndpointWeightsAndCapacitiesInput{EndpointName: aws.String("plain"),
		DesiredWeightsAndCapacities: []smtypes.DesiredWeightAndCapacity{{VariantName: aws.String("AllTraffic"), DesiredWeight: aws.Float32(2)}}})
	must("UpdateEndpointWeightsAndCapacities", err)
	must("wait", h.srv.WaitEndpoint(ctx, "plain"))
	_, err = sm.DescribeModel(ctx, &sagemaker.DescribeModelInput{ModelName: aws.String("m")})
	must("DescribeModel", err)
	_, err = sm.DescribeEndpointConfig(ctx, &sagemaker.DescribeEndpointConfigInput{EndpointConfigName: aws.String("c1")})
	must("DescribeEndpointConfig", err)
	_, err = sm.DescribeEndpoint(ctx, &sagemaker.DescribeEndpointInput{EndpointName: aws.String("plain")})
	must("DescribeEndpoint", err)
	_, err = sm.ListModels(ctx, &sagemaker.ListModelsInput{})
	must("ListModels", err)
	_, err = sm.ListEndpointConfigs(ctx, &sagemaker.ListEndpointConfigsInput{})
	must("ListEndpointConfigs", err)
	_, err = sm.ListEndpoints(ctx, &sagemaker.ListEndpointsInput{})
	must("ListEndpoints", err)

	// Invocations and logs.
	_, err = rt.InvokeEndpoint(ctx, &sagemakerruntime.InvokeEndpointInput{EndpointName: aws.String("plain"), Body: []byte("x")})
	must("InvokeEndpoint", err)
	st, err := rt.InvokeEndpointWithResponseStream(ctx, &sagemakerruntime.InvokeEndpointWithResponseStreamInput{EndpointName: aws.String("plain"), Body: []byte("x")})
	must("InvokeEndpointWithResponseStream", err)
	for range st.GetStream().Events() {
	}
	st.GetStream().Close()
	cw := h.logsAs("AKIAADMIN0000EXAMPLE", "admin-secret")
	group := aws.String("/aws/sagemaker/Endpoints/plain")
	_, err = cw.FilterLogEvents(ctx, &cloudwatchlogs.FilterLogEventsInput{LogGroupName: group})
	must("FilterLogEvents", err)
	streams, err := cw.DescribeLogStreams(ctx, &cloudwatchlogs.DescribeLogStreamsInput{LogGroupName: group})
	must("DescribeLogStreams", err)
	if len(streams.LogStreams) == 0 {
		t.Fatal("no log stream")
	}
	_, err = cw.GetLogEvents(ctx, &cloudwatchlogs.GetLogEventsInput{LogGroupName: group, LogStreamName: streams.LogStreams[0].LogStreamName})
	must("GetLogEvents", err)
	for _, path := range []string{"/mce/endpoints", "/mce/endpoints/plain/logs"} {
		r, _ := http.NewRequest(http.MethodGet, h.http.URL+path, nil)
		sum := sha256.Sum256(nil)
		creds := aws.Credentials{AccessKeyID: "AKIAADMIN0000EXAMPLE", SecretAccessKey: "admin-secret"}
		must("sign", v4.NewSigner().SignHTTP(ctx, creds, r, hex.EncodeToString(sum[:]), "sagemaker", "us-east-1", time.Now()))
		resp, err := h.http.Client().Do(r)
		must("GET "+path, err)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("GET %s: %d", path, resp.StatusCode)
		}
	}

	// Inference components and adapters.
	createICEndpoint(t, sm, "ics", "local", 1)
	sp := &smtypes.InferenceComponentSpecification{Container: &smtypes.InferenceComponentContainerSpecification{Image: aws.String("-b")},
		ComputeResourceRequirements: &smtypes.InferenceComponentComputeResourceRequirements{MinMemoryRequiredInMb: aws.Int32(128)}}
	must("CreateInferenceComponent", createIC(ctx, sm, "base", "ics", sp, 1))
	waitIC(t, sm, "base")
	must("CreateInferenceComponent (adapter)", createAdapter(ctx, sm, "lora", "ics", "base", "file://adapters/a.tar.gz"))
	waitIC(t, sm, "lora")
	_, err = sm.UpdateInferenceComponent(ctx, &sagemaker.UpdateInferenceComponentInput{InferenceComponentName: aws.String("lora"),
		Specification: adapterSpec("base", "file://adapters/b.tar.gz")})
	must("UpdateInferenceComponent (adapter)", err)
	waitIC(t, sm, "lora")
	_, err = sm.UpdateInferenceComponentRuntimeConfig(ctx, &sagemaker.UpdateInferenceComponentRuntimeConfigInput{InferenceComponentName: aws.String("base"),
		DesiredRuntimeConfig: &smtypes.InferenceComponentRuntimeConfig{CopyCount: aws.Int32(1)}})
	must("UpdateInferenceComponentRuntimeConfig", err)
	waitIC(t, sm, "base")
	_, err = sm.DescribeInferenceComponent(ctx, &sagemaker.DescribeInferenceComponentInput{InferenceComponentName: aws.String("base")})
	must("DescribeInferenceComponent", err)
	_, err = sm.ListInferenceComponents(ctx, &sagemaker.ListInferenceComponentsInput{})
	must("ListInferenceComponents", err)
	for _, r := range []*string{arn("model", "m"), arn("endpoint-config", "c1"), arn("endpoint", "plain"), arn("inference-component", "base")} {
		_, err = sm.AddTags(ctx, &sagemaker.AddTagsInput{ResourceArn: r, Tags: tags})
		must("AddTags", err)
		_, err = sm.ListTags(ctx, &sagemaker.ListTagsInput{ResourceArn: r})
		must("ListTags", err)
		_, err = sm.DeleteTags(ctx, &sagemaker.DeleteTagsInput{ResourceArn: r, TagKeys: []string{"team"}})
		must("DeleteTags", err)
	}
	_, err = sm.DeleteInferenceComponent(ctx, &sagemaker.DeleteInferenceComponentInput{InferenceComponentName: aws.String("lora")})
	must("DeleteInferenceComponent (adapter)", err)
	waitComponentGone(t, h, "lora")

	// Deletions: the endpoint with its component, then the rest.
	_, err = sm.DeleteEndpoint(ctx, &sagemaker.DeleteEndpointInput{EndpointName: aws.String("ics")})
	must("DeleteEndpoint (with components)", err)
	_, err = sm.DeleteEndpoint(ctx, &sagemaker.DeleteEndpointInput{EndpointName: aws.String("plain")})
	must("DeleteEndpoint", err)
	_, err = sm.DeleteEndpointConfig(ctx, &sagemaker.DeleteEndpointConfigInput{EndpointConfigName: aws.String("c2")})
	must("DeleteEndpointConfig", err)
	_, err = sm.DeleteModel(ctx, &sagemaker.DeleteModelInput{ModelName: aws.String("m")})
	must("DeleteModel", err)

	targets := AuthzTargets("us-east-1", "123456789012")
	used := map[[2]string]bool{}
	sc := bufio.NewScanner(strings.NewReader(decisions.String()))
	n := 0
	for sc.Scan() {
		var d struct{ Message, Action, Resource string }
		if err := json.Unmarshal(sc.Bytes(), &d); err != nil || d.Message != "authz decision" {
			continue
		}
		n++
		ok := false
		for _, p := range targets[d.Action] {
			if targetMatches(p, d.Resource) {
				used[[2]string{d.Action, p}] = true
				ok = true
			}
		}
		if !ok {
			t.Errorf("mce authorized %s on %s, which AuthzTargets does not hold (%q)", d.Action, d.Resource, targets[d.Action])
		}
	}
	if n < 50 {
		t.Fatalf("only %d decisions logged", n)
	}
	for action, patterns := range targets {
		if !(strings.HasPrefix(action, "sagemaker:") || strings.HasPrefix(action, "s3:")) || action == authz.ActionInvokeEndpointAsync {
			continue
		}
		for _, p := range patterns {
			if !used[[2]string{action, p}] {
				t.Errorf("AuthzTargets holds %s on %s, which no call made", action, p)
			}
		}
	}
}
