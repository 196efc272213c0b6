package modelserver

import (
	"context"
	"encoding/json"
	"io"
	"math"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/mce-run/mce/examples/containers/internal/smserve"
)

// adapterModel is a 2 → 3 (relu) → 2 FP64 network; its weights are the
// test's own, so that expectations are computed here.
var (
	adW0 = [][]float64{{0.5, -1}, {1.5, 0.25}, {-0.75, 2}}
	adB0 = []float64{0.1, -0.2, 0.3}
	adW1 = [][]float64{{1, -0.5, 0.25}, {-1, 0.75, 0.5}}
	adB1 = []float64{0.05, -0.05}
)

func adapterModelJSON() []byte {
	b, _ := json.Marshal(Spec{
		Inputs:  []TensorSpec{{Name: "INPUT0", Datatype: FP64, Shape: []int64{-1, 2}}},
		Outputs: []TensorSpec{{Name: "OUTPUT0", Datatype: FP64, Shape: []int64{-1, 2}}},
		Layers: []LayerSpec{{Weights: adW0, Bias: adB0, Activation: ActReLU},
			{Weights: adW1, Bias: adB1}},
	})
	return b
}

// forward is the network by hand: relu(W0·x + b0), then W1·h + b1.
func forward(w0, w1 [][]float64, x []float64) []float64 {
	dense := func(w [][]float64, b, in []float64, relu bool) []float64 {
		out := make([]float64, len(w))
		for j, row := range w {
			s := b[j]
			for i, v := range row {
				s += v * in[i]
			}
			if relu && s < 0 {
				s = 0
			}
			out[j] = s
		}
		return out
	}
	return dense(w1, adB1, dense(w0, adB0, x, true), false)
}

// plus is w + scale·(b·a).
func plus(w, b, a [][]float64, scale float64) [][]float64 {
	out := make([][]float64, len(w))
	for j := range w {
		out[j] = make([]float64, len(w[j]))
		for i := range w[j] {
			d := 0.0
			for k := range a {
				d += b[j][k] * a[k][i]
			}
			out[j][i] = w[j][i] + scale*d
		}
	}
	return out
}

func writeAdapter(t *testing.T, dir string, a AdapterSpec) {
	t.Helper()
	b, _ := json.Marshal(a)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, AdapterFile), b, 0o644); err != nil {
		t.Fatal(err)
	}
}

func do(t *testing.T, method, url, body string, hdr ...string) (int, string) {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), method, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

func outputOf(t *testing.T, body string) []float64 {
	t.Helper()
	var r struct {
		Outputs []struct{ Data []float64 } `json:"outputs"`
	}
	if err := json.Unmarshal([]byte(body), &r); err != nil || len(r.Outputs) != 1 {
		t.Fatalf("response %s: %v", body, err)
	}
	return r.Outputs[0].Data
}

func near(a, b []float64) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if math.Abs(a[i]-b[i]) > 1e-9 {
			return false
		}
	}
	return true
}

// TestAdapters registers two LoRA adapters through SageMaker's adapter
// API, invokes the base and each (answers computed here from the
// weights), and refuses hostile registrations.
func TestAdapters(t *testing.T) {
	modelDir, root := t.TempDir(), t.TempDir()
	if err := os.WriteFile(filepath.Join(modelDir, ModelFile), adapterModelJSON(), 0o644); err != nil {
		t.Fatal(err)
	}
	a1 := AdapterSpec{Format: AdapterFormat, Rank: 1, Alpha: 2, Layers: []AdapterLayerSpec{
		{Layer: 0, A: [][]float64{{1, 0.5}}, B: [][]float64{{0.2}, {-0.4}, {0.6}}}}}
	a2 := AdapterSpec{Format: AdapterFormat, Rank: 2, Alpha: 1, Layers: []AdapterLayerSpec{
		{Layer: 1, A: [][]float64{{1, 0, -1}, {0.5, 0.5, 0.5}}, B: [][]float64{{1, -2}, {0.5, 0.25}}}}}
	writeAdapter(t, filepath.Join(root, "adapters", "a1"), a1)
	writeAdapter(t, filepath.Join(root, "adapters", "a2"), a2)

	cfg, err := smserve.ConfigFromEnviron([]string{"SM_MODEL_DIR=" + modelDir, EnvAdapterRoot + "=" + root}, nil)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	go func() { _ = smserve.Serve(ctx, ln, Program(), cfg, io.Discard, io.Discard) }()
	base := "http://" + ln.Addr().String()
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		if code, _ := do(t, "GET", base+"/ping", ""); code == 200 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("never ready")
		}
	}

	x := []float64{0.8, -0.3}
	req := `{"inputs":[{"name":"INPUT0","shape":[1,2],"datatype":"FP64","data":[0.8,-0.3]}]}`
	invoke := func(adapter string) (int, string) {
		if adapter == "" {
			return do(t, "POST", base+"/invocations", req)
		}
		return do(t, "POST", base+"/invocations", req, HeaderAdapter, adapter)
	}
	code, body := invoke("")
	if want := forward(adW0, adW1, x); code != 200 || !near(outputOf(t, body), want) {
		t.Fatalf("base: %d %s, want %v", code, body, want)
	}
	if code, body := invoke("a1"); code != 404 || !strings.Contains(body, "The adapter a1 was not found") {
		t.Errorf("unregistered adapter: %d %s", code, body)
	}
	for _, n := range []string{"a1", "a2"} {
		if code, body := do(t, "POST", base+"/adapters", `{"name":"`+n+`","src":"`+filepath.Join(root, "adapters", n)+`"}`); code != 200 ||
			!strings.Contains(body, "Adapter "+n+" registered") {
			t.Fatalf("register %s: %d %s", n, code, body)
		}
	}
	want1 := forward(plus(adW0, a1.Layers[0].B, a1.Layers[0].A, 2), adW1, x)
	want2 := forward(adW0, plus(adW1, a2.Layers[0].B, a2.Layers[0].A, 0.5), x)
	for n, want := range map[string][]float64{"a1": want1, "a2": want2} {
		code, body := invoke(n)
		if code != 200 || !near(outputOf(t, body), want) {
			t.Errorf("%s: %d %s, want %v", n, code, body, want)
		}
	}
	if near(want1, want2) || near(want1, forward(adW0, adW1, x)) {
		t.Fatal("the adapters do not change the answer: the test proves nothing")
	}
	// Registered again from another folder: replaced.
	writeAdapter(t, filepath.Join(root, "adapters", "a1b"), a2)
	if code, body := do(t, "POST", base+"/adapters", `{"name":"a1","src":"`+filepath.Join(root, "adapters", "a1b")+`"}`); code != 200 {
		t.Fatalf("register again: %d %s", code, body)
	}
	if code, body := invoke("a1"); code != 200 || !near(outputOf(t, body), want2) {
		t.Errorf("a1 replaced: %d %s, want %v", code, body, want2)
	}
	if code, body := do(t, "DELETE", base+"/adapters/a1", ""); code != 200 || !strings.Contains(body, "Adapter a1 unregistered") {
		t.Errorf("unregister: %d %s", code, body)
	}
	if code, _ := invoke("a1"); code != 404 {
		t.Errorf("unregistered adapter answered %d", code)
	}
	if code, _ := do(t, "DELETE", base+"/adapters/a1", ""); code != 404 {
		t.Errorf("unregister twice: %d", code)
	}
	if code, body := invoke("a2"); code != 200 || !near(outputOf(t, body), want2) {
		t.Errorf("a2 after a1 went: %d %s", code, body)
	}

	// Hostile registrations.
	outside := t.TempDir()
	writeAdapter(t, outside, a1)
	if err := os.Symlink(outside, filepath.Join(root, "adapters", "link")); err != nil {
		t.Fatal(err)
	}
	writeAdapter(t, filepath.Join(root, "adapters", "badshape"), AdapterSpec{Format: AdapterFormat, Rank: 1, Alpha: 1,
		Layers: []AdapterLayerSpec{{Layer: 0, A: [][]float64{{1, 2, 3}}, B: [][]float64{{1}, {1}, {1}}}}})
	writeAdapter(t, filepath.Join(root, "adapters", "badlayer"), AdapterSpec{Format: AdapterFormat, Rank: 1, Alpha: 1,
		Layers: []AdapterLayerSpec{{Layer: 7, A: [][]float64{{1, 2}}, B: [][]float64{{1}, {1}}}}})
	writeAdapter(t, filepath.Join(root, "adapters", "overflow"), AdapterSpec{Format: AdapterFormat, Rank: 1, Alpha: 1e308,
		Layers: []AdapterLayerSpec{{Layer: 0, A: [][]float64{{1e308, 1}}, B: [][]float64{{10}, {1}, {1}}}}})
	for name, body := range map[string]string{
		"not json":       `{`,
		"no name":        `{"src":"` + filepath.Join(root, "adapters", "a2") + `"}`,
		"relative src":   `{"name":"x","src":"adapters/a2"}`,
		"outside root":   `{"name":"x","src":"` + outside + `"}`,
		"dot-dot escape": `{"name":"x","src":"` + root + `/adapters/../../` + filepath.Base(outside) + `"}`,
		"link out":       `{"name":"x","src":"` + filepath.Join(root, "adapters", "link") + `"}`,
		"missing":        `{"name":"x","src":"` + filepath.Join(root, "adapters", "none") + `"}`,
		"bad shape":      `{"name":"x","src":"` + filepath.Join(root, "adapters", "badshape") + `"}`,
		"bad layer":      `{"name":"x","src":"` + filepath.Join(root, "adapters", "badlayer") + `"}`,
		"overflow":       `{"name":"x","src":"` + filepath.Join(root, "adapters", "overflow") + `"}`,
		"slash in name":  `{"name":"a/b","src":"` + filepath.Join(root, "adapters", "a2") + `"}`,
	} {
		if code, resp := do(t, "POST", base+"/adapters", body); code != 400 {
			t.Errorf("%s: %d %s, want 400", name, code, resp)
		}
	}
	if code, body := invoke("x"); code != 404 {
		t.Errorf("a refused adapter was registered: %d %s", code, body)
	}
	if code, body := do(t, "GET", base+"/adapters", ""); code != 200 || body != `{"adapters":[{"name":"a2","src":"`+filepath.Join(root, "adapters", "a2")+`"}]}`+"\n" {
		t.Errorf("list: %d %s", code, body)
	}
}
