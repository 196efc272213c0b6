package framework

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"
)

// TestMultiModel: the multi-model container API on the PyTorch image with per-model code (two
// models whose inference.py and helper.py share names but differ), 409/404, and 507 past
// MCE_MODEL_MEMORY_MB until a model is unloaded.
func TestMultiModel(t *testing.T) {
	t.Parallel()
	s := newSuite(t)
	root := tempDir(t)
	wA := [][]float64{{1, 2}, {-1, 0.5}}
	bA := []float64{0.5, 0}
	wB := [][]float64{{3, 0}}
	bB := []float64{-1}
	s.generate(t, pytorchImage, root,
		spec{"dir": "ma/model", "kind": "torch", "weight": wA, "bias": bA},
		spec{"dir": "mb/model", "kind": "torch", "weight": wB, "bias": bB},
		spec{"dir": "big1/model", "kind": "torch", "weight": wB, "bias": bB, "pad_mb": 45},
		spec{"dir": "big2/model", "kind": "torch", "weight": wB, "bias": bB, "pad_mb": 45})
	s.withCode(t, root+"/ma/model", "mme_a")
	s.withCode(t, root+"/mb/model", "mme_b")
	c := s.start(t, pytorchImage, []string{"SAGEMAKER_MULTI_MODEL=true", "MCE_MODEL_MEMORY_MB=80"},
		[]string{root + ":/opt/ml/models:ro"})
	c.waitReady(t, 90*time.Second)

	load := func(name, dir string) response {
		body, _ := json.Marshal(map[string]string{"model_name": name, "url": "/opt/ml/models/" + dir + "/model"})
		return c.do(t, http.MethodPost, "/models", body, "Content-Type: application/json", "X-Amzn-SageMaker-Target-Model: "+dir+".tar.gz")
	}
	rows := [][]float64{{1, 2}, {3, -1}}
	js, _ := json.Marshal(rows)
	type answer struct {
		Model            string      `json:"model"`
		Outputs          [][]float64 `json:"outputs"`
		CustomAttributes *string     `json:"custom_attributes"`
	}
	invoke := func(name string, headers ...string) (response, answer) {
		r := c.do(t, http.MethodPost, "/models/"+name+"/invoke", js, append([]string{"Content-Type: application/json"}, headers...)...)
		var a answer
		if r.status == 200 {
			if err := json.Unmarshal(r.body, &a); err != nil {
				t.Fatalf("%q: %v", r.body, err)
			}
		}
		return r, a
	}

	for _, m := range []string{"ma", "mb"} {
		if r := load("id-"+m, m); r.status != 200 {
			t.Fatalf("load %s: %d %q\n%s", m, r.status, r.body, c.logs(t))
		}
	}
	if r := load("id-ma", "ma"); r.status != 409 {
		t.Fatalf("second load: %d %q, want 409", r.status, r.body)
	}

	// Model A: its own helper scales by 2; model B: its own helper shifts by 100 and sees CustomAttributes.
	wantA := affine(wA, bA, rows)
	for _, r := range wantA {
		for j := range r {
			r[j] *= 2
		}
	}
	wantB := affine(wB, bB, rows)
	for _, r := range wantB {
		for j := range r {
			r[j] += 100
		}
	}
	r, a := invoke("id-ma")
	if r.status != 200 || a.Model != "a" {
		t.Fatalf("invoke A: %d %q", r.status, r.body)
	}
	assertNear2(t, "model A", a.Outputs, wantA, 1e-6)
	r, a = invoke("id-mb", "X-Amzn-SageMaker-Custom-Attributes: tenant=7", "X-Amzn-SageMaker-Target-Model: mb.tar.gz")
	if r.status != 200 || a.Model != "b" || a.CustomAttributes == nil || *a.CustomAttributes != "tenant=7" {
		t.Fatalf("invoke B: %d %q", r.status, r.body)
	}
	assertNear2(t, "model B", a.Outputs, wantB, 1e-6)

	r = c.do(t, http.MethodGet, "/models", nil)
	var list struct {
		Models []struct{ ModelName, ModelURL string } `json:"models"`
	}
	if err := json.Unmarshal(r.body, &list); err != nil || len(list.Models) != 2 ||
		list.Models[0].ModelName != "id-ma" || list.Models[0].ModelURL != "/opt/ml/models/ma/model" {
		t.Fatalf("GET /models: %d %q", r.status, r.body)
	}
	if r := c.do(t, http.MethodGet, "/models/id-mb", nil); r.status != 200 || !strings.Contains(string(r.body), `"modelUrl": "/opt/ml/models/mb/model"`) {
		t.Fatalf("GET /models/id-mb: %d %q", r.status, r.body)
	}

	// Memory: 80 MiB hold the small models and one 45 MiB model, not two.
	if r := load("id-big1", "big1"); r.status != 200 {
		t.Fatalf("load big1: %d %q\n%s", r.status, r.body, c.logs(t))
	}
	r = load("id-big2", "big2")
	if e := r.error(t); r.status != 507 || !strings.Contains(e.Message, "out of memory") {
		t.Fatalf("load big2 over the budget: %d %q, want 507", r.status, r.body)
	}
	if r := c.do(t, http.MethodDelete, "/models/id-big1", nil); r.status != 200 {
		t.Fatalf("unload big1: %d %q", r.status, r.body)
	}
	if r := load("id-big2", "big2"); r.status != 200 {
		t.Fatalf("load big2 after unloading big1: %d %q", r.status, r.body)
	}

	// Unload, then 404 everywhere; the other model is untouched.
	if r := c.do(t, http.MethodDelete, "/models/id-ma", nil); r.status != 200 {
		t.Fatalf("unload A: %d %q", r.status, r.body)
	}
	for _, tc := range []struct{ method, path string }{
		{http.MethodDelete, "/models/id-ma"}, {http.MethodGet, "/models/id-ma"}, {http.MethodPost, "/models/id-ma/invoke"},
		{http.MethodPost, "/models/never-loaded/invoke"},
	} {
		if r := c.do(t, tc.method, tc.path, js, "Content-Type: application/json"); r.status != 404 {
			t.Fatalf("%s %s after unload: %d %q, want 404", tc.method, tc.path, r.status, r.body)
		}
	}
	if r, a := invoke("id-mb"); r.status != 200 || a.Model != "b" {
		t.Fatalf("B after A's unload: %d %q", r.status, r.body)
	}
	// Bad load requests are 4xx.
	for _, body := range []string{`{"model_name": "x", "url": "/etc"}`, `{"model_name": "x", "url": "/opt/ml/models/../../etc"}`, `not json`} {
		if r := c.do(t, http.MethodPost, "/models", []byte(body), "Content-Type: application/json"); r.status != 400 {
			t.Fatalf("load %s: %d %q, want 400", body, r.status, r.body)
		}
	}
	if logs, ok := c.logsWith(t, 10*time.Second, "loaded model id-ma", "unloaded model id-big1"); !ok {
		t.Fatalf("load and unload are not logged:\n%s", logs)
	}
	if ports := s.listeningPorts(t, c); len(ports) != 1 || ports[0] != 8080 {
		t.Fatalf("listening ports %v, want only 8080", ports)
	}
}
