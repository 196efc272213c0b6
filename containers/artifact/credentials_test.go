package artifact

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/credentials"
)

// imdsRecorder stands in for the instance-metadata service on loopback:
// it counts the calls and never answers, like an address nobody serves.
func imdsRecorder(t *testing.T) (url string, hits *atomic.Int64) {
	hits = new(atomic.Int64)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		<-r.Context().Done()
	}))
	t.Cleanup(func() {
		srv.CloseClientConnections()
		srv.Close()
	})
	return srv.URL, hits
}

// TestS3WithoutCredentials reproduces issue 9, class 9: with no AWS
// credentials an s3:// model made the SDK's chain call the EC2
// instance-metadata address and fail with its raw text. Now the lookup
// fails fast with a message saying where mce looked; the metadata service
// is asked only when not disabled, only for a bounded time, and here only
// at a loopback stand-in (never 169.254.169.254).
func TestS3WithoutCredentials(t *testing.T) {
	var s3Calls atomic.Int64
	s3 := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { s3Calls.Add(1) }))
	t.Cleanup(s3.Close)

	tests := []struct {
		name     string
		disabled string // AWS_EC2_METADATA_DISABLED
		wantHits bool
	}{
		{"metadata disabled", "true", false},
		{"metadata enabled, bounded", "false", true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv("AWS_EC2_METADATA_DISABLED", tc.disabled)
			imds, hits := imdsRecorder(t)
			const timeout = 500 * time.Millisecond
			f, err := NewFetcher(Options{S3: S3Options{Endpoint: s3.URL, UsePathStyle: true,
				InstanceMetadataEndpoint: imds, CredentialsTimeout: timeout}})
			if err != nil {
				t.Fatal(err)
			}
			start := time.Now()
			_, err = f.Prepare(context.Background(), "s3://models/m.tar.gz", "", t.TempDir())
			took := time.Since(start)
			if !errors.Is(err, ErrNoCredentials) {
				t.Fatalf("Prepare = %v, want ErrNoCredentials", err)
			}
			t.Log(err)
			if took > timeout+time.Second {
				t.Errorf("took %s, want about the %s bound at most", took, timeout)
			}
			msg := err.Error()
			for _, want := range []string{"AWS_ACCESS_KEY_ID", "~/.aws/credentials", "~/.aws/config", "AWS_PROFILE",
				"AWS_EC2_METADATA_DISABLED", "--s3-endpoint", `model data "s3://models/m.tar.gz"`} {
				if !strings.Contains(msg, want) {
					t.Errorf("message does not mention %s: %q", want, msg)
				}
			}
			for _, raw := range []string{"operation error", "failed to refresh", "EC2RoleRequestError", "169.254"} {
				if strings.Contains(msg, raw) {
					t.Errorf("message holds the SDK's raw text %q: %q", raw, msg)
				}
			}
			if got := hits.Load() > 0; got != tc.wantHits {
				t.Errorf("instance-metadata stand-in called: %v, want %v", got, tc.wantHits)
			}
			if s3Calls.Load() != 0 {
				t.Errorf("S3 was called %d times without credentials", s3Calls.Load())
			}
		})
	}
}

// TestS3CredentialsFromEnvironment: credentials in the environment are
// used, and the metadata service is not asked.
func TestS3CredentialsFromEnvironment(t *testing.T) {
	fake := newS3(t, "us-east-1", "models")
	fake.put(t, "models", "m.tar.gz", buildTar(t, true, file("a", "x")))
	t.Setenv("AWS_EC2_METADATA_DISABLED", "false")
	t.Setenv("AWS_ACCESS_KEY_ID", fake.AccessKey)
	t.Setenv("AWS_SECRET_ACCESS_KEY", fake.SecretKey)
	imds, hits := imdsRecorder(t)
	f, err := NewFetcher(Options{S3: S3Options{Endpoint: fake.Endpoint, UsePathStyle: true, InstanceMetadataEndpoint: imds}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.Prepare(context.Background(), "s3://models/m.tar.gz", "", t.TempDir()); err != nil {
		t.Fatalf("Prepare: %v", err)
	}
	if hits.Load() != 0 {
		t.Errorf("the metadata service was asked %d times despite credentials in the environment", hits.Load())
	}
}

// TestS3ErrorsHideSDKText: an S3 refusal (the real server refusing a
// wrong secret key) reads as S3's code and message, not the SDK's
// operation/request-ID text.
func TestS3ErrorsHideSDKText(t *testing.T) {
	fake := newS3(t, "us-east-1", "models")
	fake.put(t, "models", "m.tar.gz", buildTar(t, true, file("a", "x")))
	opts := fake.options()
	opts.S3.Credentials = credentials.NewStaticCredentialsProvider(fake.AccessKey, "not-the-secret", "")
	f, err := NewFetcher(opts)
	if err != nil {
		t.Fatal(err)
	}
	_, err = f.Prepare(context.Background(), "s3://models/m.tar.gz", "", t.TempDir())
	if err == nil {
		t.Fatal("Prepare succeeded against a refusing S3")
	}
	t.Log(err)
	if strings.Contains(err.Error(), "operation error") || strings.Contains(err.Error(), "RequestID") {
		t.Errorf("error %q holds the SDK's raw text", err)
	}
	if !strings.Contains(err.Error(), "S3: ") {
		t.Errorf("error %q does not say S3 refused", err)
	}
}
