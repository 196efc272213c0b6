package main

import (
	"context"
	"errors"
	"net"
	"strings"
	"testing"
	"time"
)

func TestInferContentType(t *testing.T) {
	for _, tt := range []struct {
		args     []string
		explicit string
		want     string
		wantErr  string
	}{
		{[]string{"ep", "what a lovely day"}, "", "text/plain", ""},
		{[]string{"ep", `{"a":1}`}, "", "text/plain", ""},
		{[]string{"ep", "@x.json"}, "", "application/json", ""},
		{[]string{"ep", "@dir/X.CSV"}, "", "text/csv", ""},
		{[]string{"ep", "@a.txt"}, "", "text/plain", ""},
		{[]string{"ep", "@a.npy"}, "", "application/x-npy", ""},
		{[]string{"ep", "@a.jsonl"}, "", "application/jsonlines", ""},
		{[]string{"ep", "@a.jpeg"}, "", "image/jpeg", ""},
		{[]string{"ep", "@a.csv"}, "application/json", "application/json", ""},
		{[]string{"ep", "-"}, "text/csv", "text/csv", ""},
		{[]string{"ep", "@a.bin"}, "", "", `extension ".bin": pass --content-type`},
		{[]string{"ep", "@noext"}, "", "", "pass --content-type"},
		{[]string{"ep", "-"}, "", "", "standard input: pass --content-type"},
		{[]string{"ep"}, "", "", "standard input: pass --content-type"},
	} {
		got, err := inferContentType(tt.args, tt.explicit)
		if got != tt.want || (err == nil) != (tt.wantErr == "") || (err != nil && !strings.Contains(err.Error(), tt.wantErr)) {
			t.Errorf("inferContentType(%q, %q) = %q, %v; want %q, error with %q", tt.args, tt.explicit, got, err, tt.want, tt.wantErr)
		}
	}
}

func TestReadBodyArgStdinAndFile(t *testing.T) {
	b, err := readBodyArg([]string{"ep", "-"}, strings.NewReader("from stdin"))
	if err != nil || string(b) != "from stdin" {
		t.Errorf("stdin: %q, %v", b, err)
	}
	if _, err := readBodyArg([]string{"ep", "@/nonexistent/x.json"}, nil); err == nil {
		t.Error("a missing @file read without error")
	}
}

// TestCannotConnectFailsFast calls a closed port: the CLI must answer at
// once (no SDK backoff) with the URL and how to start mce.
func TestCannotConnectFailsFast(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	url := "http://" + l.Addr().String()
	l.Close()
	for _, args := range [][]string{
		{"endpoints", "--endpoint-url", url},
		{"invoke", "ep", "--endpoint-url", url, "hello"},
	} {
		start := time.Now()
		_, err := runCLI(context.Background(), args...)
		took := time.Since(start)
		var ee *exitError
		if !errors.As(err, &ee) || !strings.Contains(ee.msg, "cannot connect to mce at "+url) || !strings.Contains(ee.msg, "mce serve") {
			t.Errorf("%s: %v", args[0], err)
		}
		if took > time.Second {
			t.Errorf("%s took %v to report a closed port", args[0], took)
		}
	}
}

func TestDropNulls(t *testing.T) {
	var b strings.Builder
	if err := printJSON(&b, map[string]any{"A": nil, "B": map[string]any{"C": nil, "D": 1}, "E": []any{map[string]any{"F": nil}}}); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(b.String(), "null") || !strings.Contains(b.String(), `"D": 1`) {
		t.Errorf("printJSON kept nulls:\n%s", b.String())
	}
}

func TestBuildVersion(t *testing.T) {
	if v := buildVersion(); v == "" || strings.HasPrefix(v, "dev,") {
		t.Errorf("buildVersion() = %q", v)
	}
}
