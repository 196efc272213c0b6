package artifact

import (
	"context"
	"errors"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/credentials"
)

// TestCheck: Check finds what Prepare would find missing, without
// downloading or extracting anything.
func TestCheck(t *testing.T) {
	fake := newS3(t, "us-east-1", "models", "empty")
	fake.put(t, "models", "m/model.tar.gz", buildTar(t, true, file("a", "x")))
	fake.put(t, "models", "mme/a.tar.gz", buildTar(t, true, file("a", "x")))
	root := t.TempDir()
	os.WriteFile(filepath.Join(root, "model.tar.gz"), buildTar(t, true, file("a", "x")), 0o644)
	os.Mkdir(filepath.Join(root, "folder"), 0o755)
	opts := fake.options()
	opts.ModelRoots = []string{root}
	f, err := NewFetcher(opts)
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		url    string
		prefix bool  // multi-model
		want   error // nil: reachable
	}{
		{"file://" + root + "/model.tar.gz", false, nil},
		{"file://model.tar.gz", false, nil}, // relative to baseDir
		{"file://" + root + "/folder", false, nil},
		{"file://" + root + "/folder", true, nil},
		{"file://" + root + "/model.tar.gz", true, ErrUnsupportedURL},
		{"file://" + root + "/missing.tar.gz", false, ErrNotFound},
		{"file://" + root + "/model.tar.gz/x", false, ErrNotFound},
		{"file:///etc/passwd", false, ErrOutsideModelRoots},
		{"s3://models/m/model.tar.gz", false, nil},
		{"s3://models/m/other.tar.gz", false, ErrNotFound},
		{"s3://nobucket/m/model.tar.gz", false, ErrNotFound},
		{"s3://models/mme/", false, nil},
		{"s3://models/mme", true, nil},
		{"s3://models/none/", false, ErrNotFound},
		{"s3://empty/", true, nil}, // a multi-model prefix may be empty at first
		{"s3://empty/", false, ErrNotFound},
		{"s3://nobucket/", true, ErrNotFound},
		{"s3://models", false, ErrUnsupportedURL},
		{"https://example.com/m.tar.gz", false, ErrUnsupportedURL},
	}
	for _, tc := range tests {
		err := f.Check(context.Background(), tc.url, root, tc.prefix)
		if tc.want == nil && err != nil || tc.want != nil && !errors.Is(err, tc.want) {
			t.Errorf("Check(%q, prefix %v) = %v, want %v", tc.url, tc.prefix, err, tc.want)
		}
		if err != nil && strings.Contains(err.Error(), root) && !strings.Contains(tc.url, root) {
			t.Errorf("Check(%q): the error names a host path: %v", tc.url, err)
		}
	}
	if n := fake.rangeGets.Load(); n != 0 {
		t.Errorf("Check downloaded (%d ranged GETs)", n)
	}
	if entries, _ := os.ReadDir(root); len(entries) != 2 {
		t.Errorf("Check wrote into the model root: %d entries", len(entries))
	}
}

// TestCheckBounded: an S3 endpoint that accepts connections and never
// answers holds Check only as long as its context allows.
func TestCheckBounded(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			defer c.Close() // held open, never answered
		}
	}()
	f, err := NewFetcher(Options{S3: S3Options{Endpoint: "http://" + ln.Addr().String(), Region: "us-east-1", UsePathStyle: true,
		Credentials: credentials.NewStaticCredentialsProvider("AKIDTEST", "secret", "")}})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	start := time.Now()
	err = f.Check(ctx, "s3://models/m.tar.gz", "", false)
	if err == nil || time.Since(start) > 3*time.Second {
		t.Errorf("Check against a silent S3 = %v after %s; want an error within the context's 300 ms", err, time.Since(start))
	}
}

// TestCheckWithoutCredentials: no credentials is ErrNoCredentials, found
// before any S3 request.
func TestCheckWithoutCredentials(t *testing.T) {
	fake := newS3(t, "us-east-1", "models")
	imds, _ := imdsRecorder(t)
	f, err := NewFetcher(Options{S3: S3Options{Endpoint: fake.proxyURL, UsePathStyle: true, InstanceMetadataEndpoint: imds,
		CredentialsTimeout: 300 * time.Millisecond}})
	if err != nil {
		t.Fatal(err)
	}
	err = f.Check(context.Background(), "s3://models/m.tar.gz", "", false)
	if !errors.Is(err, ErrNoCredentials) {
		t.Fatalf("Check = %v, want ErrNoCredentials", err)
	}
}
