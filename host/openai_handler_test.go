package host

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sagemaker"
	smtypes "github.com/aws/aws-sdk-go-v2/service/sagemaker/types"
	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/rs/zerolog"

	"github.com/mce-run/mce/authz"
)

// chatClient is the official OpenAI Go client pointed at a route of h, with
// token as its API key.
func (h *harness) chatClient(path, token string) *openai.Client {
	c := openai.NewClient(option.WithBaseURL(h.http.URL+path), option.WithAPIKey(token),
		option.WithHTTPClient(h.http.Client()), option.WithMaxRetries(0), option.WithRequestTimeout(20*time.Second))
	return &c
}

func chat(text string) openai.ChatCompletionNewParams {
	return openai.ChatCompletionNewParams{Model: "anything", Messages: []openai.ChatCompletionMessageParamUnion{
		openai.SystemMessage("reverse the words"), openai.UserMessage(text)}}
}

// wantOpenAIError checks that err is OpenAI's error with status, code and
// a message containing says.
func wantOpenAIError(t *testing.T, err error, status int, code, says string) {
	t.Helper()
	var oe *openai.Error
	if !errors.As(err, &oe) {
		t.Fatalf("error = %v (%T), want an OpenAI API error %d", err, err, status)
	}
	if oe.StatusCode != status || oe.Code != code || !strings.Contains(oe.Message, says) {
		t.Fatalf("error %d %q %q (type %q), want %d %q saying %q", oe.StatusCode, oe.Code, oe.Message, oe.Type, status, code, says)
	}
}

// The official OpenAI client, pointed at an endpoint's route, gets the
// container's answer, whole and streamed; the container's errors and mce's
// refusals come back in OpenAI's shape.
func TestOpenAIRouteWithTheOpenAIClient(t *testing.T) {
	h := newHarness(t, Config{})
	if err := h.deploy(plan("chat", "Serial", map[string][]string{"AllTraffic": {"primary:openai"}})); err != nil {
		t.Fatal(err)
	}
	c := h.chatClient("/endpoints/chat/openai/v1", "unused")
	ctx := context.Background()

	var raw *http.Response
	got, err := c.Chat.Completions.New(ctx, chat("one two three"), option.WithResponseInto(&raw))
	if err != nil {
		t.Fatal(err)
	}
	if len(got.Choices) != 1 || got.Choices[0].Message.Content != "three two one" || got.Model != "primary" {
		t.Fatalf("completion = %+v", got)
	}
	if v := raw.Header.Get("X-Amzn-Invoked-Production-Variant"); v != "AllTraffic" {
		t.Errorf("invoked variant = %q", v)
	}

	stream := c.Chat.Completions.NewStreaming(ctx, chat("a b c d e"))
	var acc openai.ChatCompletionAccumulator
	chunks := 0
	for stream.Next() {
		acc.AddChunk(stream.Current())
		chunks++
	}
	if err := stream.Err(); err != nil {
		t.Fatal(err)
	}
	if chunks != 5 || acc.Choices[0].Message.Content != "e d c b a" {
		t.Fatalf("%d chunks, content %q", chunks, acc.Choices[0].Message.Content)
	}

	// The container's own refusal: its status, SageMaker's ModelError
	// quoting its body.
	_, err = c.Chat.Completions.New(ctx, chat("refuse"))
	wantOpenAIError(t, err, http.StatusBadRequest, "ModelError", "primary refuses")

	// A stream the container breaks ends in an error the client raises.
	stream = c.Chat.Completions.NewStreaming(ctx, chat("break now"))
	n := 0
	for stream.Next() {
		n++
	}
	if stream.Err() == nil {
		t.Fatalf("a broken stream ended without an error after %d chunks", n)
	}

	// InvokeEndpoint's target headers choose a Direct container (an A/B test).
	if err := h.deploy(plan("ab", "Direct", map[string][]string{"AllTraffic": {"english:openai", "german:openai"}})); err != nil {
		t.Fatal(err)
	}
	ab := h.chatClient("/endpoints/ab/openai/v1", "unused")
	for _, ctr := range []string{"english", "german"} {
		got, err := ab.Chat.Completions.New(ctx, chat("x y"), option.WithHeader("X-Amzn-SageMaker-Target-Container-Hostname", ctr))
		if err != nil || got.Model != ctr || got.Choices[0].Message.Content != "y x" {
			t.Fatalf("%s: %+v, %v", ctr, got, err)
		}
	}
	_, err = ab.Chat.Completions.New(ctx, chat("x"))
	wantOpenAIError(t, err, http.StatusBadRequest, "ValidationError", "TargetContainerHostname")
	_, err = ab.Chat.Completions.New(ctx, chat("x"), option.WithHeader("X-Amzn-SageMaker-Target-Container-Hostname", "bad name!"))
	wantOpenAIError(t, err, http.StatusBadRequest, "ValidationError", "failed to satisfy constraint")

	// mce's refusals.
	_, err = h.chatClient("/endpoints/nope/openai/v1", "unused").Chat.Completions.New(ctx, chat("x"))
	wantOpenAIError(t, err, http.StatusBadRequest, "ValidationError", "Endpoint nope of account")
	_, err = h.chatClient("/endpoints/chat/inference-components/ic/openai/v1", "unused").Chat.Completions.New(ctx, chat("x"))
	wantOpenAIError(t, err, http.StatusBadRequest, "ValidationError", "hosts no inference components")
	_, err = c.Chat.Completions.New(ctx, chat("x"), option.WithHeader("X-Amzn-SageMaker-Inference-Component", "ic"))
	wantOpenAIError(t, err, http.StatusBadRequest, "ValidationError", "names the inference component in its URL")
	_, err = c.Completions.New(ctx, openai.CompletionNewParams{Model: "m", Prompt: openai.CompletionNewParamsPromptUnion{OfString: openai.String("x")}})
	wantOpenAIError(t, err, http.StatusNotFound, "UnknownOperationException", "serves POST .../openai/v1/chat/completions only")
}

// What the route refuses of a raw request, each in OpenAI's envelope.
func TestOpenAIRouteRefusesBadRequests(t *testing.T) {
	h := newHarness(t, Config{})
	if err := h.deploy(plan("chat", "Serial", map[string][]string{"AllTraffic": {"primary:openai"}})); err != nil {
		t.Fatal(err)
	}
	url := h.http.URL + "/endpoints/chat/openai/v1/chat/completions"
	for name, c := range map[string]struct {
		method, ct, body string
		status           int
		says             string
	}{
		"GET":            {http.MethodGet, "", "", http.StatusMethodNotAllowed, "take POST"},
		"not JSON":       {http.MethodPost, "application/json", "hello", http.StatusBadRequest, "must be a JSON object"},
		"JSON array":     {http.MethodPost, "application/json", "[1]", http.StatusBadRequest, "must be a JSON object"},
		"cut JSON":       {http.MethodPost, "application/json", `{"messages": [`, http.StatusBadRequest, "must be a JSON object"},
		"stream string":  {http.MethodPost, "application/json", `{"stream": "yes"}`, http.StatusBadRequest, "'stream' must be"},
		"form":           {http.MethodPost, "application/x-www-form-urlencoded", `{}`, http.StatusUnsupportedMediaType, "Content-Type is application/json"},
		"too big":        {http.MethodPost, "application/json", `{"x":"` + strings.Repeat("a", MaxPayload) + `"}`, http.StatusRequestEntityTooLarge, ""},
		"container says": {http.MethodPost, "", `{"messages": []}`, http.StatusBadRequest, "not a chat completion"},
	} {
		req, _ := http.NewRequest(c.method, url, strings.NewReader(c.body))
		if c.ct != "" {
			req.Header.Set("Content-Type", c.ct)
		}
		resp, err := h.http.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		var env struct {
			Error struct{ Message, Type, Code string } `json:"error"`
		}
		if resp.StatusCode != c.status || json.Unmarshal(b, &env) != nil || !strings.Contains(env.Error.Message, c.says) || env.Error.Type == "" {
			t.Errorf("%s: %d %s; want %d saying %q", name, resp.StatusCode, b, c.status, c.says)
		}
	}
}

// With policies in force the route takes bearer tokens only, and a caller
// needs both sagemaker:CallWithBearerToken and sagemaker:InvokeEndpoint.
func TestOpenAIRouteBearerTokensAndPolicies(t *testing.T) {
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "creds.yaml"), []byte(`
Credentials:
  - AccessKeyId: AKIABOTH0000EXAMPLE
    SecretAccessKey: both-secret
    Arn: arn:aws:iam::123456789012:user/both
    Policies:
      - Name: both
        Document:
          Version: "2012-10-17"
          Statement:
            - {Effect: Allow, Action: ["sagemaker:CallWithBearerToken", "sagemaker:InvokeEndpoint"], Resource: "*"}
  - AccessKeyId: AKIAINVOKE00EXAMPLE
    SecretAccessKey: invoke-secret
    Arn: arn:aws:iam::123456789012:user/invoker
    Policies:
      - Name: invoke-only
        Document:
          Version: "2012-10-17"
          Statement:
            - {Effect: Allow, Action: "sagemaker:InvokeEndpoint", Resource: "*"}
  - AccessKeyId: AKIATOKEN000EXAMPLE
    SecretAccessKey: token-secret
    Arn: arn:aws:iam::123456789012:user/tokens
    Policies:
      - Name: tokens-only
        Document:
          Version: "2012-10-17"
          Statement:
            - {Effect: Allow, Action: "sagemaker:CallWithBearerToken", Resource: "*"}
`), 0o600)
	a, err := authz.Load(context.Background(), authz.Config{CredentialsFile: filepath.Join(dir, "creds.yaml"), Region: "us-east-1", Logger: zerolog.Nop()})
	if err != nil {
		t.Fatal(err)
	}
	h := newHarness(t, Config{Authz: a})
	if err := h.deploy(plan("chat", "Serial", map[string][]string{"AllTraffic": {"primary:openai"}})); err != nil {
		t.Fatal(err)
	}
	token := func(key, secret string, at time.Time, life time.Duration) string {
		tok, err := authz.MakeBearerToken(context.Background(), aws.Credentials{AccessKeyID: key, SecretAccessKey: secret}, "us-east-1", life, at)
		if err != nil {
			t.Fatal(err)
		}
		return tok
	}
	ctx := context.Background()
	both := h.chatClient("/endpoints/chat/openai/v1", token("AKIABOTH0000EXAMPLE", "both-secret", time.Now(), time.Hour))
	if got, err := both.Chat.Completions.New(ctx, chat("hello world")); err != nil || got.Choices[0].Message.Content != "world hello" {
		t.Fatalf("allowed caller: %+v, %v", got, err)
	}
	_, err = h.chatClient("/endpoints/chat/openai/v1", token("AKIAINVOKE00EXAMPLE", "invoke-secret", time.Now(), time.Hour)).Chat.Completions.New(ctx, chat("x"))
	wantOpenAIError(t, err, http.StatusForbidden, "AccessDeniedException", "sagemaker:CallWithBearerToken on resource: arn:aws:sagemaker:us-east-1:123456789012:endpoint/chat")
	_, err = h.chatClient("/endpoints/chat/openai/v1", token("AKIATOKEN000EXAMPLE", "token-secret", time.Now(), time.Hour)).Chat.Completions.New(ctx, chat("x"))
	wantOpenAIError(t, err, http.StatusForbidden, "AccessDeniedException", "sagemaker:InvokeEndpoint")
	_, err = h.chatClient("/endpoints/chat/openai/v1", token("AKIABOTH0000EXAMPLE", "both-secret", time.Now().Add(-2*time.Hour), time.Hour)).Chat.Completions.New(ctx, chat("x"))
	wantOpenAIError(t, err, http.StatusUnauthorized, "InvalidSignatureException", "expired")
	_, err = h.chatClient("/endpoints/chat/openai/v1", token("AKIABOTH0000EXAMPLE", "not-the-secret", time.Now(), time.Hour)).Chat.Completions.New(ctx, chat("x"))
	wantOpenAIError(t, err, http.StatusUnauthorized, "InvalidSignatureException", "signature does not match")
	_, err = h.chatClient("/endpoints/chat/openai/v1", "sk-not-a-sagemaker-token").Chat.Completions.New(ctx, chat("x"))
	wantOpenAIError(t, err, http.StatusUnauthorized, "IncompleteSignatureException", "starts with sagemaker-api-key-")

	// A SigV4-signed request is refused: the route takes bearer tokens.
	body := []byte(`{"model":"m","messages":[{"role":"user","content":"x"}]}`)
	req, _ := http.NewRequest(http.MethodPost, h.http.URL+"/endpoints/chat/openai/v1/chat/completions", bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	resp, b := h.signedDo(t, req, body, "sagemaker", "AKIABOTH0000EXAMPLE", "both-secret")
	if resp.StatusCode != http.StatusUnauthorized || !strings.Contains(string(b), "not a SigV4 signature") {
		t.Errorf("SigV4: %d %s", resp.StatusCode, b)
	}
	// Nobody: an anonymous caller, whom no policy allows.
	_, err = h.chatClient("/endpoints/chat/openai/v1", "").Chat.Completions.New(ctx, chat("x"), option.WithHeaderDel("Authorization"))
	wantOpenAIError(t, err, http.StatusForbidden, "AccessDeniedException", "anonymous")
}

// An endpoint of inference components is called through the component's
// path; the bare endpoint path says to name one.
func TestOpenAIRouteToInferenceComponents(t *testing.T) {
	h, _ := newICHarness(t, nil)
	sm := h.sm()
	ctx := context.Background()
	if _, err := sm.CreateModel(ctx, &sagemaker.CreateModelInput{ModelName: aws.String("chat-model"),
		PrimaryContainer: &smtypes.ContainerDefinition{Image: aws.String("openai")}}); err != nil {
		t.Fatal(err)
	}
	createICEndpoint(t, sm, "shared", "ml.g5.12xlarge", 1)
	if err := createIC(ctx, sm, "chat-ic", "shared", icSpec("chat-model", 1, 1024, 0), 1); err != nil {
		t.Fatal(err)
	}
	if d := waitIC(t, sm, "chat-ic"); d.InferenceComponentStatus != smtypes.InferenceComponentStatusInService {
		t.Fatalf("component %s", d.InferenceComponentStatus)
	}
	got, err := h.chatClient("/endpoints/shared/inference-components/chat-ic/openai/v1", "unused").Chat.Completions.New(ctx, chat("to the component"))
	if err != nil || got.Choices[0].Message.Content != "component the to" {
		t.Fatalf("%+v, %v", got, err)
	}
	_, err = h.chatClient("/endpoints/shared/openai/v1", "unused").Chat.Completions.New(ctx, chat("x"))
	wantOpenAIError(t, err, http.StatusBadRequest, "ValidationError", "hosts inference components: name one in the URL")
	_, err = h.chatClient("/endpoints/shared/inference-components/nope/openai/v1", "unused").Chat.Completions.New(ctx, chat("x"))
	wantOpenAIError(t, err, http.StatusBadRequest, "ValidationError", "nope")
}
