package host

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sagemakerruntime"
	"github.com/aws/aws-sdk-go-v2/service/sagemakerruntime/types"
	"github.com/aws/smithy-go"
	"github.com/rs/zerolog"

	"github.com/mce-run/mce/authz"
	"github.com/mce-run/mce/host/apierr"
)

// TestResponseStreamAuthorization: streaming is its own IAM action. A caller
// allowed sagemaker:InvokeEndpoint only is refused, naming the streaming
// action; one allowed it, with a condition on the target container, gets the
// stream (of an answer the container did not stream: a plain one is relayed
// as events too).
func TestResponseStreamAuthorization(t *testing.T) {
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "creds.yaml"), []byte(`
Credentials:
  - AccessKeyId: AKIAPLAIN0000EXAMPLE
    SecretAccessKey: plain-secret
    Arn: arn:aws:iam::123456789012:user/plain
    Policies:
      - Name: invoke-only
        Document:
          Version: "2012-10-17"
          Statement:
            - {Effect: Allow, Action: "sagemaker:InvokeEndpoint", Resource: "*"}
  - AccessKeyId: AKIASTREAM000EXAMPLE
    SecretAccessKey: stream-secret
    Arn: arn:aws:iam::123456789012:user/streamer
    Policies:
      - Name: stream-english
        Document:
          Version: "2012-10-17"
          Statement:
            - Effect: Allow
              Action: "sagemaker:InvokeEndpointWithResponseStream"
              Resource: "arn:aws:sagemaker:us-east-1:123456789012:endpoint/ab"
              Condition: {StringLike: {"sagemaker:TargetContainerHostname": "eng*"}}
`), 0o600)
	a, err := authz.Load(context.Background(), authz.Config{CredentialsFile: filepath.Join(dir, "creds.yaml"), Region: "us-east-1", Logger: zerolog.Nop()})
	if err != nil {
		t.Fatal(err)
	}
	h := newHarness(t, Config{Authz: a})
	if err := h.deploy(plan("ab", "Direct", map[string][]string{"AllTraffic": {"english:EN", "german:DE"}})); err != nil {
		t.Fatal(err)
	}
	in := func(host string) *sagemakerruntime.InvokeEndpointWithResponseStreamInput {
		return &sagemakerruntime.InvokeEndpointWithResponseStreamInput{EndpointName: aws.String("ab"),
			TargetContainerHostname: aws.String(host), Body: []byte("hello ")}
	}
	denied := func(who string, c *sagemakerruntime.Client, host string) {
		t.Helper()
		_, err := c.InvokeEndpointWithResponseStream(context.Background(), in(host))
		var ae smithy.APIError
		if !errors.As(err, &ae) || ae.ErrorCode() != apierr.CodeAccessDenied ||
			!strings.Contains(ae.ErrorMessage(), "is not authorized to perform: sagemaker:InvokeEndpointWithResponseStream on resource: arn:aws:sagemaker:us-east-1:123456789012:endpoint/ab") {
			t.Errorf("%s → %s: err = %v, want AccessDeniedException for the streaming action", who, host, err)
		}
	}
	plain := h.runtimeAs("AKIAPLAIN0000EXAMPLE", "plain-secret")
	if _, err := plain.InvokeEndpoint(context.Background(), &sagemakerruntime.InvokeEndpointInput{EndpointName: aws.String("ab"),
		TargetContainerHostname: aws.String("english"), Body: []byte("x")}); err != nil {
		t.Fatalf("plain InvokeEndpoint: %v", err)
	}
	denied("plain", plain, "english")
	streamer := h.runtimeAs("AKIASTREAM000EXAMPLE", "stream-secret")
	denied("streamer", streamer, "german")
	denied("anonymous", h.runtimeAs("", ""), "english")

	out, err := streamer.InvokeEndpointWithResponseStream(context.Background(), in("english"))
	if err != nil {
		t.Fatal(err)
	}
	defer out.GetStream().Close()
	var got strings.Builder
	for ev := range out.GetStream().Events() {
		got.Write(ev.(*types.ResponseStreamMemberPayloadPart).Value.Bytes)
	}
	if err := out.GetStream().Err(); err != nil || got.String() != "hello EN" {
		t.Errorf("stream = %q, %v; want the english container's answer", got.String(), err)
	}
}

// TestResponseStreamHangUpCancelsContainerCall: a streaming client that goes
// away before the answer began cancels the container's request.
func TestResponseStreamHangUpCancelsContainerCall(t *testing.T) {
	h := newHarness(t, Config{})
	if err := h.deploy(plan("hang", "Serial", map[string][]string{"AllTraffic": {"primary:P"}})); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	_, err := h.client.InvokeEndpointWithResponseStream(ctx, &sagemakerruntime.InvokeEndpointWithResponseStreamInput{
		EndpointName: aws.String("hang"), Body: body("x"), CustomAttributes: aws.String("sleep=10s")})
	if err == nil {
		t.Fatal("the call succeeded; want the client's deadline")
	}
	c := h.backend.container("hang/AllTraffic/primary")
	deadline := time.Now().Add(5 * time.Second)
	for c.cancelled.Load() == 0 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if c.cancelled.Load() != 1 {
		t.Error("the container's request was not cancelled when the streaming client hung up")
	}
}
