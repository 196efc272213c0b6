package sentiment

import (
	"context"
	"encoding/json"
	"errors"
	"math"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"testing"

	"github.com/mce-run/mce/examples/containers/internal/smserve"
)

func TestClauses(t *testing.T) {
	tests := []struct {
		in   string
		want [][]string
	}{
		{"", nil},
		{"Not GOOD.", [][]string{{"not", "good"}}},
		{"I don't like it, but fine!", [][]string{{"i", "don't", "like", "it"}, {"but", "fine"}}},
		{"It isn’t bad", [][]string{{"it", "isn't", "bad"}}},
		{"'quoted' words''", [][]string{{"quoted", "words"}}},
		{"Das Essen war nicht gut\nÜberhaupt nicht", [][]string{{"das", "essen", "war", "nicht", "gut"}, {"überhaupt", "nicht"}}},
		{"well-made (really)", [][]string{{"well", "made"}, {"really"}}},
		{"a''b", [][]string{{"a", "b"}}},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			if got := clauses(tt.in); !reflect.DeepEqual(got, tt.want) {
				t.Errorf("clauses(%q) = %q, want %q", tt.in, got, tt.want)
			}
		})
	}
}

func tinyAnalyzer(t *testing.T) *Analyzer {
	t.Helper()
	lex, err := ParseLexicon(strings.NewReader("good\t2\nbad\t-2\nlike\t2\n"))
	if err != nil {
		t.Fatal(err)
	}
	a, err := NewAnalyzer(Meta{Language: "xx", Negators: []string{"not", "no"}}, lex)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

func TestAnalyze(t *testing.T) {
	a := tinyAnalyzer(t)
	norm := func(s float64) float64 { return math.Round(s/math.Sqrt(s*s+15)*1e4) / 1e4 }
	tests := []struct {
		text      string
		wantSum   float64
		wantLabel string
	}{
		{"good", 2, Positive},
		{"good good bad", 2, Positive},
		{"not good", -1.5, Negative},
		{"not bad", 1.5, Positive},
		{"I don't like it", -1.5, Negative},      // "n't" words negate
		{"I like it not", -1.5, Negative},        // no word after: the one before is flipped
		{"not, good", 2, Positive},               // a comma ends the negation's clause
		{"not very very very good", 2, Positive}, // beyond the 3-word window
		{"not very good", -1.5, Negative},        // within it
		{"no not good", -1.5, Negative},          // a negator stops the other's search
		{"good. not", 2, Positive},               // the clause ends before "not"
		{"not good bad", -1.5 - 2, Negative},     // only the first word after is flipped
		{"nothing known here", 0, Neutral},       // no lexicon words
		{"", 0, Neutral},
	}
	for _, tt := range tests {
		t.Run(tt.text, func(t *testing.T) {
			got := a.Analyze(tt.text)
			want := Result{Language: "xx", Label: tt.wantLabel, Score: norm(tt.wantSum)}
			if got != want {
				t.Errorf("Analyze(%q) = %+v, want %+v", tt.text, got, want)
			}
		})
	}
}

func loadModel(t *testing.T, lang string) *Analyzer {
	t.Helper()
	a, err := LoadAnalyzer("../../../models/sentiment-" + lang)
	if err != nil {
		t.Fatal(err)
	}
	if a.Language() != lang {
		t.Fatalf("language %q, want %q", a.Language(), lang)
	}
	if n := a.lex.Len(); n < 300 {
		t.Errorf("%s lexicon has %d words, want a few hundred", lang, n)
	}
	return a
}

func TestShippedModels(t *testing.T) {
	tests := []struct {
		lang, text, want string
	}{
		{"en", "The staff were friendly and the food was excellent.", Positive},
		{"en", "This was the worst delivery ever, the box arrived broken.", Negative},
		{"en", "The food was not good.", Negative},
		{"en", "Honestly, it was not bad at all.", Positive},
		{"en", "I don't like the new design", Negative},
		{"en", "No problems so far", Positive},
		{"en", "The meeting is on Tuesday at noon.", Neutral},
		{"de", "Das Essen war wirklich hervorragend und der Service sehr freundlich.", Positive},
		{"de", "Die Lieferung kam zu spät und das Paket war beschädigt.", Negative},
		{"de", "Das Essen war nicht gut.", Negative},
		{"de", "Ich mag das nicht.", Negative},
		{"de", "Gar nicht schlecht!", Positive},
		{"de", "Bisher keine Probleme.", Positive},
		{"de", "Der Termin ist am Dienstag um zwölf Uhr.", Neutral},
		{"de", "The food was excellent", Neutral}, // English words are not in the German lexicon
	}
	models := map[string]*Analyzer{"en": loadModel(t, "en"), "de": loadModel(t, "de")}
	for _, tt := range tests {
		t.Run(tt.lang+"/"+tt.text, func(t *testing.T) {
			got := models[tt.lang].Analyze(tt.text)
			if got.Label != tt.want || got.Language != tt.lang {
				t.Errorf("got %+v, want label %s", got, tt.want)
			}
		})
	}
}

func TestHandler(t *testing.T) {
	cfg, err := smserve.ConfigFromEnviron([]string{"SM_MODEL_DIR=../../../models/sentiment-en"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	l, err := Load(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(l.Summary, "language en, ") {
		t.Errorf("Summary = %q", l.Summary)
	}
	tests := []struct {
		name     string
		ct       string
		accept   string
		body     string
		wantCode int
		wantCT   string
		check    func(t *testing.T, body string)
	}{
		{name: "text to json", ct: "text/plain; charset=utf-8", body: "I love it", wantCode: 200, wantCT: "application/json",
			check: wantJSON(Result{Language: "en", Label: Positive, Score: 0.6124})},
		{name: "json text", ct: "application/json", body: `{"text": "awful"}`, wantCode: 200, wantCT: "application/json",
			check: wantJSON(Result{Language: "en", Label: Negative, Score: -0.6124})},
		{name: "json instances", ct: "application/json", body: `{"instances": ["great", "Tuesday"]}`, wantCode: 200, wantCT: "application/json",
			check: func(t *testing.T, body string) {
				var p Predictions
				if err := json.Unmarshal([]byte(body), &p); err != nil {
					t.Fatal(err)
				}
				want := []Result{{"en", Positive, 0.6124}, {"en", Neutral, 0}}
				if !reflect.DeepEqual(p.Predictions, want) {
					t.Errorf("predictions %+v, want %+v", p.Predictions, want)
				}
			}},
		{name: "csv", ct: "application/json", accept: "text/csv", body: `{"instances": ["not good", "fine"]}`, wantCode: 200, wantCT: "text/csv",
			check: func(t *testing.T, body string) {
				if want := "en,NEGATIVE,-0.3612\nen,POSITIVE,0.25\n"; body != want {
					t.Errorf("body %q", body)
				}
			}},
		{name: "unsupported content type", ct: "text/csv", body: "a,b", wantCode: 415},
		{name: "unsupported accept", ct: "text/plain", accept: "text/html", body: "good", wantCode: 406},
		{name: "empty text", ct: "text/plain", body: "  \n", wantCode: 400},
		{name: "both fields", ct: "application/json", body: `{"text": "a", "instances": ["b"]}`, wantCode: 400},
		{name: "no fields", ct: "application/json", body: `{"words": "a"}`, wantCode: 400},
		{name: "bad json", ct: "application/json", body: `{"text": 3}`, wantCode: 400},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req := httptest.NewRequest(http.MethodPost, "/invocations", strings.NewReader(tt.body))
			req.Header.Set("Content-Type", tt.ct)
			if tt.accept != "" {
				req.Header.Set("Accept", tt.accept)
			}
			rec := httptest.NewRecorder()
			l.Invocations.ServeHTTP(rec, req)
			if rec.Code != tt.wantCode {
				t.Fatalf("status %d (%s), want %d", rec.Code, rec.Body, tt.wantCode)
			}
			if tt.wantCode != 200 {
				var e struct{ Error string }
				if err := json.Unmarshal(rec.Body.Bytes(), &e); err != nil || e.Error == "" {
					t.Errorf("error body %q is not {\"error\": …}", rec.Body)
				}
				return
			}
			if got := rec.Header().Get("Content-Type"); got != tt.wantCT {
				t.Errorf("Content-Type %q, want %q", got, tt.wantCT)
			}
			tt.check(t, rec.Body.String())
		})
	}
}

func wantJSON(want Result) func(*testing.T, string) {
	return func(t *testing.T, body string) {
		var got Result
		if err := json.Unmarshal([]byte(body), &got); err != nil {
			t.Fatal(err)
		}
		if got != want {
			t.Errorf("got %+v, want %+v", got, want)
		}
	}
}

func TestParseLexicon(t *testing.T) {
	tests := []struct {
		name    string
		in      string
		wantLen int
		wantErr bool
	}{
		{name: "ok", in: "# c\n\ngood\t2\r\nbad\t-1.5\ndon't\t-1\n", wantLen: 3},
		{name: "no tab", in: "good 2\n", wantErr: true},
		{name: "upper case", in: "Good\t2\n", wantErr: true},
		{name: "two words", in: "very good\t2\n", wantErr: true},
		{name: "score too big", in: "good\t6\n", wantErr: true},
		{name: "nan", in: "good\tNaN\n", wantErr: true},
		{name: "duplicate", in: "good\t2\ngood\t1\n", wantErr: true},
		{name: "empty", in: "# only a comment\n", wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			lex, err := ParseLexicon(strings.NewReader(tt.in))
			if tt.wantErr {
				if !errors.Is(err, ErrBadModel) {
					t.Fatalf("err = %v, want ErrBadModel", err)
				}
				return
			}
			if err != nil || lex.Len() != tt.wantLen {
				t.Fatalf("got %v words, %v; want %d", lex, err, tt.wantLen)
			}
		})
	}
}

func FuzzParseLexicon(f *testing.F) {
	f.Add("good\t2\nbad\t-1.5\n")
	f.Add("# x\r\nnicht\t0\n")
	f.Fuzz(func(t *testing.T, in string) {
		lex, err := ParseLexicon(strings.NewReader(in))
		if err != nil {
			return
		}
		for w, s := range lex.scores {
			if !isSingleWord(w) || math.Abs(s) > MaxWordScore || math.IsNaN(s) {
				t.Fatalf("bad entry %q=%v", w, s)
			}
		}
	})
}

func TestParseMeta(t *testing.T) {
	tests := []struct {
		name    string
		in      string
		wantErr bool
	}{
		{"minimal", `{"language":"en"}`, false},
		{"negators", `{"language":"de-AT","negators":["nicht","kein"]}`, false},
		{"no language", `{}`, true},
		{"bad language", `{"language":"e n"}`, true},
		{"bad negator", `{"language":"en","negators":["Not"]}`, true},
		{"unknown field", `{"language":"en","lang":"de"}`, true},
		{"trailing", `{"language":"en"} x`, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := ParseMeta(strings.NewReader(tt.in))
			if tt.wantErr != (err != nil) || (err != nil && !errors.Is(err, ErrBadModel)) {
				t.Errorf("err = %v, want error: %v", err, tt.wantErr)
			}
		})
	}
}

func FuzzParseMeta(f *testing.F) {
	f.Add(`{"language":"en","negators":["not"]}`)
	f.Fuzz(func(t *testing.T, in string) {
		m, err := ParseMeta(strings.NewReader(in))
		if err == nil && !validLanguage(m.Language) {
			t.Fatalf("accepted language %q", m.Language)
		}
	})
}

func TestNegatorInLexiconRejected(t *testing.T) {
	lex, err := ParseLexicon(strings.NewReader("not\t-1\n"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := NewAnalyzer(Meta{Language: "en", Negators: []string{"not"}}, lex); !errors.Is(err, ErrBadModel) {
		t.Errorf("err = %v, want ErrBadModel", err)
	}
}

func FuzzDecodeTexts(f *testing.F) {
	f.Add(true, "I love it")
	f.Add(false, `{"text":"x"}`)
	f.Add(false, `{"instances":["a","b"]}`)
	f.Fuzz(func(t *testing.T, text bool, body string) {
		mt := TypeJSON
		if text {
			mt = TypeText
		}
		texts, batch, err := DecodeTexts(mt, []byte(body))
		if err != nil {
			if s := smserve.StatusOf(err); s != http.StatusBadRequest && s != http.StatusRequestEntityTooLarge {
				t.Fatalf("status %d: %v", s, err)
			}
			return
		}
		if len(texts) == 0 || (!batch && len(texts) != 1) {
			t.Fatalf("%d texts, batch %v", len(texts), batch)
		}
		a := tinyAnalyzer(t)
		for _, s := range texts {
			if r := a.Analyze(s); !(r.Score > -1 && r.Score < 1) {
				t.Fatalf("score %v out of range", r.Score)
			}
		}
	})
}
