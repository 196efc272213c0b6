package pipeline_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"

	"github.com/mce-run/mce/pipeline"
)

// container is what the containers package provides: a hostname, an address
// and a health flag.
type container struct{ host, url string }

func (c container) Hostname() string { return c.host }
func (c container) BaseURL() string  { return c.url }
func (c container) Ready() bool      { return true }

// A two-step serial chain: a featurizer answering CSV, then a classifier that
// receives the CSV with the featurizer's Content-Type.
func Example() {
	featurizer := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/csv")
		_, _ = io.WriteString(w, "1.0,2.0")
	}))
	defer featurizer.Close()
	classifier := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		in, _ := io.ReadAll(r.Body)
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"input":%q,"type":%q,"label":"cat"}`, in, r.Header.Get("Content-Type"))
	}))
	defer classifier.Close()

	iv := pipeline.NewInvoker(pipeline.Options{})
	defer iv.Close()
	inst := pipeline.NewInstance([]pipeline.Container{
		container{"featurizer", featurizer.URL},
		container{"classifier", classifier.URL},
	})
	route := pipeline.NewRoute("pets", pipeline.Serial, []*pipeline.Variant{
		pipeline.NewVariant("AllTraffic", 1, []*pipeline.Instance{inst}),
	})

	resp, err := iv.Invoke(context.Background(), route, &pipeline.Request{
		Body:        []byte(`{"image":"…"}`),
		ContentType: "application/json",
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer resp.Release()
	fmt.Println(resp.Variant, resp.ContentType)
	fmt.Println(string(resp.Body))
	// Output:
	// AllTraffic application/json
	// {"input":"1.0,2.0","type":"text/csv","label":"cat"}
}
