package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/mce-run/mce/examples/containers/internal/classifier"
	"github.com/mce-run/mce/examples/containers/internal/featurizer"
	"github.com/mce-run/mce/examples/containers/internal/smserve"
)

const dataDir = "../../../models/tickets"

// trainOnce runs the trainer into a temporary directory and returns it.
func trainOnce(t *testing.T, extraArgs ...string) string {
	t.Helper()
	out := t.TempDir()
	var stdout, stderr bytes.Buffer
	args := append([]string{"-data", dataDir, "-out", out}, extraArgs...)
	if err := run(context.Background(), args, &stdout, &stderr); err != nil {
		t.Fatalf("run: %v\n%s", err, stderr.String())
	}
	if !strings.Contains(stdout.String(), "training accuracy") {
		t.Errorf("stdout %q, stderr %q", stdout.String(), stderr.String())
	}
	return out
}

// load starts a program's handler from dir, as the container would.
func load(t *testing.T, p smserve.Program, dir string) http.Handler {
	t.Helper()
	cfg, err := smserve.ConfigFromEnviron([]string{"SM_MODEL_DIR=" + dir}, nil)
	if err != nil {
		t.Fatal(err)
	}
	l, err := p.Load(context.Background(), cfg)
	if err != nil {
		t.Fatalf("%s: %v", p.Name, err)
	}
	return l.Invocations
}

// hop sends body to h the way a serial pipeline does and returns the answer's Content-Type and body.
func hop(t *testing.T, h http.Handler, contentType, accept, body string) (string, string) {
	t.Helper()
	req := httptest.NewRequest(http.MethodPost, "/invocations", strings.NewReader(body))
	req.Header.Set("Content-Type", contentType)
	if accept != "" {
		req.Header.Set("Accept", accept)
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	if rec.Code != http.StatusOK {
		t.Fatalf("status %d: %s", rec.Code, rec.Body)
	}
	return rec.Header().Get("Content-Type"), rec.Body.String()
}

func TestChainLabelsHeldOutTickets(t *testing.T) {
	out := trainOnce(t)
	feat := load(t, featurizer.Program(), filepath.Join(out, "featurizer"))
	clf := load(t, classifier.Program(), filepath.Join(out, "classifier"))
	heldOut, err := loadExamples(filepath.Join(dataDir, "test.tsv"))
	if err != nil {
		t.Fatal(err)
	}
	if len(heldOut) < 30 {
		t.Fatalf("only %d held-out examples", len(heldOut))
	}

	// One ticket per request: text/plain → featurizer → its Content-Type → classifier → JSON.
	for _, ex := range heldOut {
		t.Run(ex.Text, func(t *testing.T) {
			ct, features := hop(t, feat, "text/plain; charset=utf-8", "", ex.Text)
			ct, answer := hop(t, clf, ct, "application/json", features)
			var resp classifier.Response
			if err := json.Unmarshal([]byte(answer), &resp); err != nil || ct != "application/json" {
				t.Fatalf("classifier answered %q %q: %v", ct, answer, err)
			}
			if len(resp.Predictions) != 1 {
				t.Fatalf("%d predictions, want 1", len(resp.Predictions))
			}
			if got := resp.Predictions[0]; got.Label != ex.Label {
				t.Errorf("label %q, want %q (probabilities %v)", got.Label, ex.Label, got.Probabilities)
			}
		})
	}

	// All tickets in one request, through the JSON representations, answered as CSV labels.
	texts := make([]string, len(heldOut))
	want := make([]string, len(heldOut))
	for i, ex := range heldOut {
		texts[i], want[i] = ex.Text, ex.Label
	}
	in, err := json.Marshal(map[string][]string{"instances": texts})
	if err != nil {
		t.Fatal(err)
	}
	ct, features := hop(t, feat, "application/json", "application/json", string(in))
	ct, answer := hop(t, clf, ct, "text/csv", features)
	if ct != "text/csv" {
		t.Errorf("Content-Type %q, want text/csv", ct)
	}
	if got := strings.Split(strings.TrimSuffix(answer, "\n"), "\n"); !reflect.DeepEqual(got, want) {
		t.Errorf("batch labels\n got %q\nwant %q", got, want)
	}
}

func TestTrainingIsDeterministic(t *testing.T) {
	// Few epochs keep this cheap under -race; the arithmetic per epoch is what must be reproducible.
	a, b := trainOnce(t, "-epochs", "50"), trainOnce(t, "-epochs", "50")
	for _, f := range []string{"featurizer/vocab.txt", "classifier/model.json"} {
		x, err := os.ReadFile(filepath.Join(a, f))
		if err != nil {
			t.Fatal(err)
		}
		y, err := os.ReadFile(filepath.Join(b, f))
		if err != nil {
			t.Fatal(err)
		}
		if len(x) == 0 || !bytes.Equal(x, y) {
			t.Errorf("%s differs between two runs (%d and %d bytes)", f, len(x), len(y))
		}
	}
}

func TestRunErrors(t *testing.T) {
	tests := []struct {
		name string
		args []string
		want string
	}{
		{"missing data", []string{"-data", "testdata/none", "-out", t.TempDir()}, "train.tsv"},
		{"bad data", []string{"-data", "testdata/bad", "-out", t.TempDir()}, "line 2"},
		{"extra argument", []string{"now"}, "unexpected arguments"},
		{"unknown flag", []string{"-fast"}, "fast"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := run(context.Background(), tt.args, io.Discard, io.Discard)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("run = %v, want an error mentioning %q", err, tt.want)
			}
		})
	}
}

func TestParseExamples(t *testing.T) {
	tests := []struct {
		name    string
		in      string
		want    []example
		wantErr bool
	}{
		{name: "comments and blanks", in: "# header\n\nbilling\tRefund me\r\nshipping\t  Where is it?  \n",
			want: []example{{"billing", "Refund me"}, {"shipping", "Where is it?"}}},
		{name: "text may contain tabs", in: "a\tx\ty\n", want: []example{{"a", "x\ty"}}},
		{name: "no tab", in: "billing refund me\n", wantErr: true},
		{name: "empty text", in: "billing\t \n", wantErr: true},
		{name: "label with space", in: "two words\ttext\n", wantErr: true},
		{name: "overlong line", in: "a\t" + strings.Repeat("x", maxLineBytes), wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := parseExamples(strings.NewReader(tt.in))
			if tt.wantErr {
				if !errors.Is(err, errBadDataset) {
					t.Fatalf("err = %v, want errBadDataset", err)
				}
				return
			}
			if err != nil || !reflect.DeepEqual(got, tt.want) {
				t.Errorf("got %q, %v; want %q", got, err, tt.want)
			}
		})
	}
}

func FuzzParseExamples(f *testing.F) {
	f.Add("billing\tRefund me\n# c\nshipping\tWhere\r\n")
	f.Add("\t\n")
	f.Fuzz(func(t *testing.T, in string) {
		got, err := parseExamples(strings.NewReader(in))
		if err != nil {
			return
		}
		for _, ex := range got {
			if ex.Label == "" || ex.Text == "" || strings.ContainsAny(ex.Label, " \t") {
				t.Fatalf("bad example %q", ex)
			}
		}
	})
}
