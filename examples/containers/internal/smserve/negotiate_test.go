package smserve

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"testing"
)

func TestParseAccept(t *testing.T) {
	tests := []struct {
		in   string
		want []MediaRange
	}{
		{"", nil},
		{"*/*", []MediaRange{{"*", "*", 1}}},
		{"Application/JSON", []MediaRange{{"application", "json", 1}}},
		{"text/csv;q=0.5, application/json", []MediaRange{{"text", "csv", 0.5}, {"application", "json", 1}}},
		{"text/*; charset=utf-8 ; Q=0", []MediaRange{{"text", "*", 0}}},
		{"garbage, */json, text/, /csv, application/json;q=2, text/csv;q=x", nil},
		{" , text/plain ,", []MediaRange{{"text", "plain", 1}}},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			if got := ParseAccept(tt.in); !reflect.DeepEqual(got, tt.want) {
				t.Errorf("ParseAccept(%q) = %v, want %v", tt.in, got, tt.want)
			}
		})
	}
	if got := len(ParseAccept(strings.Repeat("a/b,", 1000))); got != maxAcceptRanges {
		t.Errorf("ranges from a long header = %d, want %d", got, maxAcceptRanges)
	}
}

func FuzzParseAccept(f *testing.F) {
	for _, s := range []string{"*/*", "text/csv;q=0.5, application/json", "a/b;q=1e-3", "x/*;q=,", ";;,,/"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, h string) {
		got := ParseAccept(h)
		if len(got) > maxAcceptRanges {
			t.Fatalf("%d ranges", len(got))
		}
		for _, r := range got {
			if !(r.Q >= 0 && r.Q <= 1) || !isToken(r.Type) || !isToken(r.Subtype) || (r.Type == "*" && r.Subtype != "*") {
				t.Fatalf("bad range %+v from %q", r, h)
			}
		}
		n, _ := NewNegotiator([]string{"text/plain"}, []string{"text/csv", "application/json"}, "")
		req := httptest.NewRequest(http.MethodPost, "/invocations", nil)
		req.Header.Set("Accept", h)
		if mt, err := n.ResponseType(req); err == nil && mt != "text/csv" && mt != "application/json" {
			t.Fatalf("ResponseType = %q", mt)
		}
	})
}

func TestNegotiatorRequestType(t *testing.T) {
	n, err := NewNegotiator([]string{"text/plain", "application/json"}, []string{"text/csv"}, "")
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		ct      string
		want    string
		wantErr bool
	}{
		{"", "text/plain", false},
		{"application/json", "application/json", false},
		{"Application/JSON; charset=UTF-8", "application/json", false},
		{"text/plain; charset=us-ascii", "text/plain", false},
		{"text/plain; charset=latin1", "", true},
		{"text/csv", "", true},
		{"application/json;", "application/json", false},
		{"not a type", "", true},
	}
	for _, tt := range tests {
		t.Run(tt.ct, func(t *testing.T) {
			req := httptest.NewRequest(http.MethodPost, "/invocations", nil)
			if tt.ct != "" {
				req.Header.Set("Content-Type", tt.ct)
			}
			got, err := n.RequestType(req)
			if tt.wantErr {
				if !errors.Is(err, ErrUnsupportedMediaType) || StatusOf(err) != http.StatusUnsupportedMediaType {
					t.Fatalf("err = %v (status %d), want 415 ErrUnsupportedMediaType", err, StatusOf(err))
				}
				return
			}
			if err != nil || got != tt.want {
				t.Errorf("RequestType = %q, %v; want %q", got, err, tt.want)
			}
		})
	}
}

func TestNegotiatorResponseType(t *testing.T) {
	tests := []struct {
		name          string
		defaultAccept string
		accept        []string
		want          string
		wantErr       bool
	}{
		{name: "no accept", want: "text/csv"},
		{name: "star", accept: []string{"*/*"}, want: "text/csv"},
		{name: "exact second", accept: []string{"application/json"}, want: "application/json"},
		{name: "exact beats star", accept: []string{"*/*", "application/json"}, want: "application/json"},
		{name: "type wildcard", accept: []string{"application/*"}, want: "application/json"},
		{name: "higher q wins", accept: []string{"text/csv;q=0.2, application/json;q=0.9"}, want: "application/json"},
		{name: "q zero excludes", accept: []string{"text/csv;q=0, */*"}, want: "application/json"},
		{name: "specific q0 beats wildcard", accept: []string{"*/*, text/csv;q=0, application/json;q=0"}, wantErr: true},
		{name: "equal q server order", accept: []string{"application/json, text/csv"}, want: "text/csv"},
		{name: "unsupported", accept: []string{"application/xml"}, wantErr: true},
		{name: "malformed ignored", accept: []string{"garbage"}, want: "text/csv"},
		{name: "env default on star", defaultAccept: "application/json", accept: []string{"*/*"}, want: "application/json"},
		{name: "env default on empty", defaultAccept: "application/json; charset=utf-8", want: "application/json"},
		{name: "env default yields to explicit", defaultAccept: "application/json", accept: []string{"text/csv"}, want: "text/csv"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			n, err := NewNegotiator([]string{"text/plain"}, []string{"text/csv", "application/json"}, tt.defaultAccept)
			if err != nil {
				t.Fatal(err)
			}
			req := httptest.NewRequest(http.MethodPost, "/invocations", nil)
			for _, a := range tt.accept {
				req.Header.Add("Accept", a)
			}
			got, err := n.ResponseType(req)
			if tt.wantErr {
				if !errors.Is(err, ErrNotAcceptable) || StatusOf(err) != http.StatusNotAcceptable {
					t.Fatalf("got %q, %v; want 406 ErrNotAcceptable", got, err)
				}
				return
			}
			if err != nil || got != tt.want {
				t.Errorf("ResponseType = %q, %v; want %q", got, err, tt.want)
			}
		})
	}
}

func TestNewNegotiatorErrors(t *testing.T) {
	tests := []struct {
		name               string
		consumes, produces []string
		def                string
	}{
		{"no consumes", nil, []string{"a/b"}, ""},
		{"no produces", []string{"a/b"}, nil, ""},
		{"unsupported default", []string{"a/b"}, []string{"text/csv"}, "application/json"},
		{"malformed default", []string{"a/b"}, []string{"text/csv"}, "text/csv;;=="},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := NewNegotiator(tt.consumes, tt.produces, tt.def); !errors.Is(err, ErrConfig) {
				t.Errorf("err = %v, want ErrConfig", err)
			}
		})
	}
	n, err := NewNegotiator([]string{"a/b"}, []string{"x/1", "x/2", "x/3"}, "x/3")
	if err != nil {
		t.Fatal(err)
	}
	if got, want := n.Produces(), []string{"x/3", "x/1", "x/2"}; !reflect.DeepEqual(got, want) {
		t.Errorf("Produces = %v, want %v", got, want)
	}
}
