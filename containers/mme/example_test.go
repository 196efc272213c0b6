package mme_test

import (
	"context"
	"fmt"
	"net/http"
	"strings"

	"github.com/mce-run/mce/containers/mme"
	"github.com/rs/zerolog"
)

func ExampleModelID() {
	fmt.Println(mme.ModelID("sentiment/en.tar.gz")[:16])
	fmt.Println(mme.ValidTargetModel("../secrets.tar.gz"))
	// Output:
	// 7aa3ec0e01e80005
	// invalid TargetModel "../secrets.tar.gz": it holds a '.' or '..' path segment
}

// Example shows the wiring: one Cache per MultiModel container definition
// of a variant, one Manager per running container, and the pipeline's
// multi-model hop.
func Example() {
	cache, err := mme.NewCache(mme.CacheOptions{
		Dir:    "/var/lib/mce/endpoints/ep/variant-1/models", // mounted read-only at /opt/ml/models
		Prefix: "s3://my-bucket/models/",
		Logger: zerolog.Nop(),
	})
	if err != nil {
		return
	}
	mgr, err := mme.NewManager(mme.ManagerOptions{
		Store:   cache,
		BaseURL: func() string { return "http://172.18.0.5:8080" },
		Logger:  zerolog.Nop(),
	})
	if err != nil {
		return
	}
	defer mgr.Close()

	invoke := func(ctx context.Context, target, body string) (*http.Response, error) {
		for attempt := 0; ; attempt++ {
			lease, err := mgr.Acquire(ctx, target) // *NotReadyError → ModelNotReadyException (429)
			if err != nil {
				return nil, err
			}
			req, _ := http.NewRequestWithContext(ctx, http.MethodPost,
				"http://172.18.0.5:8080/models/"+lease.ModelID()+"/invoke", strings.NewReader(body))
			req.Header.Set(mme.TargetModelHeader, target)
			resp, err := http.DefaultClient.Do(req)
			if err == nil && resp.StatusCode == http.StatusInsufficientStorage && attempt < 3 {
				resp.Body.Close()
				err = lease.OutOfMemory(ctx) // unloads another idle model, or ErrNoMemory
				lease.Release()
				if err != nil {
					return nil, err
				}
				continue
			}
			lease.Release() // after the response body is read, in real code
			return resp, err
		}
	}
	_ = invoke
}
