package host_test

// The real-framework examples (examples/preprocess-inference, examples/ab-test,
// examples/mme) served as their README says, on mce's scikit-learn and PyTorch
// framework images, with the artifacts scripts/framework-models.sh trains. The
// expected answers come from the training scripts, computed in-process (no
// HTTP, no CSV, no serving toolkit), and the true labels of the held-out rows.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sagemakerruntime"
	"github.com/aws/aws-sdk-go-v2/service/sagemakerruntime/types"

	"github.com/mce-run/mce/internal/testenv"
)

// invokeTimeout bounds one call in these tests: a multi-model call may
// extract and load its model first.
const invokeTimeout = 60 * time.Second

// frameworkTimeout is the container time limit here: a Python framework
// container's first call on a loaded 2-core machine took over 5 s (seen at
// load average 12); none of these tests is about the limit.
const frameworkTimeout = 30 * time.Second

// frameworkSetup builds the framework images and the examples' artifacts
// once per test binary (both scripts are cached, so this is quick after the
// first run) and returns the repository root.
func frameworkSetup(t *testing.T) string {
	t.Helper()
	testenv.Docker(t)
	root := testenv.RepoRoot(t)
	testenv.FrameworkImages(t)
	testenv.FrameworkModels(t)
	return root
}

func readJSON(t *testing.T, path string, v any) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, v); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
}

// csvRows writes rows as CSV with the shortest text that reads back to the
// same float64.
func csvRows(rows [][]float64) []byte {
	var b strings.Builder
	for _, row := range rows {
		for j, v := range row {
			if j > 0 {
				b.WriteByte(',')
			}
			b.WriteString(strconv.FormatFloat(v, 'g', -1, 64))
		}
		b.WriteByte('\n')
	}
	return []byte(b.String())
}

func scrapeURL(t *testing.T, url string) string {
	t.Helper()
	resp, err := http.Get(url + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// metricLabeled is the value of the series name{...} whose labels contain
// every one of labels (e.g. `endpoint="ab-test"`); 0 when there is none.
func metricLabeled(text, name string, labels ...string) float64 {
	total := 0.0
	for _, line := range strings.Split(text, "\n") {
		rest, ok := strings.CutPrefix(line, name+"{")
		if !ok {
			continue
		}
		i := strings.LastIndex(rest, "} ")
		if i < 0 {
			continue
		}
		match := true
		for _, l := range labels {
			match = match && strings.Contains(rest[:i], l)
		}
		if v, err := strconv.ParseFloat(rest[i+2:], 64); match && err == nil {
			total += v
		}
	}
	return total
}

// TestFrameworkChainOnDocker: examples/preprocess-inference, scikit-learn
// StandardScaler+PCA → PyTorch MLP on the digits test rows, CSV between them.
func TestFrameworkChainOnDocker(t *testing.T) {
	t.Parallel() // beside TestAsyncTTLAndInvocationTimeout's wait on the clock
	root := frameworkSetup(t)
	var want struct {
		Accuracy      float64
		Rows          [][]float64
		Labels        []int
		Predictions   []int
		Probabilities [][]float64
		Margins       []float64
	}
	readJSON(t, filepath.Join(root, "build/models/framework/digits-expected.json"), &want)
	c, url := dockerHostURLTimeout(t, frameworkTimeout, filepath.Join(root, "examples/preprocess-inference/endpoint.yaml"))

	// All 450 held-out images in one CSV request, JSON out.
	out, err := invoke(t, c, &sagemakerruntime.InvokeEndpointInput{EndpointName: aws.String("preprocess-inference"),
		ContentType: aws.String("text/csv"), Accept: aws.String("application/json"), Body: csvRows(want.Rows)})
	if err != nil {
		t.Fatal(err)
	}
	if ct := aws.ToString(out.ContentType); ct != "application/json" {
		t.Errorf("Content-Type = %q", ct)
	}
	var got struct {
		Predictions   []int
		Probabilities [][]float64
	}
	if err := json.Unmarshal(out.Body, &got); err != nil || len(got.Predictions) != len(want.Rows) || len(got.Probabilities) != len(want.Rows) {
		t.Fatalf("answer (%v): %.300s", err, out.Body)
	}
	correct := 0
	for i, p := range got.Predictions {
		if p == want.Labels[i] {
			correct++
		}
		// The rows cross the chain as CSV text (float64 → text → float32):
		// only a near tie could change the winner.
		if p != want.Predictions[i] && want.Margins[i] > 1e-3 {
			t.Errorf("row %d: digit %d, in-process %d (margin %.4f)", i, p, want.Predictions[i], want.Margins[i])
		}
		for k, v := range got.Probabilities[i] {
			if math.Abs(v-want.Probabilities[i][k]) > 1e-4 {
				t.Errorf("row %d class %d: probability %v, in-process %v", i, k, v, want.Probabilities[i][k])
				break
			}
		}
	}
	acc := float64(correct) / float64(len(want.Labels))
	t.Logf("chain accuracy on %d test images: %.4f (build time: %.4f)", len(want.Labels), acc, want.Accuracy)
	if acc < want.Accuracy-0.005 {
		t.Errorf("accuracy %.4f through mce, %.4f at build time", acc, want.Accuracy)
	}

	// Accept text/csv: one digit per line; a JSON request body (the sklearn
	// container's default decoder); and a single image.
	out, err = invoke(t, c, &sagemakerruntime.InvokeEndpointInput{EndpointName: aws.String("preprocess-inference"),
		ContentType: aws.String("text/csv"), Accept: aws.String("text/csv"), Body: csvRows(want.Rows[:10])})
	if err != nil {
		t.Fatal(err)
	}
	if ct := aws.ToString(out.ContentType); ct != "text/csv" {
		t.Errorf("Content-Type = %q", ct)
	}
	if g, w := strings.Fields(string(out.Body)), fmt.Sprint(want.Predictions[:10]); "["+strings.Join(g, " ")+"]" != w {
		t.Errorf("CSV answer %q, want %s", out.Body, w)
	}
	body, _ := json.Marshal(want.Rows[10:13])
	out, err = invoke(t, c, &sagemakerruntime.InvokeEndpointInput{EndpointName: aws.String("preprocess-inference"),
		ContentType: aws.String("application/json"), Accept: aws.String("text/csv"), Body: body})
	if err != nil {
		t.Fatal(err)
	}
	if g, w := strings.Fields(string(out.Body)), fmt.Sprint(want.Predictions[10:13]); "["+strings.Join(g, " ")+"]" != w {
		t.Errorf("JSON request: answer %q, want %s", out.Body, w)
	}

	// A content type no decoder takes: the preprocessing container's 415.
	_, err = invoke(t, c, &sagemakerruntime.InvokeEndpointInput{EndpointName: aws.String("preprocess-inference"),
		ContentType: aws.String("image/png"), Body: []byte("\x89PNG")})
	var me *types.ModelError
	if !errors.As(err, &me) || aws.ToInt32(me.OriginalStatusCode) != 415 || !strings.Contains(aws.ToString(me.Message), "preprocess") {
		t.Errorf("err = %v, want ModelError 415 from preprocess", err)
	}

	m := scrapeURL(t, url)
	for _, h := range []string{"preprocess", "network"} {
		if n := metricLabeled(m, "mce_container_latency_seconds_count", `container="`+h+`"`); n < 3 {
			t.Errorf("mce_container_latency_seconds_count for %s = %v, want ≥ 3", h, n)
		}
	}
}

type cancerAnswer struct {
	ModelVersion string `json:"model_version"`
	Predictions  []struct {
		Label             string  `json:"label"`
		ProbabilityBenign float64 `json:"probability_benign"`
	} `json:"predictions"`
}

// TestFrameworkABTestOnDocker: examples/ab-test, logistic regression (v1) vs
// random forest (v2) on the breast-cancer test rows, by variant weights and by
// TargetVariant on ab-test, by TargetContainerHostname on ab-test-direct.
func TestFrameworkABTestOnDocker(t *testing.T) {
	root := frameworkSetup(t)
	var want struct {
		Classes  []string
		Rows     [][]float64
		Labels   []int
		Versions map[string]struct {
			Accuracy      float64
			Predictions   []int
			Probabilities []float64
		}
	}
	readJSON(t, filepath.Join(root, "build/models/framework/cancer-expected.json"), &want)
	c, url := dockerHostURLTimeout(t, frameworkTimeout, filepath.Join(root, "examples/ab-test/endpoint.yaml"))

	// Direct: every test row to each version, against the in-process answers.
	for _, v := range []string{"v1", "v2"} {
		out, err := invoke(t, c, &sagemakerruntime.InvokeEndpointInput{EndpointName: aws.String("ab-test-direct"),
			TargetContainerHostname: aws.String(v), ContentType: aws.String("text/csv"), Body: csvRows(want.Rows)})
		if err != nil {
			t.Fatalf("%s: %v", v, err)
		}
		var got cancerAnswer
		if err := json.Unmarshal(out.Body, &got); err != nil || len(got.Predictions) != len(want.Rows) {
			t.Fatalf("%s: answer (%v): %.300s", v, err, out.Body)
		}
		if got.ModelVersion != v {
			t.Errorf("container %s answered as model %q", v, got.ModelVersion)
		}
		exp, correct := want.Versions[v], 0
		for i, p := range got.Predictions {
			if p.Label != want.Classes[exp.Predictions[i]] || math.Abs(p.ProbabilityBenign-exp.Probabilities[i]) > 2e-6 {
				t.Errorf("%s row %d: %+v, in-process %s %v", v, i, p, want.Classes[exp.Predictions[i]], exp.Probabilities[i])
			}
			if p.Label == want.Classes[want.Labels[i]] {
				correct++
			}
		}
		acc := float64(correct) / float64(len(want.Labels))
		t.Logf("%s accuracy through mce: %.4f (build time %.4f)", v, acc, exp.Accuracy)
		if math.Abs(acc-exp.Accuracy) > 1e-9 {
			t.Errorf("%s accuracy %.4f, build time %.4f", v, acc, exp.Accuracy)
		}
	}
	_, err := invoke(t, c, &sagemakerruntime.InvokeEndpointInput{EndpointName: aws.String("ab-test-direct"),
		ContentType: aws.String("text/csv"), Body: csvRows(want.Rows[:1])})
	var ve *types.ValidationError
	if !errors.As(err, &ve) {
		t.Errorf("Direct endpoint without TargetContainerHostname: err = %v, want ValidationError", err)
	}

	// Weighted variants (70/30): the answering variant is the model version
	// that answered, and both carry traffic.
	const calls = 100
	seen := map[string]int{}
	for i := range calls {
		row := i % len(want.Rows)
		out, err := invoke(t, c, &sagemakerruntime.InvokeEndpointInput{EndpointName: aws.String("ab-test"),
			ContentType: aws.String("text/csv"), Accept: aws.String("text/csv"), Body: csvRows(want.Rows[row : row+1])})
		if err != nil {
			t.Fatal(err)
		}
		v := aws.ToString(out.InvokedProductionVariant)
		seen[v]++
		if exp, ok := want.Versions[v]; !ok {
			t.Fatalf("answered by variant %q", v)
		} else if got := strings.TrimSpace(string(out.Body)); got != want.Classes[exp.Predictions[row]] {
			t.Errorf("variant %s row %d: %q, want %q", v, row, got, want.Classes[exp.Predictions[row]])
		}
	}
	t.Logf("variant split over %d calls: %v", calls, seen)
	// 70 % of 100: the standard deviation is 4.6 calls; ±20 is > 4 of them.
	if seen["v1"] < 50 || seen["v1"] > 90 || seen["v2"] == 0 {
		t.Errorf("split %v, want about 70/30", seen)
	}
	out, err := invoke(t, c, &sagemakerruntime.InvokeEndpointInput{EndpointName: aws.String("ab-test"),
		TargetVariant: aws.String("v2"), ContentType: aws.String("text/csv"), Body: csvRows(want.Rows[:1])})
	if err != nil {
		t.Fatal(err)
	}
	var got cancerAnswer
	if json.Unmarshal(out.Body, &got); got.ModelVersion != "v2" || aws.ToString(out.InvokedProductionVariant) != "v2" {
		t.Errorf("TargetVariant v2: variant %q, body %s", aws.ToString(out.InvokedProductionVariant), out.Body)
	}

	// The comparison the README shows, from mce's metrics.
	m := scrapeURL(t, url)
	for v, n := range map[string]int{"v1": seen["v1"], "v2": seen["v2"] + 1} {
		if got := metricLabeled(m, "mce_invocations_total", `endpoint="ab-test"`, `variant="`+v+`"`); got != float64(n) {
			t.Errorf("mce_invocations_total{ab-test,%s} = %v, want %d", v, got, n)
		}
		if got := metricLabeled(m, "mce_container_latency_seconds_count", `endpoint="ab-test-direct"`, `container="`+v+`"`); got != 1 {
			t.Errorf("mce_container_latency_seconds_count{ab-test-direct,%s} = %v, want 1", v, got)
		}
	}
}

// TestFrameworkMultiModelOnDocker: examples/mme with 30 of its 200 PyTorch
// models; its memory budget holds fewer than 30, so models are evicted and
// reloaded, and every answer comes from the right model's own script.
func TestFrameworkMultiModelOnDocker(t *testing.T) {
	t.Parallel() // beside TestAsyncTTLAndInvocationTimeout's wait on the clock
	root := frameworkSetup(t)
	var man struct {
		Models []struct {
			TargetModel string          `json:"target_model"`
			Request     json.RawMessage `json:"request"`
			Response    struct {
				Model         string      `json:"model"`
				Predictions   []int       `json:"predictions"`
				Probabilities [][]float64 `json:"probabilities"`
			} `json:"response"`
		} `json:"models"`
	}
	readJSON(t, filepath.Join(root, "build/models/mme-torch/manifest.json"), &man)
	if len(man.Models) != 200 {
		t.Fatalf("manifest has %d models, want 200", len(man.Models))
	}
	c, url := dockerHostURLTimeout(t, frameworkTimeout, filepath.Join(root, "examples/mme/endpoint.yaml"))
	call := func(i int) {
		t.Helper()
		m := man.Models[i]
		ctx, cancel := context.WithTimeout(context.Background(), invokeTimeout)
		defer cancel()
		out, err := c.InvokeEndpoint(ctx, &sagemakerruntime.InvokeEndpointInput{EndpointName: aws.String("mme"),
			TargetModel: aws.String(m.TargetModel), ContentType: aws.String("application/json"), Body: m.Request})
		if err != nil {
			t.Fatalf("%s: %v", m.TargetModel, err)
		}
		var got struct {
			Model         string      `json:"model"`
			Predictions   []int       `json:"predictions"`
			Probabilities [][]float64 `json:"probabilities"`
		}
		if err := json.Unmarshal(out.Body, &got); err != nil {
			t.Fatalf("%s: %v: %.200s", m.TargetModel, err, out.Body)
		}
		if got.Model != m.Response.Model || fmt.Sprint(got.Predictions) != fmt.Sprint(m.Response.Predictions) || len(got.Probabilities) != len(m.Response.Probabilities) {
			t.Fatalf("%s: %.300s, want model %s predictions %v", m.TargetModel, out.Body, m.Response.Model, m.Response.Predictions)
		}
		for r, row := range got.Probabilities {
			for k, v := range row {
				if math.Abs(v-m.Response.Probabilities[r][k]) > 2e-6 {
					t.Fatalf("%s row %d class %d: %v, in-process %v", m.TargetModel, r, k, v, m.Response.Probabilities[r][k])
				}
			}
		}
	}
	const n = 30
	for i := range n {
		call(i)
	}
	m := scrapeURL(t, url)
	ep := `endpoint="mme"`
	loads, unloads := metricLabeled(m, "mce_model_loading_seconds_count", ep), metricLabeled(m, "mce_model_unloading_seconds_count", ep)
	loaded := metricLabeled(m, "mce_loaded_models", ep)
	evictions := metricLabeled(m, "mce_model_evictions_total", ep)
	t.Logf("after %d cold calls: %v loads, %v unloads (%v evictions), %v loaded", n, loads, unloads, evictions, loaded)
	if loads < n || unloads == 0 || loaded >= n || loaded < 1 {
		t.Errorf("after %d models: %v loads, %v unloads, %v loaded; want ≥ %d loads, some unloads, fewer than %d loaded", n, loads, unloads, loaded, n, n)
	}
	if evictions == 0 || evictions > unloads {
		t.Errorf("%v evictions for %v unloads; want some, at most one per unload", evictions, unloads)
	}
	if per := metricLabeled(m, "mce_model_loaded", ep); per != loaded {
		t.Errorf("mce_model_loaded sums to %v, mce_loaded_models says %v", per, loaded)
	}
	// The last model is warm (a cache hit, no load); the first was evicted
	// and comes back with a load.
	hits := metricLabeled(m, "mce_model_cache_hits_total", ep)
	call(n - 1)
	call(0)
	m = scrapeURL(t, url)
	if got := metricLabeled(m, "mce_model_cache_hits_total", ep); got != hits+1 {
		t.Errorf("cache hits %v → %v, want one more (model %d warm)", hits, got, n-1)
	}
	if got := metricLabeled(m, "mce_model_loading_seconds_count", ep); got != loads+1 {
		t.Errorf("loads %v → %v, want one more (model 0 evicted, reloaded)", loads, got)
	}
}
