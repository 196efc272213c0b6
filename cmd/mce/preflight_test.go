package main

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/mce-run/mce/internal/testenv"
)

// TestServePreflightListsEveryProblem: serve -f checks every endpoint of its
// files before starting anything and exits 1 listing every problem of every
// endpoint, each with what to do.
func TestServePreflightListsEveryProblem(t *testing.T) {
	cli := testenv.Docker(t)
	testenv.Image(t, "probe")
	empty := t.TempDir()
	t.Setenv("AWS_EC2_METADATA_DISABLED", "true")
	t.Setenv("AWS_CONFIG_FILE", filepath.Join(empty, "config"))
	t.Setenv("AWS_SHARED_CREDENTIALS_FILE", filepath.Join(empty, "credentials"))
	for _, k := range []string{"AWS_PROFILE", "AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN",
		"AWS_CONTAINER_CREDENTIALS_FULL_URI", "AWS_CONTAINER_CREDENTIALS_RELATIVE_URI", "AWS_WEB_IDENTITY_TOKEN_FILE"} {
		t.Setenv(k, "")
		os.Unsetenv(k)
	}
	file := filepath.Join(t.TempDir(), "notebook.yaml")
	os.WriteFile(file, []byte(`
Models:
  - ModelName: gpu-model
    PrimaryContainer: {Image: "mce-test/absent-preflight:1", ModelDataUrl: "file://missing/model.tar.gz"}
  - ModelName: s3-model
    PrimaryContainer: {Image: "mce-example/probe:latest", ModelDataUrl: "s3://my-bucket/model.tar.gz"}
EndpointConfigs:
  - EndpointConfigName: gpu-config
    ProductionVariants: [{VariantName: AllTraffic, ModelName: gpu-model, InitialInstanceCount: 1, InstanceType: ml.p4d.24xlarge}]
  - EndpointConfigName: s3-config
    ProductionVariants: [{VariantName: AllTraffic, ModelName: s3-model, InitialInstanceCount: 1, InstanceType: ml.m5.large}]
Endpoints:
  - {EndpointName: gpu-ep, EndpointConfigName: gpu-config}
  - {EndpointName: s3-ep, EndpointConfigName: s3-config}
`), 0o644)
	f := serveFlagsFor(t, freePort(t), file)
	start := time.Now()
	err := serve(context.Background(), f)
	took := time.Since(start)
	var ee *exitError
	if !errors.As(err, &ee) || ee.code != 1 {
		t.Fatalf("serve = %v, want exit 1 listing the problems", err)
	}
	t.Logf("serve exited after %s:\n%s", took, ee.msg)
	for _, want := range []string{
		"4 problems in 2 endpoints", "nothing was started",
		`endpoint "gpu-ep"`, `endpoint "s3-ep"`,
		"mce-test/absent-preflight:1", "docker pull mce-test/absent-preflight:1",
		"InstanceType ml.p4d.24xlarge asks for 8 GPUs (from the instance type)", "Resources.Gpus: 0",
		`model data "file://missing/model.tar.gz" not found`,
		`container "primary" (variant "AllTraffic"): its model data is on S3, but no AWS credentials`, "AWS_ACCESS_KEY_ID",
		"fix: ",
	} {
		if !strings.Contains(ee.msg, want) {
			t.Errorf("the message lacks %q", want)
		}
	}
	if took > 20*time.Second {
		t.Errorf("serve took %s to report the problems", took)
	}
	if c, n := testenv.Leftovers(t, cli, f.instance); c+n > 0 {
		t.Errorf("left behind %d containers, %d networks", c, n)
	}
}

// TestServePreflightMissingExampleModels (issue 33): serving a Go example
// before `make models` said its data was "outside the model roots" and
// sent the user to move files and add --model-root, when the data was only
// missing. The layout is the repository's (examples/NAME/endpoint.yaml
// naming file://../../build/…), nothing built: each is reported missing,
// with the command that builds it, and none as outside the roots.
func TestServePreflightMissingExampleModels(t *testing.T) {
	testenv.Docker(t)
	testenv.Image(t, "probe")
	top := t.TempDir()
	os.MkdirAll(filepath.Join(top, "examples", "go-ab-test"), 0o755)
	os.MkdirAll(filepath.Join(top, "build", "models", "framework"), 0o755) // what make demo leaves
	file := filepath.Join(top, "examples", "go-ab-test", "endpoint.yaml")
	os.WriteFile(file, []byte(`
Models:
  - ModelName: ab
    Containers:
      - {ContainerHostname: english, Image: "mce-example/probe:latest", ModelDataUrl: "file://../../build/models/sentiment-en.tar.gz"}
      - {ContainerHostname: cancer, Image: "mce-example/probe:latest", ModelDataUrl: "file://../../build/models/framework/cancer-v1.tar.gz"}
    InferenceExecutionConfig: {Mode: Direct}
  - ModelName: mme
    PrimaryContainer: {Image: "mce-example/probe:latest", Mode: MultiModel, ModelDataUrl: "file://../../build/mme-models/"}
EndpointConfigs:
  - EndpointConfigName: ab
    ProductionVariants: [{VariantName: AllTraffic, ModelName: ab, InitialInstanceCount: 1, InstanceType: ml.m5.large}]
  - EndpointConfigName: mme
    ProductionVariants: [{VariantName: AllTraffic, ModelName: mme, InitialInstanceCount: 1, InstanceType: ml.m5.large}]
Endpoints:
  - {EndpointName: ab-test, EndpointConfigName: ab}
  - {EndpointName: mme, EndpointConfigName: mme}
`), 0o644)
	err := serve(context.Background(), serveFlagsFor(t, freePort(t), file))
	var ee *exitError
	if !errors.As(err, &ee) || ee.code != 1 {
		t.Fatalf("serve = %v, want exit 1 listing the problems", err)
	}
	t.Logf("serve exited with:\n%s", ee.msg)
	for _, want := range []string{
		"3 problems in 2 endpoints",
		"model data \"file://../../build/models/sentiment-en.tar.gz\" not found: no such file or folder (one of mce's example models, which `make models` builds)",
		"fix: run `make models` in mce's repository",
		"model data \"file://../../build/models/framework/cancer-v1.tar.gz\" not found: no such file or folder (one of mce's example models, which `make framework-models` builds)",
		"fix: run `make framework-models` in mce's repository",
		"model data \"file://../../build/mme-models/\" not found: no such file or folder (one of mce's example models, which `scripts/mme-models.sh` builds)",
		"fix: run `scripts/mme-models.sh` in mce's repository",
	} {
		if !strings.Contains(ee.msg, want) {
			t.Errorf("the message lacks %q", want)
		}
	}
	for _, wrong := range []string{"outside the model roots", "--model-root", top} {
		if strings.Contains(ee.msg, wrong) {
			t.Errorf("the message says %q", wrong)
		}
	}
}
