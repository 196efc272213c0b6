package docker_test

import (
	"context"
	"errors"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/rs/zerolog"

	"github.com/mce-run/mce/containers/artifact"
	"github.com/mce-run/mce/containers/docker"
	"github.com/mce-run/mce/containers/gpu"
	"github.com/mce-run/mce/internal/testenv"
)

// oneGPU is NVML reporting one GPU.
func oneGPU() *gpu.Inventory {
	dev := &mock.Device{
		GetUUIDFunc:       func() (string, nvml.Return) { return "GPU-00000000-0000-0000-0000-000000000001", nvml.SUCCESS },
		GetNameFunc:       func() (string, nvml.Return) { return "Fake GPU", nvml.SUCCESS },
		GetMemoryInfoFunc: func() (nvml.Memory, nvml.Return) { return nvml.Memory{Total: 1 << 30, Free: 1 << 30}, nvml.SUCCESS },
	}
	return gpu.NewInventory(&mock.Interface{
		InitFunc:                   func() nvml.Return { return nvml.SUCCESS },
		ShutdownFunc:               func() nvml.Return { return nvml.SUCCESS },
		DeviceGetCountFunc:         func() (int, nvml.Return) { return 1, nvml.SUCCESS },
		DeviceGetHandleByIndexFunc: func(int) (nvml.Device, nvml.Return) { return dev, nvml.SUCCESS },
	})
}

// silentS3 accepts connections and never answers.
func silentS3(t *testing.T) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		var held []net.Conn
		defer func() {
			for _, c := range held {
				c.Close()
			}
		}()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			held = append(held, c)
		}
	}()
	return "http://" + ln.Addr().String()
}

// TestPreflightFindsEverything runs the pre-flight on the real engine with
// --pull=if-missing: an ECR image whose registry credentials cannot be
// found (no registry or AWS call is made), a multi-container variant whose
// image lacks SageMaker's bind-to-port label, more GPUs than the host has,
// and S3 model data on a store that never answers. Every problem comes
// back, each with a fix, within the bound, and nothing is created.
func TestPreflightFindsEverything(t *testing.T) {
	cli := testenv.Docker(t)
	probe := testenv.Image(t, "probe")
	instance := testenv.Instance(t)
	f, err := artifact.NewFetcher(artifact.Options{S3: artifact.S3Options{Endpoint: silentS3(t), Region: "us-east-1", UsePathStyle: true,
		Credentials: credentials.NewStaticCredentialsProvider("AKIDTEST", "secret", "")}})
	if err != nil {
		t.Fatal(err)
	}
	var awsCalls int
	rt, err := docker.New(context.Background(), docker.Options{
		Client: cli, Instance: instance, StateDir: t.TempDir(), Fetcher: f, GPUs: oneGPU(), Logger: zerolog.Nop(),
		PullPolicy: docker.PullIfMissing,
		Registry: docker.RegistryOptions{AWSConfig: func(ctx context.Context, region string) (aws.Config, error) {
			return aws.Config{Region: region, Credentials: aws.CredentialsProviderFunc(func(context.Context) (aws.Credentials, error) {
				awsCalls++
				return aws.Credentials{}, errors.New("no credentials in this test")
			})}, nil
		}},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		rt.Close()
		if c, n := testenv.Leftovers(t, cli, instance); c+n > 0 {
			t.Errorf("left behind %d containers and %d networks", c, n)
		}
	})
	ecr := "123456789012.dkr.ecr.us-east-1.amazonaws.com/absent-preflight:1"
	spec := docker.EndpointSpec{Name: "pf", Generation: 1, Variants: []docker.VariantSpec{
		{Name: "ecr", Copies: 1, Containers: []docker.ContainerSpec{{Hostname: "a", Image: ecr}}},
		{Name: "chain", Copies: 1, Containers: []docker.ContainerSpec{
			{Hostname: "first", Image: probe},
			{Hostname: "second", Image: "mce-lease:1"}, // present, without the label
		}},
		{Name: "gpu", Copies: 1, Containers: []docker.ContainerSpec{{Hostname: "g", Image: probe, GPUs: gpu.Request{Count: 2},
			ModelDataURL: "s3://models/m.tar.gz"}}},
	}}
	start := time.Now()
	problems := rt.Preflight(context.Background(), spec, docker.PreflightOptions{CheckTimeout: 300 * time.Millisecond, Timeout: 2 * time.Second})
	took := time.Since(start)
	var lines []string
	for _, p := range problems {
		lines = append(lines, p.String())
		if p.Fix == "" {
			t.Errorf("problem without a fix: %s", p)
		}
	}
	got := strings.Join(lines, "\n")
	t.Logf("%d problems in %s:\n%s", len(problems), took, got)
	if took > 2*time.Second {
		t.Errorf("pre-flight took %s, past its 2 s bound", took)
	}
	if len(problems) != 4 {
		t.Errorf("%d problems, want 4", len(problems))
	}
	for _, want := range []string{
		`container "a" (variant "ecr"): image "` + ecr + `" must be pulled, but the credentials for registry 123456789012.dkr.ecr.us-east-1.amazonaws.com could not be resolved`,
		"ecr:GetAuthorizationToken",
		`container "second" (variant "chain"): image "mce-lease:1" does not carry the label com.amazonaws.sagemaker.capabilities.accept-bind-to-port=true`,
		`container "g" (variant "gpu"): GPU requested (count=2) but not enough GPUs: this host has 1 GPU`,
		`container "g" (variant "gpu"): model data "s3://models/m.tar.gz": S3 did not answer within 300ms`,
	} {
		if !strings.Contains(got, want) {
			t.Errorf("lacks %q", want)
		}
	}
	if awsCalls == 0 {
		t.Error("the ECR credentials were never looked up")
	}
}

// TestPreflightNeverPullsNoRegistry: under --pull=never a missing ECR image
// is reported with how to get it, and neither ECR nor the registry is asked
// for anything.
func TestPreflightNeverPullsNoRegistry(t *testing.T) {
	cli := testenv.Docker(t)
	instance := testenv.Instance(t)
	var awsCalls int
	rt, err := docker.New(context.Background(), docker.Options{
		Client: cli, Instance: instance, StateDir: t.TempDir(), Logger: zerolog.Nop(), PullPolicy: docker.PullNever,
		Registry: docker.RegistryOptions{AWSConfig: func(ctx context.Context, region string) (aws.Config, error) {
			awsCalls++
			return aws.Config{}, errors.New("must not be called")
		}},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rt.Close() })
	ecr := "763104351884.dkr.ecr.us-east-1.amazonaws.com/pytorch-inference:0.0.0-absent"
	problems := rt.Preflight(context.Background(), docker.EndpointSpec{Name: "pf", Generation: 1, Variants: []docker.VariantSpec{
		{Name: "v", Copies: 1, Containers: []docker.ContainerSpec{{Hostname: "c", Image: ecr}}}}}, docker.PreflightOptions{})
	if len(problems) != 1 || problems[0].Check != docker.CheckImage {
		t.Fatalf("problems = %v, want the missing image alone", problems)
	}
	for _, want := range []string{"pull policy: never", "--pull=if-missing", "aws ecr get-login-password --region us-east-1",
		"docker login --username AWS --password-stdin 763104351884.dkr.ecr.us-east-1.amazonaws.com"} {
		if !strings.Contains(problems[0].String(), want) {
			t.Errorf("%q lacks %q", problems[0], want)
		}
	}
	if awsCalls != 0 {
		t.Errorf("the pre-flight looked up ECR credentials %d times under --pull=never", awsCalls)
	}
}
