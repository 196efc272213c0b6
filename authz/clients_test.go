package authz

import (
	"context"
	"errors"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/sagemaker"
	"github.com/aws/aws-sdk-go-v2/service/sagemakerruntime"
	"github.com/aws/smithy-go"
)

// TestRealClients signs with the SageMaker clients of aws-sdk-go-v2 (the
// runtime's restJson1 InvokeEndpoint and the control plane's awsJson1_1
// DescribeEndpoint), unmodified but for the endpoint URL.
func TestRealClients(t *testing.T) {
	a := loadTestdata(t)
	a.now = time.Now // the clients sign with the real clock
	srv := authServer(t, a)
	ctx := context.Background()
	cfg := func(key, secret string) aws.Config {
		return aws.Config{
			Region:       "us-east-1",
			Credentials:  credentials.NewStaticCredentialsProvider(key, secret, ""),
			BaseEndpoint: aws.String(srv.URL),
		}
	}
	for _, c := range []struct {
		name, key, secret, code string
	}{
		{"good", aliceKey, aliceSecret, ""},
		{"wrong secret", aliceKey, "nope", CodeInvalidSignature},
		{"unknown key", "AKIAUNKNOWN", "nope", CodeUnrecognizedClient},
	} {
		t.Run("runtime/"+c.name, func(t *testing.T) {
			rt := sagemakerruntime.NewFromConfig(cfg(c.key, c.secret))
			_, err := rt.InvokeEndpoint(ctx, &sagemakerruntime.InvokeEndpointInput{
				EndpointName:            aws.String("My-MCE"),
				Body:                    []byte("1,2,3"),
				ContentType:             aws.String("text/csv"),
				TargetContainerHostname: aws.String("customIps1"),
				TargetModel:             aws.String("company a/model v1.tar.gz"),
			})
			checkAPIError(t, err, c.code)
		})
		t.Run("control/"+c.name, func(t *testing.T) {
			cp := sagemaker.NewFromConfig(cfg(c.key, c.secret))
			_, err := cp.DescribeEndpoint(ctx, &sagemaker.DescribeEndpointInput{EndpointName: aws.String("my-mce")})
			checkAPIError(t, err, c.code)
		})
	}
}

func checkAPIError(t *testing.T, err error, code string) {
	t.Helper()
	if code == "" {
		if err != nil {
			t.Fatalf("want success, got %v", err)
		}
		return
	}
	var ae smithy.APIError
	if !errors.As(err, &ae) || ae.ErrorCode() != code {
		t.Fatalf("want API error %s, got %v", code, err)
	}
}

// TestBotocore signs with boto3/botocore (what boto3 and the aws CLI use):
// sagemaker-runtime invoke_endpoint and sagemaker describe_endpoint. It
// needs python3 with boto3 and skips without them.
func TestBotocore(t *testing.T) {
	if testing.Short() {
		t.Skip("-short")
	}
	py, err := exec.LookPath("python3")
	if err != nil {
		t.Skip("no python3")
	}
	if err := exec.Command(py, "-c", "import boto3").Run(); err != nil {
		t.Skip("python3 has no boto3")
	}
	a := loadTestdata(t)
	a.now = time.Now // the clients sign with the real clock
	srv := authServer(t, a)
	const script = `
import sys, boto3, botocore.exceptions
url, key, secret = sys.argv[1:4]
kw = dict(endpoint_url=url, region_name="us-east-1", aws_access_key_id=key, aws_secret_access_key=secret,
          config=botocore.config.Config(retries={"max_attempts": 1}))
out = []
try:
    boto3.client("sagemaker-runtime", **kw).invoke_endpoint(EndpointName="My-MCE", Body=b'{"x": [1, 2]}',
        ContentType="application/json", TargetContainerHostname="customIps1", TargetModel="company a/m v1.tar.gz",
        CustomAttributes="a=b c")
    out.append("runtime:ok")
except botocore.exceptions.ClientError as e:
    out.append("runtime:" + e.response["Error"]["Code"])
try:
    boto3.client("sagemaker", **kw).describe_endpoint(EndpointName="my-mce")
    out.append("control:ok")
except botocore.exceptions.ClientError as e:
    out.append("control:" + e.response["Error"]["Code"])
except Exception as e:  # the reply has no EndpointName etc.; signing is what matters
    out.append("control:ok" if "principal" in str(e) or "validation" in str(e).lower() else "control:" + repr(e))
print(" ".join(out))
`
	for _, c := range []struct{ key, secret, want string }{
		{aliceKey, aliceSecret, "runtime:ok control:ok"},
		{aliceKey, "wrong", "runtime:InvalidSignatureException control:InvalidSignatureException"},
		{"AKIAUNKNOWN", "x", "runtime:UnrecognizedClientException control:UnrecognizedClientException"},
	} {
		out, err := exec.Command(py, "-c", script, srv.URL, c.key, c.secret).CombinedOutput()
		if err != nil {
			t.Fatalf("python: %v\n%s", err, out)
		}
		if got := strings.TrimSpace(string(out)); got != c.want {
			t.Errorf("key %s: got %q, want %q", c.key, got, c.want)
		}
	}
}
