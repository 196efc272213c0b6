package framework

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/mce-run/mce/pipeline"
)

// chainContainer is one started framework container as mce's pipeline sees it.
type chainContainer struct{ host, url string }

func (c chainContainer) Hostname() string { return c.host }
func (c chainContainer) BaseURL() string  { return c.url }
func (c chainContainer) Ready() bool      { return true }

// TestSerialChain runs a two-container serial chain through mce's own pipeline: scikit-learn
// (SAGEMAKER_DEFAULT_INVOCATIONS_ACCEPT=text/csv, the documented way to set an intermediate
// container's answer) → PyTorch, whose request Content-Type is the first container's response
// Content-Type. The client's Accept reaches the last container.
func TestSerialChain(t *testing.T) {
	t.Parallel()
	s := newSuite(t)
	first := s.serve(t, sklearnImage, s.linregModel(t, "sk_basic"), "SAGEMAKER_DEFAULT_INVOCATIONS_ACCEPT=text/csv")
	w, b := [][]float64{{2}, {-1}}, []float64{0.5, 1}
	dir := tempDir(t)
	s.generate(t, pytorchImage, dir, spec{"kind": "torch", "weight": w, "bias": b})
	second := s.serve(t, pytorchImage, dir)

	iv := pipeline.NewInvoker(pipeline.Options{})
	defer iv.Close()
	route := pipeline.NewRoute("chain", pipeline.Serial, []*pipeline.Variant{
		pipeline.NewVariant("AllTraffic", 1, []*pipeline.Instance{pipeline.NewInstance([]pipeline.Container{
			chainContainer{"sklearn", first.base}, chainContainer{"pytorch", second.base},
		})}),
	})
	body, _ := json.Marshal(skRows)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	resp, err := iv.Invoke(ctx, route, &pipeline.Request{Body: body, ContentType: "application/json", Accept: "application/json"})
	if err != nil {
		t.Fatalf("chain: %v", err)
	}
	defer resp.Release()
	if resp.ContentType != "application/json" {
		t.Fatalf("Content-Type %q, want application/json", resp.ContentType)
	}
	var mid [][]float64
	for _, y := range linear(skCoef, skIntercept, skRows) {
		mid = append(mid, []float64{float64(float32(y))}) // the CSV becomes a float32 tensor
	}
	assertNear2(t, "chain", jsonRows(t, resp.Body), affine(w, b, mid), 1e-6)
}
