package modelserver

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

type mmeHarness struct {
	t    *testing.T
	root string
	srv  *httptest.Server
	log  *syncBuffer
}

type syncBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func newMME(t *testing.T, st Settings) *mmeHarness {
	t.Helper()
	if st.MemoryBytes == 0 {
		st.MemoryBytes = DefaultMemoryBytes
	}
	h := &mmeHarness{t: t, root: t.TempDir(), log: &syncBuffer{}}
	h.srv = httptest.NewServer(NewMME(t.Context(), st, h.root, h.log))
	t.Cleanup(h.srv.Close)
	return h
}

// writeModel writes files under <root>/opt/ml/models/<hash>/model.
func (h *mmeHarness) writeModel(hash string, files map[string][]byte) string {
	h.t.Helper()
	url := "/opt/ml/models/" + hash + "/model"
	for name, data := range files {
		p := filepath.Join(h.root, url, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			h.t.Fatal(err)
		}
		if err := os.WriteFile(p, data, 0o644); err != nil {
			h.t.Fatal(err)
		}
	}
	return url
}

// tinyFiles is the tiny model with a config.pbtxt and memory_bytes.
func tinyFiles(t testing.TB, memoryBytes int64) map[string][]byte {
	s := tinySpec()
	if memoryBytes > 0 {
		s.MemoryBytes = &memoryBytes
	}
	return map[string][]byte{ModelFile: specJSON(t, s), ConfigFile: []byte(`name: "tiny"` + "\n")}
}

type result struct {
	status int
	body   string
	header http.Header
}

func (h *mmeHarness) do(method, path, body string, hdr ...string) result {
	h.t.Helper()
	req, err := http.NewRequestWithContext(h.t.Context(), method, h.srv.URL+path, strings.NewReader(body))
	if err != nil {
		h.t.Fatal(err)
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Add(hdr[i], hdr[i+1])
	}
	resp, err := h.srv.Client().Do(req)
	if err != nil {
		h.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		h.t.Fatal(err)
	}
	return result{resp.StatusCode, string(b), resp.Header}
}

func (h *mmeHarness) load(hash, url string, hdr ...string) result {
	h.t.Helper()
	return h.do("POST", "/models", fmt.Sprintf(`{"model_name":%q,"url":%q}`, hash, url), hdr...)
}

func expect(t *testing.T, what string, r result, status int, body string) {
	t.Helper()
	if r.status != status || (body != "*" && !strings.Contains(r.body, body)) || (body == "" && r.body != "") {
		t.Fatalf("%s: %d %q, want %d with %q", what, r.status, r.body, status, body)
	}
}

const tinyReq = `{"inputs":[{"name":"X","shape":[2,2],"datatype":"FP64","data":[[1,2],[6,7]]}]}`

func TestMMEPingAndUnknownRoutes(t *testing.T) {
	h := newMME(t, Settings{})
	expect(t, "GET /ping", h.do("GET", "/ping", ""), 200, "")
	expect(t, "POST /ping", h.do("POST", "/ping", ""), 405, "")
	for _, c := range [][2]string{{"GET", "/"}, {"GET", "/ping/"}, {"GET", "/v2/health/ready"}, {"PUT", "/models"},
		{"PATCH", "/models/x"}, {"GET", "/models/a/b"}, {"POST", "/models/a/infer"}} {
		expect(t, c[0]+" "+c[1], h.do(c[0], c[1], ""), 400, "")
	}
	expect(t, "POST /invocations", h.do("POST", "/invocations", tinyReq), 400,
		`{"error":"Request for unknown model: 'unspecified_SAGEMAKER_TRITON_DEFAULT_MODEL_NAME' is not found"}`)
}

func TestMMELifecycle(t *testing.T) {
	h := newMME(t, Settings{})
	url := h.writeModel("abc123", tinyFiles(t, 0))

	expect(t, "empty list", h.do("GET", "/models", ""), 200, `{"models":[]}`)
	expect(t, "get unknown", h.do("GET", "/models/abc123", ""), 404, "")
	expect(t, "invoke unknown", h.do("POST", "/models/abc123/invoke", tinyReq), 404, "")
	expect(t, "unload unknown", h.do("DELETE", "/models/abc123", ""), 404, "")

	expect(t, "load", h.load("abc123", url), 200, "")
	// config.pbtxt at the url: modelUrl is the repository /opt/ml/models/<hash>, as in Triton's QA.
	info := `{"modelName":"abc123","modelUrl":"/opt/ml/models/abc123"}`
	expect(t, "list", h.do("GET", "/models", ""), 200, `{"models":[`+info+`]}`)
	expect(t, "list/", h.do("GET", "/models/", ""), 200, info)
	expect(t, "get", h.do("GET", "/models/abc123", ""), 200, info)
	r := h.do("POST", "/models/abc123/invoke", tinyReq, "Content-Type", "application/json")
	expect(t, "invoke", r, 200, `{"model_name":"abc123","model_version":"1","outputs":[{"name":"Y","datatype":"FP64","shape":[2,1],"data":[3.5,16.5]}]}`)
	if ct := r.header.Get("Content-Type"); ct != "application/json" {
		t.Errorf("invoke Content-Type %q", ct)
	}
	expect(t, "bad request", h.do("POST", "/models/abc123/invoke", `{"inputs":[]}`), 400, `{"error":"expected 1 inputs but got 0 inputs for model 'abc123'"}`)
	expect(t, "binary", h.do("POST", "/models/abc123/invoke", tinyReq, "Content-Type", BinaryContentType+";json-header-size=10"), 400, "not supported")
	expect(t, "reload", h.load("abc123", url), 409, `{"error":"model repository '/opt/ml/models/abc123' has already been registered`)
	expect(t, "unload", h.do("DELETE", "/models/abc123", ""), 200, "")
	expect(t, "invoke after unload", h.do("POST", "/models/abc123/invoke", tinyReq), 404, "")
	expect(t, "list after unload", h.do("GET", "/models", ""), 200, `{"models":[]}`)
	expect(t, "load again", h.load("abc123", url), 200, "")
	if log := h.log.String(); !strings.Contains(log, "loaded 'abc123'") || !strings.Contains(log, "unloaded 'abc123'") {
		t.Errorf("log %q", log)
	}
}

func TestMMETargetModelNaming(t *testing.T) {
	h := newMME(t, Settings{})
	url := h.writeModel("h1", tinyFiles(t, 0))
	h.writeModel("h2", tinyFiles(t, 0))
	tm := "models/tiny-v1.tar.gz"
	expect(t, "load", h.load("h1", url, TargetModelHeader, tm), 200, "")
	expect(t, "invoke", h.do("POST", "/models/h1/invoke", tinyReq, TargetModelHeader, tm), 200, `"model_name":"models/tiny-v1.tar.gz"`)
	// Without the header the hash is the model name, and no model of that name is loaded.
	expect(t, "invoke without header", h.do("POST", "/models/h1/invoke", tinyReq), 400,
		`{"error":"Request for unknown model: 'h1' is not found"}`)
	expect(t, "invoke other name", h.do("POST", "/models/h1/invoke", tinyReq, TargetModelHeader, "nope"), 400, "'nope' is not found")
	// The same name from another hash conflicts.
	expect(t, "same name", h.load("h2", "/opt/ml/models/h2/model", TargetModelHeader, tm), 409,
		`there is a conflicting mapping for 'models/tiny-v1.tar.gz'`)
	expect(t, "load h2", h.load("h2", "/opt/ml/models/h2/model", TargetModelHeader, "second"), 200, "")
	// As in Triton, the header picks the model: h1's invoke route can reach "second".
	expect(t, "cross", h.do("POST", "/models/h1/invoke", tinyReq, TargetModelHeader, "second"), 200, `"model_name":"second"`)
	expect(t, "unload wrong name", h.do("DELETE", "/models/h1", ""), 400, `failed to unload 'h1': model_name 'h1' is loaded as 'models/tiny-v1.tar.gz'`)
	expect(t, "unload", h.do("DELETE", "/models/h1", "", TargetModelHeader, tm), 200, "")
	expect(t, "name free again", h.load("h1", url, TargetModelHeader, tm), 200, "")
}

func TestMMELoadValidation(t *testing.T) {
	h := newMME(t, Settings{})
	h.writeModel("ok", tinyFiles(t, 0))
	bad := h.writeModel("bad", map[string][]byte{ModelFile: []byte(`{"inputs":[]}`)})
	for _, tc := range []struct {
		name, body string
		status     int
		want       string
	}{
		{"not json", `{`, 400, `{"error":"failed to parse the request JSON buffer`},
		{"not object", `[1]`, 400, "failed to parse"},
		{"url not string", `{"model_name":"ok","url":5}`, 400, `{"error":"\"url\" must be a string"}`},
		{"name not string", `{"model_name":1,"url":"/opt/ml/models/ok/model"}`, 400, `"model_name\" must be a string`},
		{"empty body", ``, 400, `{"error":"Invalid \"url\" '': expected a path of the form /opt/ml/models/<hash>/model[/<subdir>]"}`},
		{"dash in hash", `{"model_name":"a-b","url":"/opt/ml/models/a-b/model"}`, 400, `Invalid \"url\" '/opt/ml/models/a-b/model'`},
		{"wrong dir", `{"model_name":"ok","url":"/opt/ml/models/ok/weights"}`, 400, "Invalid"},
		{"too deep", `{"model_name":"ok","url":"/opt/ml/models/ok/model/a/b"}`, 400, "Invalid"},
		{"escape", `{"model_name":"ok","url":"/opt/ml/models/../../../etc/model"}`, 400, "Invalid"},
		{"dev", `{"model_name":"ok","url":"/dev/shm/x"}`, 400, ""},
		{"proc via dots", `{"model_name":"ok","url":"/opt/../proc/self"}`, 400, ""},
		{"no name", `{"url":"/opt/ml/models/ok/model"}`, 400, `"model_name\" must be a non-empty string`},
		{"missing dir", `{"model_name":"nope","url":"/opt/ml/models/nope/model"}`, 400, `{"error":"failed to load 'nope': open model directory`},
		{"invalid model", `{"model_name":"bad","url":"` + bad + `"}`, 400, `failed to load 'bad': model.json: a model has exactly one input`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			expect(t, tc.name, h.do("POST", "/models", tc.body), tc.status, tc.want)
		})
	}
	expect(t, "empty header", h.load("ok", "/opt/ml/models/ok/model", TargetModelHeader, ""), 400, "must not be empty")
	// Normalised: dots, double slashes and a trailing slash are fine.
	expect(t, "normalised", h.load("ok", "/opt/ml//models/x/../ok/./model/"), 200, "")
	expect(t, "list", h.do("GET", "/models/ok", ""), 200, `"modelUrl":"/opt/ml/models/ok"`)
	// After failures nothing is half-registered.
	expect(t, "list all", h.do("GET", "/models", ""), 200, `{"models":[{"modelName":"ok","modelUrl":"/opt/ml/models/ok"}]}`)
	expect(t, "big body", h.do("POST", "/models", strings.Repeat(" ", maxLoadBody+1)), 413, "exceeds")
}

func TestNormalizeURL(t *testing.T) {
	for in, want := range map[string]string{
		"":                         "/",
		"/opt/ml/models/a/model":   "/opt/ml/models/a/model",
		"/opt/ml/models/a/model/":  "/opt/ml/models/a/model/",
		"opt/ml/models/a/model":    "/opt/ml/models/a/model",
		"/opt/ml/models/a/model/.": "/opt/ml/models/a/model/",
		"/opt/ml/models/a/b/..":    "/opt/ml/models/a/",
		"/../../opt":               "/opt",
	} {
		if got := NormalizeURL(in); got != want {
			t.Errorf("NormalizeURL(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestMMELayouts(t *testing.T) {
	h := newMME(t, Settings{})
	mj := specJSON(t, tinySpec())
	// No config.pbtxt at the url: modelUrl is the url itself (Triton registers the url as the repository).
	h.writeModel("plain", map[string][]byte{ModelFile: mj})
	expect(t, "plain", h.load("plain", "/opt/ml/models/plain/model"), 200, "")
	expect(t, "plain url", h.do("GET", "/models/plain", ""), 200, `"modelUrl":"/opt/ml/models/plain/model"}`)
	// A Triton repository holding one model directory with a version directory.
	h.writeModel("repo", map[string][]byte{"tiny/config.pbtxt": []byte("name: \"tiny\""), "tiny/7/model.json": mj})
	expect(t, "repo", h.load("repo", "/opt/ml/models/repo/model"), 200, "")
	expect(t, "repo invoke", h.do("POST", "/models/repo/invoke", tinyReq), 200, `"model_version":"7"`)
	// A customer subdirectory in the url.
	h.writeModel("sub", map[string][]byte{"v2/model.json": mj, "v2/config.pbtxt": nil})
	expect(t, "subdir", h.load("sub", "/opt/ml/models/sub/model/v2"), 200, "")
	expect(t, "subdir url", h.do("GET", "/models/sub", ""), 200, `"modelUrl":"/opt/ml/models/sub"}`)
	// Symbolic links may not leave the model directory.
	h.writeModel("link", map[string][]byte{ConfigFile: nil})
	if err := os.Symlink("/etc/hostname", filepath.Join(h.root, "opt/ml/models/link/model", ModelFile)); err != nil {
		t.Fatal(err)
	}
	expect(t, "symlink", h.load("link", "/opt/ml/models/link/model"), 400, "failed to load 'link'")
	// POST /models/<anything> is a load, as Triton's regex makes it.
	h.writeModel("quirk", map[string][]byte{ModelFile: mj})
	expect(t, "post name", h.do("POST", "/models/whatever", `{"model_name":"quirk","url":"/opt/ml/models/quirk/model"}`), 200, "")
	expect(t, "get quirk", h.do("GET", "/models/quirk", ""), 200, `"modelName":"quirk"`)
}

func TestMMEMemoryBudget(t *testing.T) {
	h := newMME(t, Settings{MemoryBytes: 100, WorkspaceBytes: 1 << 20})
	for _, hash := range []string{"m1", "m2", "m3"} {
		h.writeModel(hash, tinyFiles(t, 40))
	}
	expect(t, "m1", h.load("m1", "/opt/ml/models/m1/model"), 200, "")
	expect(t, "m2", h.load("m2", "/opt/ml/models/m2/model"), 200, "")
	expect(t, "m3", h.load("m3", "/opt/ml/models/m3/model"), 507,
		`{"error":"failed to load 'm3': out of memory: the model needs 40 bytes and 20 of 100 bytes are free"}`)
	expect(t, "m3 not listed", h.do("GET", "/models/m3", ""), 404, "")
	expect(t, "unload m1", h.do("DELETE", "/models/m1", ""), 200, "")
	expect(t, "m3 fits now", h.load("m3", "/opt/ml/models/m3/model"), 200, "")
	h.writeModel("huge", tinyFiles(t, 101))
	expect(t, "never fits", h.load("huge", "/opt/ml/models/huge/model"), 507, "out of memory")
	// Without memory_bytes the footprint is the weights: 13 FP64 parameters = 104 bytes > 100.
	h.writeModel("w", map[string][]byte{ModelFile: specJSON(t, tinySpec())})
	expect(t, "weights", h.load("w", "/opt/ml/models/w/model"), 507, "the model needs 104 bytes")
}

func TestMMEInvokeScratch507(t *testing.T) {
	h := newMME(t, Settings{MemoryBytes: 1000, WorkspaceBytes: 0})
	h.writeModel("m", tinyFiles(t, 900))
	expect(t, "load", h.load("m", "/opt/ml/models/m/model"), 200, "")
	// 2 rows × (2+3+1) float64 = 96 bytes of scratch: fits in the 100 left.
	expect(t, "small", h.do("POST", "/models/m/invoke", tinyReq), 200, "*")
	// 3 rows need 144 bytes.
	big := `{"inputs":[{"name":"X","shape":[3,2],"datatype":"FP64","data":[1,2,3,4,5,6]}]}`
	expect(t, "big", h.do("POST", "/models/m/invoke", big), 507, "out of memory: the request needs 144 bytes of scratch space")
	expect(t, "unload", h.do("DELETE", "/models/m", ""), 200, "")
}

func TestMMEConcurrentLoads(t *testing.T) {
	h := newMME(t, Settings{LoadDelay: 50 * time.Millisecond})
	url := h.writeModel("same", tinyFiles(t, 0))
	var wg sync.WaitGroup
	codes := make(chan int, 8)
	for range 8 {
		wg.Go(func() { codes <- h.load("same", url, TargetModelHeader, "t").status })
	}
	wg.Wait()
	close(codes)
	count := map[int]int{}
	for c := range codes {
		count[c]++
	}
	if count[200] != 1 || count[409] != 7 {
		t.Fatalf("status counts %v, want one 200 and seven 409", count)
	}
	// Invocations and an unload racing: the unload waits for running invocations and then frees the model.
	for range 4 {
		wg.Go(func() {
			r := h.do("POST", "/models/same/invoke", tinyReq, TargetModelHeader, "t")
			if r.status != 200 && r.status != 404 {
				t.Errorf("invoke during unload: %d %s", r.status, r.body)
			}
		})
	}
	expect(t, "unload", h.do("DELETE", "/models/same", "", TargetModelHeader, "t"), 200, "")
	wg.Wait()
}

func TestMMELoadDelayCancelled(t *testing.T) {
	ctx, cancel := context.WithCancel(t.Context())
	root := t.TempDir()
	s := NewMME(ctx, Settings{MemoryBytes: 1000, LoadDelay: time.Minute}, root, io.Discard)
	h := &mmeHarness{t: t, root: root, log: &syncBuffer{}}
	h.srv = httptest.NewServer(s)
	defer h.srv.Close()
	h.writeModel("m", tinyFiles(t, 10))
	time.AfterFunc(50*time.Millisecond, cancel)
	expect(t, "cancelled", h.load("m", "/opt/ml/models/m/model"), 400, "shutting down")
	if used, _ := s.budget.usage(); used != 0 {
		t.Errorf("budget used %d after a cancelled load", used)
	}
	var list ModelList
	if err := json.Unmarshal([]byte(h.do("GET", "/models", "").body), &list); err != nil || len(list.Models) != 0 {
		t.Errorf("list %v %v", list, err)
	}
}
