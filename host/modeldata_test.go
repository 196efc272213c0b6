package host

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sagemaker"
	smtypes "github.com/aws/aws-sdk-go-v2/service/sagemaker/types"

	"github.com/mce-run/mce/containers/artifact"
	"github.com/mce-run/mce/internal/testenv"
)

// TestCreateModelConfinesFileData reproduces issue 9, class 3 through the
// API: a caller's CreateModel naming host folders outside the model roots is
// a ValidationException naming --model-root and no host path, before
// anything is stored; data inside a root is accepted.
func TestCreateModelConfinesFileData(t *testing.T) {
	root := t.TempDir()
	if err := os.MkdirAll(filepath.Join(root, "models", "en"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("/var/run", filepath.Join(root, "run")); err != nil {
		t.Fatal(err)
	}
	f, err := artifact.NewFetcher(artifact.Options{ModelRoots: []string{root}})
	if err != nil {
		t.Fatal(err)
	}
	h := newHarness(t, Config{ModelData: f, BaseDir: root})
	sm := h.sm()
	ctx := context.Background()
	create := func(name, url string, multi bool) error {
		c := &smtypes.ContainerDefinition{Image: aws.String("img"), ModelDataUrl: aws.String(url)}
		if multi {
			c.Mode = smtypes.ContainerModeMultiModel
		}
		_, err := sm.CreateModel(ctx, &sagemaker.CreateModelInput{ModelName: aws.String(name), PrimaryContainer: c})
		return err
	}
	for i, url := range []string{"file:///var/run", "file:///", "file://../../etc", "file://run", "file:///etc/"} {
		err := create("bad"+string(rune('a'+i)), url, i == 4)
		if err == nil {
			t.Errorf("CreateModel(%q) succeeded", url)
			continue
		}
		code, msg := apiCode(t, err)
		if code != "ValidationException" || !strings.Contains(msg, "--model-root") {
			t.Errorf("CreateModel(%q) = %s %q, want a ValidationException naming --model-root", url, code, msg)
		}
		if strings.Contains(msg, root) {
			t.Errorf("message %q names the host folder %s", msg, root)
		}
	}
	if err := create("good", "file://models/en", false); err != nil {
		t.Errorf("CreateModel inside the root: %v", err)
	}
}

// TestModelDataSourceFolder: a container's ModelDataSource (an uncompressed
// S3Prefix folder, here mce's file:// form) is accepted, echoed by
// DescribeModel as sent, confined to the model roots like ModelDataUrl, and
// becomes the model data the endpoint's container is given.
func TestModelDataSourceFolder(t *testing.T) {
	root := t.TempDir()
	if err := os.MkdirAll(filepath.Join(root, "models", "llm"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(root, "models", "llm", "config.json"), []byte("{}"), 0o644); err != nil {
		t.Fatal(err)
	}
	f, err := artifact.NewFetcher(artifact.Options{ModelRoots: []string{root}})
	if err != nil {
		t.Fatal(err)
	}
	h := newHarness(t, Config{ModelData: f, BaseDir: root})
	sm, ctx := h.sm(), context.Background()
	source := func(uri string) *smtypes.ModelDataSource {
		return &smtypes.ModelDataSource{S3DataSource: &smtypes.S3ModelDataSource{S3Uri: aws.String(uri),
			S3DataType: smtypes.S3ModelDataTypeS3Prefix, CompressionType: smtypes.ModelCompressionTypeNone,
			ModelAccessConfig: &smtypes.ModelAccessConfig{AcceptEula: aws.Bool(true)}}}
	}
	_, err = sm.CreateModel(ctx, &sagemaker.CreateModelInput{ModelName: aws.String("outside"),
		PrimaryContainer: &smtypes.ContainerDefinition{Image: aws.String("A"), ModelDataSource: source("file:///etc/")}})
	if code, msg := apiCode(t, err); code != "ValidationException" || !strings.Contains(msg, "--model-root") {
		t.Errorf("ModelDataSource outside the model roots: %s %s", code, msg)
	}
	_, err = sm.CreateModel(ctx, &sagemaker.CreateModelInput{ModelName: aws.String("noslash"),
		PrimaryContainer: &smtypes.ContainerDefinition{Image: aws.String("A"), ModelDataSource: source("s3://bucket/llm")}})
	if code, msg := apiCode(t, err); code != "ValidationException" || !strings.Contains(msg, "must end with a slash") {
		t.Errorf("an S3Prefix without its slash: %s %s", code, msg)
	}

	if _, err := sm.CreateModel(ctx, &sagemaker.CreateModelInput{ModelName: aws.String("llm"),
		PrimaryContainer: &smtypes.ContainerDefinition{Image: aws.String("A"), ModelDataSource: source("file://models/llm/"),
			Environment: map[string]string{}}}); err != nil {
		t.Fatal(err)
	}
	out, err := sm.DescribeModel(ctx, &sagemaker.DescribeModelInput{ModelName: aws.String("llm")})
	if err != nil {
		t.Fatal(err)
	}
	pc := out.PrimaryContainer
	if pc == nil || pc.ModelDataSource == nil || pc.ModelDataSource.S3DataSource == nil {
		t.Fatalf("DescribeModel lost ModelDataSource: %+v", pc)
	}
	s3 := pc.ModelDataSource.S3DataSource
	if aws.ToString(s3.S3Uri) != "file://models/llm/" || s3.S3DataType != smtypes.S3ModelDataTypeS3Prefix ||
		s3.CompressionType != smtypes.ModelCompressionTypeNone || s3.ModelAccessConfig == nil || !aws.ToBool(s3.ModelAccessConfig.AcceptEula) {
		t.Errorf("DescribeModel ModelDataSource = %+v", s3)
	}
	if pc.ModelDataUrl != nil || pc.Environment == nil {
		t.Errorf("ModelDataUrl %v (want absent), Environment %v (want {})", pc.ModelDataUrl, pc.Environment)
	}

	if _, err := sm.CreateEndpointConfig(ctx, &sagemaker.CreateEndpointConfigInput{EndpointConfigName: aws.String("llm"),
		ProductionVariants: []smtypes.ProductionVariant{{VariantName: aws.String("AllTraffic"), ModelName: aws.String("llm"),
			InitialInstanceCount: aws.Int32(1), InstanceType: smtypes.ProductionVariantInstanceTypeMlM5Large}}}); err != nil {
		t.Fatal(err)
	}
	if _, err := sm.CreateEndpoint(ctx, &sagemaker.CreateEndpointInput{EndpointName: aws.String("llm"), EndpointConfigName: aws.String("llm")}); err != nil {
		t.Fatal(err)
	}
	c := h.srv.reg.get("llm").record().Plan.Variants[0].Containers[0]
	if c.ModelDataURL != "file://models/llm/" || c.BaseDir != root {
		t.Fatalf("the container's model data is %q in %q", c.ModelDataURL, c.BaseDir)
	}
	dir, err := f.Prepare(ctx, c.ModelDataURL, c.BaseDir, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	if b, err := os.ReadFile(filepath.Join(dir, "config.json")); err != nil || string(b) != "{}" {
		t.Errorf("staged folder: %q %v", b, err)
	}
}

// TestModelDataSourceS3 is TestModelDataSourceFolder's S3 form against a
// real S3 server (versitygw): CreateModel with ModelDataSource S3Prefix and a
// multi-model s3:// prefix through aws-sdk-go-v2's SageMaker client, then the
// model data the endpoint's container is given, fetched from that server:
// the folder file by file (not what sits next to the prefix), the
// multi-model prefix's TargetModel, and a missing key as ErrNotFound.
func TestModelDataSourceS3(t *testing.T) {
	s3 := testenv.S3Server(t)
	s3.Bucket(t, "models")
	s3.Put(t, "models", "llm/config.json", []byte(`{"layers":2}`))
	s3.Put(t, "models", "llm/weights/w.bin", []byte("0123"))
	s3.Put(t, "models", "llm-other/x", []byte("not under llm/"))
	f, err := artifact.NewFetcher(artifact.Options{S3: artifact.S3Options{Endpoint: s3.Endpoint, Region: s3.Region,
		UsePathStyle: true, Credentials: s3.Credentials()}})
	if err != nil {
		t.Fatal(err)
	}
	h := newHarness(t, Config{ModelData: f, BaseDir: t.TempDir()})
	sm, ctx := h.sm(), context.Background()
	if _, err := sm.CreateModel(ctx, &sagemaker.CreateModelInput{ModelName: aws.String("llm"),
		PrimaryContainer: &smtypes.ContainerDefinition{Image: aws.String("A"), ModelDataSource: &smtypes.ModelDataSource{
			S3DataSource: &smtypes.S3ModelDataSource{S3Uri: aws.String("s3://models/llm/"),
				S3DataType: smtypes.S3ModelDataTypeS3Prefix, CompressionType: smtypes.ModelCompressionTypeNone}}}}); err != nil {
		t.Fatal(err)
	}
	if _, err := sm.CreateEndpointConfig(ctx, &sagemaker.CreateEndpointConfigInput{EndpointConfigName: aws.String("llm"),
		ProductionVariants: []smtypes.ProductionVariant{{VariantName: aws.String("AllTraffic"), ModelName: aws.String("llm"),
			InitialInstanceCount: aws.Int32(1), InstanceType: smtypes.ProductionVariantInstanceTypeMlM5Large}}}); err != nil {
		t.Fatal(err)
	}
	if _, err := sm.CreateEndpoint(ctx, &sagemaker.CreateEndpointInput{EndpointName: aws.String("llm"), EndpointConfigName: aws.String("llm")}); err != nil {
		t.Fatal(err)
	}
	c := h.srv.reg.get("llm").record().Plan.Variants[0].Containers[0]
	if c.ModelDataURL != "s3://models/llm/" {
		t.Fatalf("the container's model data is %q", c.ModelDataURL)
	}
	dir, err := f.Prepare(ctx, c.ModelDataURL, c.BaseDir, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	err = filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := os.ReadFile(p)
		rel, _ := filepath.Rel(dir, p)
		got[rel] = string(b)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || got["config.json"] != `{"layers":2}` || got["weights/w.bin"] != "0123" {
		t.Errorf("staged folder = %v, want config.json and weights/w.bin only", got)
	}

	// A multi-model s3:// prefix: the container's prefix, and its TargetModel fetched from it.
	s3.Put(t, "models", "mme/a.tar.gz", gzipTar(t, "a.txt", "model a"))
	if _, err := sm.CreateModel(ctx, &sagemaker.CreateModelInput{ModelName: aws.String("mme"),
		PrimaryContainer: &smtypes.ContainerDefinition{Image: aws.String("A"), Mode: smtypes.ContainerModeMultiModel,
			ModelDataUrl: aws.String("s3://models/mme/")}}); err != nil {
		t.Fatal(err)
	}
	out, err := sm.DescribeModel(ctx, &sagemaker.DescribeModelInput{ModelName: aws.String("mme")})
	if err != nil {
		t.Fatal(err)
	}
	prefix := aws.ToString(out.PrimaryContainer.ModelDataUrl)
	dir, err = f.PrepareArchive(ctx, prefix+"a.tar.gz", "", t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	if b, err := os.ReadFile(filepath.Join(dir, "a.txt")); err != nil || string(b) != "model a" {
		t.Errorf("TargetModel a.tar.gz from %s: %q %v", prefix, b, err)
	}
	if _, err := f.PrepareArchive(ctx, prefix+"b.tar.gz", "", t.TempDir()); !errors.Is(err, artifact.ErrNotFound) {
		t.Errorf("a TargetModel with no object: %v, want ErrNotFound", err)
	}
}

// gzipTar is a .tar.gz holding one file.
func gzipTar(t *testing.T, name, body string) []byte {
	t.Helper()
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	tw := tar.NewWriter(zw)
	if err := tw.WriteHeader(&tar.Header{Name: name, Mode: 0o644, Size: int64(len(body)), Typeflag: tar.TypeReg}); err != nil {
		t.Fatal(err)
	}
	if _, err := tw.Write([]byte(body)); err != nil {
		t.Fatal(err)
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// TestComponentArtifactConfined: an inference component's
// Container.ArtifactUrl follows CreateModel's rules for file:// data: a
// folder outside the model roots is a ValidationException at
// CreateInferenceComponent (naming --model-root, no host path), and a
// relative URL resolves against the host's BaseDir in the copies' plan.
func TestComponentArtifactConfined(t *testing.T) {
	root := t.TempDir()
	f, err := artifact.NewFetcher(artifact.Options{ModelRoots: []string{root}})
	if err != nil {
		t.Fatal(err)
	}
	h, b := newICHarnessWith(t, nil, Config{ModelData: f, BaseDir: root})
	sm := h.sm()
	ctx := context.Background()
	createICEndpoint(t, sm, "shared", "ml.c5.large", 1)
	create := func(name, url string) error {
		_, err := sm.CreateInferenceComponent(ctx, &sagemaker.CreateInferenceComponentInput{InferenceComponentName: aws.String(name),
			EndpointName: aws.String("shared"), VariantName: aws.String("AllTraffic"),
			Specification: &smtypes.InferenceComponentSpecification{
				Container:                   &smtypes.InferenceComponentContainerSpecification{Image: aws.String("-c"), ArtifactUrl: aws.String(url)},
				ComputeResourceRequirements: &smtypes.InferenceComponentComputeResourceRequirements{MinMemoryRequiredInMb: aws.Int32(128)}},
			RuntimeConfig: &smtypes.InferenceComponentRuntimeConfig{CopyCount: aws.Int32(1)}})
		return err
	}
	for i, url := range []string{"file:///etc/", "file://../../etc"} {
		err := create("bad"+string(rune('a'+i)), url)
		if err == nil {
			t.Errorf("CreateInferenceComponent with ArtifactUrl %q succeeded", url)
			continue
		}
		code, msg := apiCode(t, err)
		if code != "ValidationException" || !strings.Contains(msg, "--model-root") || strings.Contains(msg, root) {
			t.Errorf("ArtifactUrl %q: %s %q, want a ValidationException naming --model-root and not %s", url, code, msg, root)
		}
	}
	if err := create("good", "file://models/a"); err != nil {
		t.Fatalf("ArtifactUrl inside the root: %v", err)
	}
	waitIC(t, sm, "good")
	b.mu.Lock()
	defer b.mu.Unlock()
	if len(b.plans) != 1 {
		t.Fatalf("%d copies launched, want 1", len(b.plans))
	}
	for _, p := range b.plans {
		if got, ok := p.Variants[0].Containers[0].ModelDataPath(); !ok || got != filepath.Join(root, "models/a") {
			t.Errorf("the copy's model data path is %q, want %s", got, filepath.Join(root, "models/a"))
		}
	}
}

// AdditionalModelDataSources through the Go SDK: accepted and echoed by
// DescribeModel as sent, confined to the model roots like ModelDataSource.
func TestAdditionalModelDataSources(t *testing.T) {
	root := t.TempDir()
	if err := os.MkdirAll(filepath.Join(root, "models", "draft"), 0o755); err != nil {
		t.Fatal(err)
	}
	f, err := artifact.NewFetcher(artifact.Options{ModelRoots: []string{root}})
	if err != nil {
		t.Fatal(err)
	}
	h := newHarness(t, Config{ModelData: f, BaseDir: root})
	sm, ctx := h.sm(), context.Background()
	source := func(channel, uri string) []smtypes.AdditionalModelDataSource {
		return []smtypes.AdditionalModelDataSource{{ChannelName: aws.String(channel), S3DataSource: &smtypes.S3ModelDataSource{S3Uri: aws.String(uri),
			S3DataType: smtypes.S3ModelDataTypeS3Prefix, CompressionType: smtypes.ModelCompressionTypeNone}}}
	}
	_, err = sm.CreateModel(ctx, &sagemaker.CreateModelInput{ModelName: aws.String("outside"),
		PrimaryContainer: &smtypes.ContainerDefinition{Image: aws.String("A"), AdditionalModelDataSources: source("draft", "file:///etc/")}})
	if code, msg := apiCode(t, err); code != "ValidationException" || !strings.Contains(msg, `channel "draft"`) || !strings.Contains(msg, "--model-root") {
		t.Errorf("a channel outside the model roots: %s %s", code, msg)
	}
	if _, err := sm.CreateModel(ctx, &sagemaker.CreateModelInput{ModelName: aws.String("spec"),
		PrimaryContainer: &smtypes.ContainerDefinition{Image: aws.String("A"), AdditionalModelDataSources: source("draft_model", "file://models/draft/")}}); err != nil {
		t.Fatal(err)
	}
	d, err := sm.DescribeModel(ctx, &sagemaker.DescribeModelInput{ModelName: aws.String("spec")})
	if err != nil {
		t.Fatal(err)
	}
	if got := d.PrimaryContainer.AdditionalModelDataSources; len(got) != 1 || aws.ToString(got[0].ChannelName) != "draft_model" ||
		aws.ToString(got[0].S3DataSource.S3Uri) != "file://models/draft/" {
		t.Errorf("DescribeModel echoes %+v", got)
	}
}
