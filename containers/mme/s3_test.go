package mme

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"

	"github.com/mce-run/mce/containers/artifact"
	"github.com/mce-run/mce/internal/s3test"
)

// TestS3Prefix downloads models from a real S3 server (versitygw) on
// loopback, with static credentials and path-style addressing.
func TestS3Prefix(t *testing.T) {
	s3 := s3test.Start(t)
	s3.Bucket(t, "models")
	s3.Put(t, "models", "mme/en/sentiment.tar.gz", modelArchive(t, "en", 200_000))
	s3.Put(t, "models", "mme/de/sentiment.tar.gz", modelArchive(t, "de", 1000))

	fetcher, err := artifact.NewFetcher(artifact.Options{S3: artifact.S3Options{
		Endpoint: s3.Endpoint, Region: s3.Region, UsePathStyle: true, PartSizeBytes: 64 << 10,
		Credentials: s3.Credentials(),
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
