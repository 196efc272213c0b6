package mme

import (
	"context"
	"errors"
	"net/http/httptest"
	"slices"
	"sync"
	"testing"

	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/johannesboyne/gofakes3"
	"github.com/johannesboyne/gofakes3/backend/s3mem"
	"github.com/mce-run/mce/containers/artifact"
)

// TestS3Prefix downloads models from an in-process S3 (gofakes3) on
// loopback, with static credentials and path-style addressing.
func TestS3Prefix(t *testing.T) {
	backend := s3mem.New()
	srv := httptest.NewServer(gofakes3.New(backend).Server())
	t.Cleanup(srv.Close)
	if err := backend.CreateBucket("models"); err != nil {
		t.Fatal(err)
	}
	put := func(key string, data []byte) {
		if _, err := backend.PutObject("models", key, nil, bytesReader(data), int64(len(data)), nil); err != nil {
			t.Fatal(err)
		}
	}
	put("mme/en/sentiment.tar.gz", modelArchive(t, "en", 200_000))
	put("mme/de/sentiment.tar.gz", modelArchive(t, "de", 1000))

	fetcher, err := artifact.NewFetcher(artifact.Options{S3: artifact.S3Options{
		Endpoint: srv.URL, Region: "us-east-1", UsePathStyle: true, PartSizeBytes: 64 << 10,
		Credentials: credentials.NewStaticCredentialsProvider("AKIDTEST", "secret", ""),
	}})
	if err != nil {
		t.Fatal(err)
	}
	e := newEnv(t, envOptions{prefix: "s3://models/mme", cacheOpt: func(o *CacheOptions) { o.Fetcher = fetcher }})

	var wg sync.WaitGroup
	for range 8 {
		for _, m := range []string{"en/sentiment.tar.gz", "de/sentiment.tar.gz"} {
			wg.Go(func() { e.use(t, m) })
		}
	}
	wg.Wait()
	if got := e.mgr.Loaded(); !slices.Equal(got, []string{"de/sentiment.tar.gz", "en/sentiment.tar.gz"}) {
		t.Errorf("Loaded = %v", got)
	}
	if d := e.obs.downloads.Load(); d != 2 {
		t.Errorf("downloads = %d, want 2", d)
	}
	if !e.onDisk("en/sentiment.tar.gz") {
		t.Error("model files missing")
	}
	_, err = e.mgr.Acquire(context.Background(), "fr/sentiment.tar.gz")
	var nf *ModelNotFoundError
	if !errors.As(err, &nf) || nf.URL != "s3://models/mme/fr/sentiment.tar.gz" {
		t.Fatalf("missing S3 model: %v, want *ModelNotFoundError", err)
	}
	if got := e.cacheEntries(t); len(got) != 2 {
		t.Errorf("cache folder = %v after a missing model, want the 2 models only", got)
	}
	e.fake.check(t)
}
