package host

import (
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"
)

// fakeChat answers an OpenAI chat completion as vLLM's /invocations does:
// the reply is the last message's words in reverse order, whole or as
// server-sent events, one word a chunk, then [DONE]. A last message of
// "refuse" is a 400 in OpenAI's error shape; "break" streams one chunk and
// then drops the connection.
func fakeChat(w http.ResponseWriter, r *http.Request, hostname string, body []byte) {
	var req struct {
		Model    string `json:"model"`
		Stream   bool   `json:"stream"`
		Messages []struct {
			Role    string `json:"role"`
			Content string `json:"content"`
		} `json:"messages"`
	}
	if err := json.Unmarshal(body, &req); err != nil || len(req.Messages) == 0 {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusBadRequest)
		fmt.Fprintf(w, `{"error":{"message":"not a chat completion","type":"BadRequestError","param":null,"code":400}}`)
		return
	}
	last := req.Messages[len(req.Messages)-1].Content
	if last == "refuse" {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusBadRequest)
		fmt.Fprintf(w, `{"error":{"message":"%s refuses","type":"BadRequestError","param":null,"code":400}}`, hostname)
		return
	}
	words := strings.Fields(last)
	slices.Reverse(words)
	if !req.Stream {
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(map[string]any{"id": "chatcmpl-1", "object": "chat.completion", "created": 1, "model": hostname,
			"choices": []any{map[string]any{"index": 0, "finish_reason": "stop", "message": map[string]any{"role": "assistant", "content": strings.Join(words, " ")}}},
			"usage":   map[string]any{"prompt_tokens": len(strings.Fields(last)), "completion_tokens": len(words), "total_tokens": 2 * len(words)}})
		return
	}
	w.Header().Set("Content-Type", "text/event-stream")
	rc := http.NewResponseController(w)
	for i, word := range words {
		if i > 0 {
			word = " " + word
		}
		chunk, _ := json.Marshal(map[string]any{"id": "chatcmpl-1", "object": "chat.completion.chunk", "created": 1, "model": hostname,
			"choices": []any{map[string]any{"index": 0, "delta": map[string]any{"content": word}}}})
		fmt.Fprintf(w, "data: %s\n\n", chunk)
		rc.Flush()
		if last == "break now" {
			panic(http.ErrAbortHandler)
		}
	}
	fmt.Fprintf(w, "data: [DONE]\n\n")
}
