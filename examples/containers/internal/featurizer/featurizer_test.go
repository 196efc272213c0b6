package featurizer

import (
	"context"
	"encoding/json"
	"errors"
	"io/fs"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/mce-run/mce/examples/containers/internal/smserve"
)

func loadTestdata(t *testing.T, environ ...string) http.Handler {
	t.Helper()
	cfg, err := smserve.ConfigFromEnviron(append([]string{"SM_MODEL_DIR=testdata/model"}, environ...), nil)
	if err != nil {
		t.Fatal(err)
	}
	l, err := Load(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	if l.Summary != "3 tokens" {
		t.Errorf("Summary = %q, want \"3 tokens\"", l.Summary)
	}
	return l.Invocations
}

func TestHandler(t *testing.T) {
	h := loadTestdata(t)
	const s = "0.7071067811865475" // 1/√2
	tests := []struct {
		name     string
		ct       string
		accept   string
		body     string
		wantCode int
		wantCT   string
		want     string // exact body, or a substring of the error for 4xx
	}{
		{name: "text to csv", ct: "text/plain", body: "Refund my card\nwhere is my parcel?\n",
			wantCode: 200, wantCT: "text/csv", want: s + "," + s + ",0\n0,0,1\n"},
		{name: "charset param, crlf", ct: "text/plain; charset=utf-8", body: "card\r\nparcel parcel\r\n",
			wantCode: 200, wantCT: "text/csv", want: "1,0,0\n0,0,1\n"},
		{name: "no content type means text", body: "refund", wantCode: 200, wantCT: "text/csv", want: "0,1,0\n"},
		{name: "empty line is an empty document", ct: "text/plain", body: "card\n\nrefund",
			wantCode: 200, wantCT: "text/csv", want: "1,0,0\n0,0,0\n0,1,0\n"},
		{name: "json instances to json", ct: "application/json", accept: "application/json",
			body: `{"instances": ["card", "nothing"]}`, wantCode: 200, wantCT: "application/json",
			want: `{"instances":[[1,0,0],[0,0,0]]}` + "\n"},
		{name: "bare json array", ct: "application/json", accept: "*/*", body: ` ["REFUND"] `,
			wantCode: 200, wantCT: "text/csv", want: "0,1,0\n"},
		{name: "accept wildcard json", ct: "text/plain", accept: "application/*", body: "card",
			wantCode: 200, wantCT: "application/json", want: `{"instances":[[1,0,0]]}` + "\n"},
		{name: "unsupported content type", ct: "application/xml", body: "<a/>", wantCode: 415, want: "application/xml"},
		{name: "unsupported accept", ct: "text/plain", accept: "application/x-npy", body: "x", wantCode: 406, want: "x-npy"},
		{name: "empty body", ct: "text/plain", body: "", wantCode: 400, want: "no documents"},
		{name: "bad json", ct: "application/json", body: `{"instances": [1, 2]}`, wantCode: 400, want: "instances"},
		{name: "empty instances", ct: "application/json", body: `{"instances": []}`, wantCode: 400, want: "no documents"},
		{name: "invalid utf-8", ct: "text/plain", body: "caf\xe9", wantCode: 400, want: "UTF-8"},
		{name: "too many documents", ct: "text/plain", body: strings.Repeat("a\n", MaxDocuments+1), wantCode: 413, want: "too many"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req := httptest.NewRequest(http.MethodPost, "/invocations", strings.NewReader(tt.body))
			if tt.ct != "" {
				req.Header.Set("Content-Type", tt.ct)
			}
			if tt.accept != "" {
				req.Header.Set("Accept", tt.accept)
			}
			req.Header.Set("X-Unknown-Header", "ignored")
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, req)
			if rec.Code != tt.wantCode {
				t.Fatalf("status = %d (%s), want %d", rec.Code, rec.Body, tt.wantCode)
			}
			if tt.wantCode != 200 {
				var e struct{ Error string }
				if err := json.Unmarshal(rec.Body.Bytes(), &e); err != nil || !strings.Contains(e.Error, tt.want) {
					t.Errorf("error body = %q, want JSON error containing %q", rec.Body, tt.want)
				}
				return
			}
			if got := rec.Header().Get("Content-Type"); got != tt.wantCT {
				t.Errorf("Content-Type = %q, want %q", got, tt.wantCT)
			}
			if got := rec.Body.String(); got != tt.want {
				t.Errorf("body = %q, want %q", got, tt.want)
			}
		})
	}
}

func TestDefaultAcceptFromEnvironment(t *testing.T) {
	h := loadTestdata(t, "SAGEMAKER_DEFAULT_INVOCATIONS_ACCEPT=application/json")
	req := httptest.NewRequest(http.MethodPost, "/invocations", strings.NewReader("card"))
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	if got := rec.Header().Get("Content-Type"); got != "application/json" {
		t.Errorf("Content-Type = %q, want application/json", got)
	}
}

func TestLoadErrors(t *testing.T) {
	tests := []struct {
		name    string
		environ []string
		check   func(error) bool
	}{
		{"missing dir", []string{"SM_MODEL_DIR=testdata/none"}, func(err error) bool { return errors.Is(err, fs.ErrNotExist) }},
		{"unsupported default accept", []string{"SM_MODEL_DIR=testdata/model", "SAGEMAKER_DEFAULT_INVOCATIONS_ACCEPT=text/plain"},
			func(err error) bool { return errors.Is(err, smserve.ErrConfig) }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg, err := smserve.ConfigFromEnviron(tt.environ, nil)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := Load(context.Background(), cfg); !tt.check(err) {
				t.Errorf("Load = %v", err)
			}
		})
	}
}

func FuzzDecodeDocuments(f *testing.F) {
	f.Add(true, "a\nb\r\n")
	f.Add(false, `{"instances":["x","y"]}`)
	f.Add(false, `["x"]`)
	f.Add(false, `{"instances":null}`)
	f.Fuzz(func(t *testing.T, text bool, body string) {
		mt := TypeJSON
		if text {
			mt = TypeText
		}
		docs, err := DecodeDocuments(mt, []byte(body))
		if err != nil {
			if smserve.StatusOf(err) != http.StatusBadRequest {
				t.Fatalf("status %d for %v", smserve.StatusOf(err), err)
			}
			return
		}
		if len(docs) == 0 {
			t.Fatal("no documents and no error")
		}
		for _, d := range docs {
			if !utf8.ValidString(d) || (text && strings.ContainsRune(d, '\n')) {
				t.Fatalf("bad document %q", d)
			}
		}
	})
}
