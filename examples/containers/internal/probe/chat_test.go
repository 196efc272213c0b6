package probe

import (
	"encoding/json"
	"net/http/httptest"
	"strings"
	"testing"
)

func TestChatCompletions(t *testing.T) {
	h, _ := newProbe(t, "PROBE_TAG=T")
	chat := func(body string) *httptest.ResponseRecorder { return post(h, body, "Content-Type", "application/json") }
	w := chat(`{"model":"m","messages":[{"role":"user","content":"one two three"}]}`)
	var got struct {
		Choices []struct{ Message struct{ Content string } }
	}
	if w.Code != 200 || json.Unmarshal(w.Body.Bytes(), &got) != nil || len(got.Choices) != 1 || got.Choices[0].Message.Content != "T three two one" {
		t.Fatalf("%d %s", w.Code, w.Body)
	}
	w = chat(`{"stream":true,"messages":[{"role":"user","content":"a b"}]}`)
	if w.Code != 200 || w.Header().Get("Content-Type") != "text/event-stream" || strings.Count(w.Body.String(), "data: ") != 4 || !strings.HasSuffix(w.Body.String(), "data: [DONE]\n\n") {
		t.Fatalf("%d %q", w.Code, w.Body)
	}
	if w = chat(`{"messages":[{"role":"user","content":"refuse"}]}`); w.Code != 400 || !strings.Contains(w.Body.String(), "refuses") {
		t.Fatalf("%d %s", w.Code, w.Body)
	}
	// Other JSON is echoed, as before.
	if w = chat(`{"x":1}`); w.Code != 200 || w.Body.String() != `{"x":1}T` {
		t.Fatalf("%d %s", w.Code, w.Body)
	}
}
