package host_test

import (
	"encoding/json"
	"errors"
	"path/filepath"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sagemakerruntime"
	"github.com/aws/aws-sdk-go-v2/service/sagemakerruntime/types"
)

// TestFrameworkStreamingExampleOnDocker: examples/streaming deployed as its
// README says. Through InvokeEndpoint (the whole answer) the model writes, for
// each sample's seed, exactly the text the training script generated
// in-process; a request the script refuses is a ModelError carrying its 400.
// (The chunk-by-chunk behaviour is tested straight to the container in
// examples/containers/framework.)
func TestFrameworkStreamingExampleOnDocker(t *testing.T) {
	root := frameworkSetup(t)
	var want struct {
		Samples []struct {
			Prompt      string  `json:"prompt"`
			MaxTokens   int     `json:"max_tokens"`
			Temperature float64 `json:"temperature"`
			Seed        int64   `json:"seed"`
			Text        string  `json:"text"`
		}
	}
	readJSON(t, filepath.Join(root, "build/models/framework/textgen-expected.json"), &want)
	if len(want.Samples) == 0 {
		t.Fatal("textgen-expected.json has no samples")
	}
	c, _ := dockerHostURL(t, filepath.Join(root, "examples/streaming/endpoint.yaml"))
	for i, s := range want.Samples {
		body, _ := json.Marshal(map[string]any{"prompt": s.Prompt, "max_tokens": s.MaxTokens,
			"temperature": s.Temperature, "seed": s.Seed})
		out, err := invoke(t, c, &sagemakerruntime.InvokeEndpointInput{EndpointName: aws.String("textgen"),
			ContentType: aws.String("application/json"), Body: body})
		if err != nil {
			t.Fatalf("sample %d: %v", i, err)
		}
		if string(out.Body) != s.Text || aws.ToString(out.ContentType) != "text/plain; charset=utf-8" {
			t.Errorf("sample %d: %q (%s), the training script generated %q", i, out.Body, aws.ToString(out.ContentType), s.Text)
		}
	}
	_, err := invoke(t, c, &sagemakerruntime.InvokeEndpointInput{EndpointName: aws.String("textgen"),
		ContentType: aws.String("application/json"), Body: []byte(`{"prompt": "x", "max_tokens": 100000}`)})
	var me *types.ModelError
	if !errors.As(err, &me) || aws.ToInt32(me.OriginalStatusCode) != 400 ||
		!strings.Contains(aws.ToString(me.OriginalMessage), "max_tokens must be between 1 and 512") {
		t.Errorf("max_tokens 100000: %v, want a ModelError with the script's 400", err)
	}
}
