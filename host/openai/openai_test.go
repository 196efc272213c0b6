package openai

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"
)

// backend answers with what its fields say.
type backend struct {
	admit *Error
	got   Request
	reply func(out *Answer) *Error
}

func (b *backend) Admit(*http.Request, string, string) *Error { return b.admit }
func (b *backend) Body(w http.ResponseWriter, r *http.Request) ([]byte, func(), *Error) {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		return nil, nil, Errorf(http.StatusBadRequest, "ValidationError", err.Error())
	}
	return body, func() {}, nil
}
func (b *backend) Complete(_ context.Context, req Request, out *Answer) *Error {
	b.got = req
	return b.reply(out)
}

func serve(b *backend, method, rest, ct, body string) *httptest.ResponseRecorder {
	r := httptest.NewRequest(method, "/endpoints/e/openai"+rest, strings.NewReader(body))
	if ct != "" {
		r.Header.Set("Content-Type", ct)
	}
	r.Header.Set("Accept", "text/event-stream")
	w := httptest.NewRecorder()
	Handler(b, zerolog.Nop())(w, r, "e", "ic", rest)
	return w
}

func TestHandlerPassesTheCallAndTheAnswer(t *testing.T) {
	b := &backend{reply: func(out *Answer) *Error {
		out.Whole("application/json", []byte(`{"ok":true}`))
		return nil
	}}
	w := serve(b, http.MethodPost, ChatCompletionsPath, "application/json; charset=utf-8", ` {"stream": true, "messages": []}`)
	if w.Code != 200 || w.Body.String() != `{"ok":true}` || w.Header().Get("Content-Length") != "11" {
		t.Fatalf("%d %q %v", w.Code, w.Body, w.Header())
	}
	if b.got.Endpoint != "e" || b.got.Component != "ic" || !b.got.Stream || b.got.Accept != "text/event-stream" {
		t.Fatalf("request = %+v", b.got)
	}
	for body, stream := range map[string]bool{`{}`: false, `{"stream": null}`: false, `{"stream": false}`: false, `{"stream":true}`: true} {
		serve(b, http.MethodPost, ChatCompletionsPath, "", body)
		if b.got.Stream != stream {
			t.Errorf("%s: stream = %v", body, b.got.Stream)
		}
	}
}

// A stream that breaks after it began ends with the error in the stream's
// own format; one that breaks before is an error answer.
func TestStreamFailures(t *testing.T) {
	broken := Errorf(http.StatusFailedDependency, "ModelStreamError", "the container went away")
	for ct, want := range map[string]string{
		"text/event-stream":     "data: one\n\n\n\ndata: {\"error\":{\"message\":\"the container went away\",\"type\":\"invalid_request_error\",\"param\":null,\"code\":\"ModelStreamError\"}}\n\n",
		"application/jsonlines": "data: one\n\n\n{\"error\":{\"message\":\"the container went away\",\"type\":\"invalid_request_error\",\"param\":null,\"code\":\"ModelStreamError\"}}\n",
	} {
		b := &backend{reply: func(out *Answer) *Error {
			if err := out.Begin(ct, time.Now().Add(time.Minute)); err != nil {
				t.Fatal(err)
			}
			out.Write([]byte("data: one\n\n"))
			return broken
		}}
		w := serve(b, http.MethodPost, ChatCompletionsPath, "", `{"stream":true}`)
		if w.Code != 200 || w.Body.String() != want || w.Header().Get("Content-Type") != ct {
			t.Errorf("%s: %d %q", ct, w.Code, w.Body)
		}
	}
	b := &backend{reply: func(*Answer) *Error { return broken }}
	w := serve(b, http.MethodPost, ChatCompletionsPath, "", `{"stream":true}`)
	var env envelope
	if w.Code != http.StatusFailedDependency || json.Unmarshal(w.Body.Bytes(), &env) != nil || env.Error.Code != "ModelStreamError" || w.Header().Get("X-Amzn-ErrorType") != "ModelStreamError" {
		t.Errorf("%d %s", w.Code, w.Body)
	}
}

func TestRefusals(t *testing.T) {
	ok := &backend{reply: func(*Answer) *Error { t.Error("a refused call reached the container"); return nil }}
	for name, c := range map[string]struct {
		b                      *backend
		method, rest, ct, body string
		status                 int
		typ                    string
	}{
		"other path":   {ok, http.MethodPost, "/v1/embeddings", "", "{}", 404, TypeNotFound},
		"no version":   {ok, http.MethodPost, "/chat/completions", "", "{}", 404, TypeNotFound},
		"GET":          {ok, http.MethodGet, ChatCompletionsPath, "", "", 405, TypeInvalidRequest},
		"denied":       {&backend{admit: Errorf(403, "AccessDeniedException", "no")}, http.MethodPost, ChatCompletionsPath, "", "{}", 403, TypePermission},
		"bad token":    {&backend{admit: Errorf(401, "InvalidSignatureException", "no")}, http.MethodPost, ChatCompletionsPath, "", "{}", 401, TypeAuthentication},
		"text":         {ok, http.MethodPost, ChatCompletionsPath, "text/plain", "{}", 415, TypeInvalidRequest},
		"bad type":     {ok, http.MethodPost, ChatCompletionsPath, "what/ever;;", "{}", 415, TypeInvalidRequest},
		"empty":        {ok, http.MethodPost, ChatCompletionsPath, "", "", 400, TypeInvalidRequest},
		"number":       {ok, http.MethodPost, ChatCompletionsPath, "", "12", 400, TypeInvalidRequest},
		"two objects":  {ok, http.MethodPost, ChatCompletionsPath, "", "{}{}", 400, TypeInvalidRequest},
		"stream is 1":  {ok, http.MethodPost, ChatCompletionsPath, "", `{"stream":1}`, 400, TypeInvalidRequest},
		"unknown code": {&backend{reply: func(*Answer) *Error { return Errorf(503, "ServiceUnavailable", "busy") }}, http.MethodPost, ChatCompletionsPath, "", "{}", 503, TypeServer},
	} {
		w := serve(c.b, c.method, c.rest, c.ct, c.body)
		var env envelope
		if w.Code != c.status || json.Unmarshal(w.Body.Bytes(), &env) != nil || env.Error.Type != c.typ || env.Error.Message == "" {
			t.Errorf("%s: %d %s; want %d %s", name, w.Code, w.Body, c.status, c.typ)
		}
	}
	if e := (&Error{Code: "X", Message: "m"}); !errors.Is(e, e) || e.Error() != "X: m" {
		t.Error(e)
	}
}
