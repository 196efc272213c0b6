package probe

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"

	"github.com/mce-run/mce/examples/containers/internal/smserve"
)

// chatRequest is what the probe reads of an OpenAI chat completion.
type chatRequest struct {
	Stream   bool `json:"stream"`
	Messages []struct {
		Role    string `json:"role"`
		Content string `json:"content"`
	} `json:"messages"`
}

// isChat reports whether a JSON body is an OpenAI chat completion, which
// the probe answers (chat) instead of echoing it.
func isChat(contentType string, body []byte) bool {
	return strings.HasPrefix(contentType, "application/json") && bytes.Contains(body, []byte(`"messages"`))
}

// chat answers a chat completion as an OpenAI-compatible server does, the
// way SageMaker's LLM containers answer one posted to /invocations: the
// reply is the last message's words in reverse order (PROBE_TAG first when
// set), one JSON document, or with "stream": true server-sent events of one
// word each and then "data: [DONE]". A last message "refuse" is a 400 in
// OpenAI's error shape.
func (h *Handler) chat(w http.ResponseWriter, body []byte) {
	var req chatRequest
	if err := json.Unmarshal(body, &req); err != nil || len(req.Messages) == 0 {
		smserve.WriteJSON(w, http.StatusBadRequest, map[string]any{"error": map[string]any{"message": "probe: not a chat completion", "type": "BadRequestError", "code": 400}})
		return
	}
	last := req.Messages[len(req.Messages)-1].Content
	if last == "refuse" {
		smserve.WriteJSON(w, http.StatusBadRequest, map[string]any{"error": map[string]any{"message": "probe " + h.hostname + " refuses", "type": "BadRequestError", "code": 400}})
		return
	}
	words := strings.Fields(last)
	slices.Reverse(words)
	if len(h.tag) > 0 {
		words = append([]string{string(h.tag)}, words...)
	}
	id := "chatcmpl-" + h.hostname
	if !req.Stream {
		smserve.WriteJSON(w, http.StatusOK, map[string]any{"id": id, "object": "chat.completion", "created": h.start.Unix(), "model": h.hostname,
			"choices": []any{map[string]any{"index": 0, "finish_reason": "stop", "message": map[string]any{"role": "assistant", "content": strings.Join(words, " ")}}},
			"usage":   map[string]any{"prompt_tokens": len(strings.Fields(last)), "completion_tokens": len(words), "total_tokens": len(strings.Fields(last)) + len(words)}})
		return
	}
	w.Header().Set("Content-Type", "text/event-stream")
	rc := http.NewResponseController(w)
	for i, word := range words {
		if i > 0 {
			word = " " + word
		}
		chunk, _ := json.Marshal(map[string]any{"id": id, "object": "chat.completion.chunk", "created": h.start.Unix(), "model": h.hostname,
			"choices": []any{map[string]any{"index": 0, "delta": map[string]any{"content": word}}}})
		if _, err := fmt.Fprintf(w, "data: %s\n\n", chunk); err != nil || rc.Flush() != nil {
			return
		}
	}
	fmt.Fprint(w, "data: [DONE]\n\n")
}
