package host

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sagemaker"
	smtypes "github.com/aws/aws-sdk-go-v2/service/sagemaker/types"
	"github.com/aws/aws-sdk-go-v2/service/sagemakerruntime"
	"github.com/rs/zerolog"

	"github.com/mce-run/mce/authz"
	"github.com/mce-run/mce/containers/artifact"
	"github.com/mce-run/mce/internal/testenv"
)

// s3ReadsAuthz: admin may do everything; dev may do every sagemaker:*
// action and read the bucket "models" (s3:GetObject, s3:ListBucket), but
// nothing of the bucket "secrets" (s3:*) nor models/team/secret.bin.
func s3ReadsAuthz(t *testing.T) *authz.Authorizer {
	t.Helper()
	path := filepath.Join(t.TempDir(), "creds.yaml")
	if err := os.WriteFile(path, []byte(`
Credentials:
  - {AccessKeyId: AKIAADMIN0000EXAMPLE, SecretAccessKey: admin-secret, Arn: "arn:aws:iam::123456789012:user/admin",
     Policies: [{Statement: {Effect: Allow, Action: "*", Resource: "*"}}]}
  - AccessKeyId: AKIADEV00000EXAMPLE
    SecretAccessKey: dev-secret
    Arn: arn:aws:iam::123456789012:user/dev
    Policies:
      - Version: "2012-10-17"
        Statement:
          - {Effect: Allow, Action: ["sagemaker:*", "s3:GetObject", "s3:ListBucket"], Resource: ["arn:aws:sagemaker:*", "arn:aws:s3:::models", "arn:aws:s3:::models/*"]}
          - {Effect: Deny, Action: "s3:*", Resource: ["arn:aws:s3:::secrets", "arn:aws:s3:::secrets/*"]}
          - {Effect: Deny, Action: "s3:GetObject", Resource: "arn:aws:s3:::models/team/secret.bin"}
`), 0o600); err != nil {
		t.Fatal(err)
	}
	a, err := authz.Load(context.Background(), authz.Config{CredentialsFile: path, Region: "us-east-1", Logger: zerolog.Nop()})
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// TestS3ReadsAuthorizedForCaller (issue 26 item 6): mce reads model data
// with its own S3 identity, so a principal denied s3:* on a bucket read a
// secret from it through a model's ModelDataUrl, an inference component's
// ArtifactUrl, an adapter's and SAGEMAKER_SUBMIT_DIRECTORY. Each call that
// makes mce read S3 now needs the caller's s3:GetObject (and, for a
// folder or multi-model prefix, s3:ListBucket and every object its
// statements single out under it) with the same answer whether the object
// exists or not; keys with ., .. or empty segments are refused for
// everyone. The server is a real S3 (versitygw) holding the secret: what
// an allowed call stores is read back from it as the engine would.
func TestS3ReadsAuthorizedForCaller(t *testing.T) {
	s3 := testenv.S3Server(t)
	for _, b := range []string{"models", "secrets"} {
		s3.Bucket(t, b)
	}
	s3.Put(t, "secrets", "key.txt", []byte("the secret"))
	s3.Put(t, "models", "m.tar.gz", gzipTar(t, "m.txt", "model"))
	s3.Put(t, "models", "team/secret.bin", []byte("team secret"))
	s3.Put(t, "models", "team/w.bin", []byte("weights"))
	s3.Put(t, "models", "public/w.bin", []byte("weights"))
	f, err := artifact.NewFetcher(artifact.Options{S3: artifact.S3Options{Endpoint: s3.Endpoint, Region: s3.Region,
		UsePathStyle: true, Credentials: s3.Credentials()}})
	if err != nil {
		t.Fatal(err)
	}
	h, _ := newICHarnessWith(t, nil, Config{ModelData: f, BaseDir: t.TempDir(), Authz: s3ReadsAuthz(t)})
	dev, admin := h.smAs("AKIADEV00000EXAMPLE", "dev-secret"), h.smAs("AKIAADMIN0000EXAMPLE", "admin-secret")
	ctx := context.Background()
	createICEndpoint(t, admin, "shared", "ml.c5.large", 1)

	n := 0
	model := func(c *sagemaker.Client, d smtypes.ContainerDefinition) error {
		n++
		if d.Image == nil {
			d.Image = aws.String("A")
		}
		_, err := c.CreateModel(ctx, &sagemaker.CreateModelInput{ModelName: aws.String("m" + string(rune('a'+n))), PrimaryContainer: &d})
		return err
	}
	prefix := func(url string) *smtypes.ModelDataSource {
		return &smtypes.ModelDataSource{S3DataSource: &smtypes.S3ModelDataSource{S3Uri: aws.String(url),
			S3DataType: smtypes.S3ModelDataTypeS3Prefix, CompressionType: smtypes.ModelCompressionTypeNone}}
	}
	component := func(c *sagemaker.Client, name string, k smtypes.InferenceComponentContainerSpecification) error {
		if k.Image == nil {
			k.Image = aws.String("-c")
		}
		_, err := c.CreateInferenceComponent(ctx, &sagemaker.CreateInferenceComponentInput{InferenceComponentName: aws.String(name),
			EndpointName: aws.String("shared"), VariantName: aws.String("AllTraffic"),
			Specification: &smtypes.InferenceComponentSpecification{Container: &k,
				ComputeResourceRequirements: &smtypes.InferenceComponentComputeResourceRequirements{MinMemoryRequiredInMb: aws.Int32(128)}},
			RuntimeConfig: &smtypes.InferenceComponentRuntimeConfig{CopyCount: aws.Int32(1)}})
		return err
	}
	adapter := func(c *sagemaker.Client, name, url string) error {
		_, err := c.CreateInferenceComponent(ctx, &sagemaker.CreateInferenceComponentInput{InferenceComponentName: aws.String(name),
			EndpointName: aws.String("shared"), Specification: &smtypes.InferenceComponentSpecification{BaseInferenceComponentName: aws.String("base"),
				Container: &smtypes.InferenceComponentContainerSpecification{ArtifactUrl: aws.String(url)}}})
		return err
	}
	update := func(c *sagemaker.Client, url string) error {
		_, err := c.UpdateInferenceComponent(ctx, &sagemaker.UpdateInferenceComponentInput{InferenceComponentName: aws.String("base"),
			Specification: &smtypes.InferenceComponentSpecification{
				Container:                   &smtypes.InferenceComponentContainerSpecification{Image: aws.String("-c"), ArtifactUrl: aws.String(url)},
				ComputeResourceRequirements: &smtypes.InferenceComponentComputeResourceRequirements{MinMemoryRequiredInMb: aws.Int32(128)}}})
		return err
	}
	submitDir := map[string]string{"SAGEMAKER_SUBMIT_DIRECTORY": "s3://secrets/key.txt"}
	if err := component(admin, "base", smtypes.InferenceComponentContainerSpecification{ArtifactUrl: aws.String("s3://models/m.tar.gz")}); err != nil {
		t.Fatal(err)
	}
	waitIC(t, admin, "base")

	// Refused, each before anything reads S3, the same for a missing object.
	for what, call := range map[string]func() error{
		"ModelDataUrl": func() error {
			return model(dev, smtypes.ContainerDefinition{ModelDataUrl: aws.String("s3://secrets/key.txt")})
		},
		"ModelDataUrl, no such object": func() error {
			return model(dev, smtypes.ContainerDefinition{ModelDataUrl: aws.String("s3://secrets/nothing.txt")})
		},
		"ModelDataSource S3Prefix": func() error { return model(dev, smtypes.ContainerDefinition{ModelDataSource: prefix("s3://secrets/")}) },
		"S3Prefix holding a denied object": func() error {
			return model(dev, smtypes.ContainerDefinition{ModelDataSource: prefix("s3://models/team/")})
		},
		"S3Prefix of the whole bucket": func() error { return model(dev, smtypes.ContainerDefinition{ModelDataSource: prefix("s3://models/")}) },
		"multi-model prefix": func() error {
			return model(dev, smtypes.ContainerDefinition{Mode: smtypes.ContainerModeMultiModel, ModelDataUrl: aws.String("s3://secrets")})
		},
		"SAGEMAKER_SUBMIT_DIRECTORY": func() error { return model(dev, smtypes.ContainerDefinition{Environment: submitDir}) },
		"component ArtifactUrl": func() error {
			return component(dev, "ic1", smtypes.InferenceComponentContainerSpecification{ArtifactUrl: aws.String("s3://secrets/key.txt")})
		},
		"component ArtifactUrl folder": func() error {
			return component(dev, "ic2", smtypes.InferenceComponentContainerSpecification{ArtifactUrl: aws.String("s3://secrets/")})
		},
		"component SUBMIT_DIRECTORY": func() error {
			return component(dev, "ic3", smtypes.InferenceComponentContainerSpecification{Environment: submitDir})
		},
		"adapter ArtifactUrl":               func() error { return adapter(dev, "a1", "s3://secrets/key.txt") },
		"UpdateInferenceComponent":          func() error { return update(dev, "s3://secrets/key.txt") },
		"UpdateInferenceComponent, missing": func() error { return update(dev, "s3://secrets/nothing.txt") },
	} {
		err := call()
		code, msg := "", ""
		if err != nil {
			code, msg = apiCode(t, err)
		}
		if code != "AccessDeniedException" || !strings.Contains(msg, "is not authorized to perform: s3:") ||
			!strings.Contains(msg, "arn:aws:s3:::") || strings.Contains(msg, "not found") || strings.Contains(msg, "exist") {
			t.Errorf("%s: %v; want AccessDeniedException naming the s3: action and ARN", what, err)
		}
	}
	// ., .. and empty key segments: refused for everyone, admin included.
	for what, call := range map[string]func() error{
		"..": func() error {
			return model(admin, smtypes.ContainerDefinition{ModelDataUrl: aws.String("s3://models/x/../../secrets/key.txt")})
		},
		".": func() error {
			return model(admin, smtypes.ContainerDefinition{ModelDataUrl: aws.String("s3://models/./m.tar.gz")})
		},
		"empty": func() error {
			return model(admin, smtypes.ContainerDefinition{ModelDataUrl: aws.String("s3://models//m.tar.gz")})
		},
		"S3Prefix ..": func() error {
			return model(admin, smtypes.ContainerDefinition{ModelDataSource: prefix("s3://models/../secrets/")})
		},
		"component ..": func() error {
			return component(admin, "ic4", smtypes.InferenceComponentContainerSpecification{ArtifactUrl: aws.String("s3://models/../x")})
		},
		"adapter ..": func() error { return adapter(admin, "a2", "s3://models/a/../b") },
		"SUBMIT_DIRECTORY ..": func() error {
			return model(admin, smtypes.ContainerDefinition{Environment: map[string]string{"SAGEMAKER_SUBMIT_DIRECTORY": "s3://models/a/../code.tar.gz"}})
		},
		"as dev, a denied key": func() error {
			return model(dev, smtypes.ContainerDefinition{ModelDataUrl: aws.String("s3://models/a/../../secrets/key.txt")})
		},
	} {
		err := call()
		code, msg := "", ""
		if err != nil {
			code, msg = apiCode(t, err)
		}
		if code != "ValidationException" || !strings.Contains(msg, "path segment") {
			t.Errorf("%s: %v; want a ValidationException about the key's path segment", what, err)
		}
	}

	// Allowed: what dev may read, read back from S3 as the engine would.
	if err := model(dev, smtypes.ContainerDefinition{ModelDataUrl: aws.String("s3://models/m.tar.gz")}); err != nil {
		t.Fatalf("dev's own model data: %v", err)
	}
	if err := model(dev, smtypes.ContainerDefinition{ModelDataSource: prefix("s3://models/public/")}); err != nil {
		t.Fatalf("dev's own folder: %v", err)
	}
	if err := component(dev, "mine", smtypes.InferenceComponentContainerSpecification{ArtifactUrl: aws.String("s3://models/public/")}); err != nil {
		t.Fatalf("dev's component: %v", err)
	}
	if err := update(dev, "s3://models/m.tar.gz"); err != nil {
		t.Fatalf("dev's update: %v", err)
	}
	// The admin's model of the secret serves the admin (what dev's model did before).
	if err := model(admin, smtypes.ContainerDefinition{ModelDataUrl: aws.String("s3://secrets/key.txt")}); err != nil {
		t.Fatalf("admin: %v", err)
	}
	out, err := admin.DescribeModel(ctx, &sagemaker.DescribeModelInput{ModelName: aws.String("m" + string(rune('a'+n)))})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.Prepare(ctx, aws.ToString(out.PrimaryContainer.ModelDataUrl), "", t.TempDir()); !errors.Is(err, artifact.ErrInvalidArchive) {
		t.Errorf("reading the admin's model data back: %v, want the secret (not an archive)", err)
	}
}

// TestS3KeySegmentsRefusedForAsyncInput: InvokeEndpointAsync's InputLocation
// follows the same rule as model data: an empty path segment is refused
// too (it was refused for . and .. only).
func TestS3KeySegmentsRefusedForAsyncInput(t *testing.T) {
	a := newAsyncHarness(t, Config{}, 1)
	for _, in := range []string{"s3://async/in//x", "s3://async//in/x", "s3://async/in/../x"} {
		_, err := a.submit(t, a.client, &sagemakerruntime.InvokeEndpointAsyncInput{InputLocation: aws.String(in)})
		code, msg := apiCode(t, err)
		if code != "ValidationError" || !strings.Contains(msg, "path segment") {
			t.Errorf("InputLocation %s: %s %q, want a ValidationError about the path segment", in, code, msg)
		}
	}
}
