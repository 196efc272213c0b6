package host

import (
	"context"
	"errors"
	"os"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/rs/zerolog"

	"github.com/mce-run/mce/containers/artifact"
	"github.com/mce-run/mce/host/async"
	"github.com/mce-run/mce/host/store"
	"github.com/mce-run/mce/internal/testenv"
)

// TestAsyncRecoveryFindsItsAnswer covers the window the SIGKILL test can
// rarely hit: mce died after writing a request's answer to S3 and before
// marking the request done. On recovery the request finds its own answer
// (by the key in the object's metadata) and is only marked done: its answer
// is not written again, and nothing goes to its failure location. A request
// in the same state whose answer is not there (or is another request's)
// is settled normally — here at its failure location, since its endpoint is
// gone.
func TestAsyncRecoveryFindsItsAnswer(t *testing.T) {
	s3srv := testenv.S3Server(t)
	s3srv.Bucket(t, "async")
	fetcher, err := artifact.NewFetcher(artifact.Options{ModelRoots: []string{os.TempDir()},
		S3: artifact.S3Options{Endpoint: s3srv.Endpoint, Region: s3srv.Region, UsePathStyle: true, Credentials: s3srv.Credentials()}})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	st := openStore(t)
	now := time.Now()
	answered := async.Record{Key: "k-answered", Endpoint: "gone", InferenceID: "answered", Input: "s3://async/in",
		Output: "s3://async/out/answered.out", Failure: "s3://async/failed/answered-error.out", Accepted: now, TTL: time.Hour, Timeout: time.Minute}
	other := async.Record{Key: "k-other", Endpoint: "gone", InferenceID: "other", Input: "s3://async/in",
		Output: "s3://async/out/other.out", Failure: "s3://async/failed/other-error.out", Accepted: now, TTL: time.Hour, Timeout: time.Minute}
	for _, r := range []async.Record{answered, other} {
		if err := st.Put(store.AsyncRequests, r.Key, r); err != nil {
			t.Fatal(err)
		}
	}
	// The first request's answer is in S3; the second's output location
	// holds an object written for some other request.
	if err := fetcher.PutObject(ctx, answered.Output, []byte("the answer"), "text/plain", map[string]string{async.MetaRequest: "k-answered"}); err != nil {
		t.Fatal(err)
	}
	if err := fetcher.PutObject(ctx, other.Output, []byte("not mine"), "text/plain", map[string]string{async.MetaRequest: "k-someone-else"}); err != nil {
		t.Fatal(err)
	}
	s := New(Config{Backend: &fakeBackend{t: t}, Store: st, AsyncObjects: fetcher, Logger: zerolog.Nop()})
	defer s.Close(ctx)
	if err := s.Recover(ctx); err != nil {
		t.Fatal(err)
	}
	c := s3srv.Client(t)
	exists := func(key string) bool {
		_, err := c.HeadObject(ctx, &s3.HeadObjectInput{Bucket: aws.String("async"), Key: aws.String(key)})
		return err == nil
	}
	deadline := time.Now().Add(10 * time.Second)
	for !exists("failed/other-error.out") && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	if got := string(s3srv.Get(t, "async", "failed/other-error.out")); got != `{"__type":"ValidationError","Message":"Endpoint gone was deleted before inference request other ran."}` {
		t.Errorf("the other request's failure: %q", got)
	}
	time.Sleep(300 * time.Millisecond) // a wrong failure write for the answered request would show now
	if exists("failed/answered-error.out") {
		t.Error("the request answered before the restart was also written to its failure location")
	}
	if got := string(s3srv.Get(t, "async", "out/answered.out")); got != "the answer" {
		t.Errorf("the answer was rewritten: %q", got)
	}
	var left []string
	store.List(st, store.AsyncRequests, func(r async.Record) error { left = append(left, r.Key); return nil })
	if len(left) != 0 {
		t.Errorf("requests left in the store: %v", left)
	}
	if err := st.Get(store.AsyncRequests, "k-answered", &async.Record{}); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("the answered request is still queued: %v", err)
	}
}
