package mme

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"strings"
	"time"

	"github.com/mce-run/mce/internal/wire"
)

// TargetModelHeader carries the TargetModel on load, invoke and unload
// (https://docs.aws.amazon.com/sagemaker/latest/dg/mms-container-apis.html; Triton names the model after it,
// https://github.com/triton-inference-server/server/blob/main/src/sagemaker_server.cc).
const TargetModelHeader = wire.HeaderTargetModel

const (
	// maxErrorBody caps the bytes of a container answer that are read.
	maxErrorBody = 64 << 10
	// maxMessage caps the message kept from it.
	maxMessage = 1 << 10
)

// apiClient speaks the MME container API (https://docs.aws.amazon.com/sagemaker/latest/dg/mms-container-apis.html): load and unload.
type apiClient struct {
	base func() string
	hc   *http.Client
}

// newHTTPClient is the default client: contexts bound every call.
func newHTTPClient() *http.Client {
	return &http.Client{Transport: &http.Transport{
		DialContext:         (&net.Dialer{Timeout: 5 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
		MaxIdleConns:        32,
		MaxIdleConnsPerHost: 16,
		IdleConnTimeout:     90 * time.Second,
	}}
}

type loadBody struct {
	ModelName string `json:"model_name"`
	URL       string `json:"url"`
}

// load sends POST {base}/models and returns the status and the message.
func (c *apiClient) load(ctx context.Context, id, target string) (int, string, error) {
	body, err := json.Marshal(loadBody{ModelName: id, URL: "/opt/ml/models/" + id + "/model"})
	if err != nil {
		return 0, "", err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.base()+"/models", bytes.NewReader(body))
	if err != nil {
		return 0, "", err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json")
	req.Header.Set(TargetModelHeader, target)
	return c.do(req)
}

// unload sends DELETE {base}/models/{id}.
func (c *apiClient) unload(ctx context.Context, id, target string) (int, string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodDelete, c.base()+"/models/"+id, nil)
	if err != nil {
		return 0, "", err
	}
	req.Header.Set("Accept", "application/json")
	req.Header.Set(TargetModelHeader, target)
	return c.do(req)
}

// describe sends GET {base}/models/{id}: 200 when the container has the model loaded, 404 when not.
func (c *apiClient) describe(ctx context.Context, id, target string) (int, string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.base()+"/models/"+id, nil)
	if err != nil {
		return 0, "", err
	}
	req.Header.Set("Accept", "application/json")
	req.Header.Set(TargetModelHeader, target)
	return c.do(req)
}

func (c *apiClient) do(req *http.Request) (int, string, error) {
	resp, err := c.hc.Do(req)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, maxErrorBody))
	if err != nil {
		return 0, "", err
	}
	if resp.StatusCode == http.StatusOK {
		return resp.StatusCode, "", nil
	}
	return resp.StatusCode, message(data), nil
}

// message extracts {"error": "…"} (Triton's SageMaker front end) or the start of the body.
func message(data []byte) string {
	var e struct {
		Error   string `json:"error"`
		Message string `json:"message"`
	}
	s := ""
	if json.Unmarshal(data, &e) == nil {
		s = e.Error
		if s == "" {
			s = e.Message
		}
	}
	if s == "" {
		s = string(data)
	}
	s = strings.TrimSpace(strings.ToValidUTF8(s, "\uFFFD"))
	if len(s) > maxMessage {
		s = strings.ToValidUTF8(s[:maxMessage], "") + "…"
	}
	return s
}
