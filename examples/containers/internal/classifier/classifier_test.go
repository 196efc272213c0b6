package classifier

import (
	"context"
	"encoding/json"
	"errors"
	"io/fs"
	"math"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/mce-run/mce/examples/containers/internal/logreg"
	"github.com/mce-run/mce/examples/containers/internal/smserve"
)

func loadTestdata(t *testing.T) http.Handler {
	t.Helper()
	cfg, err := smserve.ConfigFromEnviron([]string{"SM_MODEL_DIR=testdata/model"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	l, err := Load(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	if want := "3 features, labels billing, shipping, technical"; l.Summary != want {
		t.Errorf("Summary = %q, want %q", l.Summary, want)
	}
	return l.Invocations
}

func invoke(h http.Handler, ct, accept, body string) *httptest.ResponseRecorder {
	req := httptest.NewRequest(http.MethodPost, "/invocations", strings.NewReader(body))
	if ct != "" {
		req.Header.Set("Content-Type", ct)
	}
	if accept != "" {
		req.Header.Set("Accept", accept)
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	return rec
}

func TestHandlerJSONOutput(t *testing.T) {
	h := loadTestdata(t)
	rec := invoke(h, "text/csv; charset=utf-8", "", "1,0,0\n0, 0.5 ,\"1\"\n\n0,0,0\n")
	if rec.Code != http.StatusOK || rec.Header().Get("Content-Type") != "application/json" {
		t.Fatalf("got %d %s: %s", rec.Code, rec.Header().Get("Content-Type"), rec.Body)
	}
	var resp Response
	if err := json.Unmarshal(rec.Body.Bytes(), &resp); err != nil {
		t.Fatal(err)
	}
	e4 := math.Exp(4)
	tests := []struct {
		label   string
		billing float64
	}{
		{"billing", e4 / (e4 + 2)},
		{"technical", 1 / (1 + math.Exp(2) + e4)},
		{"billing", 1.0 / 3}, // all equal: the first label wins the tie
	}
	if len(resp.Predictions) != len(tests) {
		t.Fatalf("%d predictions, want %d", len(resp.Predictions), len(tests))
	}
	for i, tt := range tests {
		p := resp.Predictions[i]
		if p.Label != tt.label {
			t.Errorf("prediction %d label = %q, want %q", i, p.Label, tt.label)
		}
		if math.Abs(p.Probabilities["billing"]-tt.billing) > 1e-12 {
			t.Errorf("prediction %d P(billing) = %v, want %v", i, p.Probabilities["billing"], tt.billing)
		}
		var sum float64
		for _, v := range p.Probabilities {
			sum += v
		}
		if len(p.Probabilities) != 3 || math.Abs(sum-1) > 1e-12 {
			t.Errorf("prediction %d probabilities %v do not form a distribution", i, p.Probabilities)
		}
	}
}

func TestHandler(t *testing.T) {
	h := loadTestdata(t)
	tests := []struct {
		name     string
		ct       string
		accept   string
		body     string
		wantCode int
		wantCT   string
		want     string // exact body, or a substring of the JSON error
	}{
		{name: "json in csv out", ct: "application/json", accept: "text/csv",
			body: `{"instances": [[0,1,0],[0,0,2]]}`, wantCode: 200, wantCT: "text/csv", want: "shipping\ntechnical\n"},
		{name: "bare json array", ct: "application/json", accept: "text/*", body: `[[1,0,0]]`,
			wantCode: 200, wantCT: "text/csv", want: "billing\n"},
		{name: "no content type means csv", accept: "text/csv", body: "0,1,0", wantCode: 200, wantCT: "text/csv", want: "shipping\n"},
		{name: "csv row too narrow", ct: "text/csv", body: "1,0,0\n1,0\n", wantCode: 400, want: "row 2 has 2 features, the model takes 3"},
		{name: "json row too wide", ct: "application/json", body: `{"instances": [[1,0,0,0]]}`, wantCode: 400, want: "row 1 has 4 features, the model takes 3"},
		{name: "not a number", ct: "text/csv", body: "1,x,0", wantCode: 400, want: "row 1, column 2"},
		{name: "nan", ct: "text/csv", body: "1,NaN,0", wantCode: 400, want: "not a finite number"},
		{name: "infinity", ct: "text/csv", body: "1,0,-Inf", wantCode: 400, want: "not a finite number"},
		{name: "bad csv quoting", ct: "text/csv", body: "1,\"0,0", wantCode: 400, want: "CSV"},
		{name: "json strings", ct: "application/json", body: `{"instances": [["1","0","0"]]}`, wantCode: 400, want: "instances"},
		{name: "empty", ct: "text/csv", body: "\n\n", wantCode: 400, want: "no instances"},
		{name: "unsupported content type", ct: "text/plain", body: "hello", wantCode: 415, want: "text/plain"},
		{name: "unsupported accept", ct: "text/csv", accept: "text/plain", body: "1,0,0", wantCode: 406, want: "text/plain"},
		{name: "too many rows", ct: "text/csv", body: strings.Repeat("1,0,0\n", MaxRows+1), wantCode: 413, want: "instances"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rec := invoke(h, tt.ct, tt.accept, tt.body)
			if rec.Code != tt.wantCode {
				t.Fatalf("status = %d (%s), want %d", rec.Code, rec.Body, tt.wantCode)
			}
			if tt.wantCode != http.StatusOK {
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

func TestCSVLabelsAreQuoted(t *testing.T) {
	m := &logreg.Model{Format: logreg.Format, Labels: []string{"a,b", "c"}, Weights: [][]float64{{1}, {-1}}, Bias: []float64{0, 0}}
	h, err := NewHandler(m, "text/csv")
	if err != nil {
		t.Fatal(err)
	}
	if rec := invoke(h, "text/csv", "", "1"); rec.Body.String() != "\"a,b\"\n" {
		t.Errorf("body = %q, want a quoted label", rec.Body)
	}
}

func TestLoadErrors(t *testing.T) {
	tests := []struct {
		name  string
		dir   string
		check func(error) bool
	}{
		{"missing", "testdata/none", func(err error) bool { return errors.Is(err, fs.ErrNotExist) }},
		{"featurizer dir is not a classifier", "../featurizer/testdata/model", func(err error) bool { return errors.Is(err, fs.ErrNotExist) }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg, err := smserve.ConfigFromEnviron([]string{"SM_MODEL_DIR=" + tt.dir}, nil)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := Load(context.Background(), cfg); !tt.check(err) {
				t.Errorf("Load = %v", err)
			}
		})
	}
}

func FuzzDecodeRows(f *testing.F) {
	f.Add(true, "1,2,3\n4,5,6\n", 3)
	f.Add(false, `{"instances":[[1,2]]}`, 2)
	f.Add(true, "\"1\", 2\r\n", 2)
	f.Add(false, `[[1e400]]`, 1)
	f.Fuzz(func(t *testing.T, csvIn bool, body string, width int) {
		if width < 1 || width > 64 {
			return
		}
		mt := TypeJSON
		if csvIn {
			mt = TypeCSV
		}
		rows, err := DecodeRows(mt, []byte(body), width)
		if err != nil {
			if s := smserve.StatusOf(err); s != http.StatusBadRequest && s != http.StatusRequestEntityTooLarge {
				t.Fatalf("status %d for %v", s, err)
			}
			return
		}
		if len(rows) == 0 || len(rows) > MaxRows {
			t.Fatalf("%d rows", len(rows))
		}
		for _, r := range rows {
			if len(r) != width {
				t.Fatalf("row width %d, want %d", len(r), width)
			}
			for _, v := range r {
				if math.IsNaN(v) || math.IsInf(v, 0) {
					t.Fatalf("non-finite value in %v", r)
				}
			}
		}
	})
}
