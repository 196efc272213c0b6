package main

import (
	"errors"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"

	"github.com/mce-run/mce/internal/testenv"
)

// TestOpenAIRouteOnDocker: mce serve with policies, a token from mce token,
// and the official OpenAI Go client against the probe container, whole and
// streamed; a caller whose policy lacks sagemaker:CallWithBearerToken is
// refused.
func TestOpenAIRouteOnDocker(t *testing.T) {
	cli := testenv.Docker(t)
	testenv.Image(t, "probe")
	dir := t.TempDir()
	creds := filepath.Join(dir, "creds.yaml")
	os.WriteFile(creds, []byte(`
Credentials:
  - AccessKeyId: AKIACHAT0000EXAMPLE
    SecretAccessKey: chat-secret
    Arn: arn:aws:iam::123456789012:user/chat
    Policies:
      - Name: chat
        Document:
          Version: "2012-10-17"
          Statement:
            - {Effect: Allow, Action: ["sagemaker:CallWithBearerToken", "sagemaker:InvokeEndpoint"], Resource: "arn:aws:sagemaker:us-east-1:123456789012:endpoint/ep"}
  - AccessKeyId: AKIASIGV4000EXAMPLE
    SecretAccessKey: sigv4-secret
    Arn: arn:aws:iam::123456789012:user/sigv4
    Policies:
      - Name: invoke
        Document:
          Version: "2012-10-17"
          Statement:
            - {Effect: Allow, Action: "sagemaker:InvokeEndpoint", Resource: "*"}
Anonymous:
  Policies:
    - Name: wait-for-it
      Document: '{"Version":"2012-10-17","Statement":[{"Effect":"Allow","Action":"sagemaker:ListEndpoints","Resource":"*"}]}'
`), 0o600)
	f := serveFlagsFor(t, freePort(t), endpointFile(t, `PROBE_TAG: "probe"`))
	f.credentials = creds
	ctx, url := serveInService(t, cli, f)

	tokenOf := func(key, secret string) string {
		t.Setenv("AWS_ACCESS_KEY_ID", key)
		t.Setenv("AWS_SECRET_ACCESS_KEY", secret)
		out, err := runCLI(ctx, "token", "--expires", "10m")
		if err != nil {
			t.Fatalf("mce token: %v\n%s", err, out)
		}
		return strings.TrimSpace(out)
	}
	client := func(token string) *openai.Client {
		c := openai.NewClient(option.WithBaseURL(url+"/endpoints/ep/openai/v1"), option.WithAPIKey(token), option.WithMaxRetries(0),
			option.WithRequestTimeout(20*time.Second))
		return &c
	}
	chat := client(tokenOf("AKIACHAT0000EXAMPLE", "chat-secret"))
	params := openai.ChatCompletionNewParams{Model: "probe", Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("hello from the client")}}
	got, err := chat.Chat.Completions.New(ctx, params)
	if err != nil || len(got.Choices) != 1 || got.Choices[0].Message.Content != "probe client the from hello" {
		t.Fatalf("completion: %+v, %v", got, err)
	}
	stream := chat.Chat.Completions.NewStreaming(ctx, params)
	var acc openai.ChatCompletionAccumulator
	for stream.Next() {
		acc.AddChunk(stream.Current())
	}
	if err := stream.Err(); err != nil || acc.Choices[0].Message.Content != "probe client the from hello" {
		t.Fatalf("stream: %q, %v", acc.Choices[0].Message.Content, err)
	}
	_, err = client(tokenOf("AKIASIGV4000EXAMPLE", "sigv4-secret")).Chat.Completions.New(ctx, params)
	var oe *openai.Error
	if !errors.As(err, &oe) || oe.StatusCode != http.StatusForbidden || !strings.Contains(oe.Message, "sagemaker:CallWithBearerToken") {
		t.Fatalf("a caller without CallWithBearerToken: %v", err)
	}
}
