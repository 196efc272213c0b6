package framework

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
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

	"github.com/moby/moby/api/pkg/stdcopy"
	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/client"

	"github.com/mce-run/mce/containers/docker"
	"github.com/mce-run/mce/internal/testenv"
)

const (
	sklearnImage = testenv.SklearnImage
	pytorchImage = testenv.PyTorchImage
)

// suite is what one test needs: the engine, a unique instance label, the repository.
type suite struct {
	cli      *client.Client
	instance string
	root     string
	ids      map[string]string
}

func newSuite(t *testing.T) *suite {
	t.Helper()
	cli := testenv.Docker(t)
	root := testenv.RepoRoot(t)
	// Tests run the image IDs the build printed, not the tags.
	return &suite{cli: cli, instance: testenv.Instance(t), root: root, ids: testenv.FrameworkImages(t)}
}

// image is the ID of the image built for tag.
func (s *suite) image(tag string) string {
	if id, ok := s.ids[tag]; ok {
		return id
	}
	return tag
}

func (s *suite) testdata() string {
	return filepath.Join(s.root, "examples", "containers", "framework", "testdata")
}

// tempDir is a folder for model files; containers write into it as root, so it is removed with
// os.RemoveAll (not t.TempDir, whose cleanup fails on files it cannot chmod when not root).
func tempDir(t *testing.T) string {
	t.Helper()
	d, err := os.MkdirTemp("", "mce-fw-test-")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(d, 0o755); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(d) })
	return d
}

// withCode copies testdata/scripts/<script>/* to dir/code/.
func (s *suite) withCode(t *testing.T, dir, script string) {
	t.Helper()
	src := filepath.Join(s.testdata(), "scripts", script)
	entries, err := os.ReadDir(src)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(dir, "code"), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		data, err := os.ReadFile(filepath.Join(src, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, "code", e.Name()), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// spec is one model (or wheel) for testdata/make_model.py.
type spec map[string]any

// generate runs testdata/make_model.py in image to write specs under dir.
func (s *suite) generate(t *testing.T, image, dir string, specs ...spec) {
	t.Helper()
	arg, err := json.Marshal(specs)
	if err != nil {
		t.Fatal(err)
	}
	code, logs := s.runToExit(t, image, []string{"python3", "/td/make_model.py", "/out", string(arg)}, nil,
		[]string{s.testdata() + ":/td:ro", dir + ":/out"}, 2*time.Minute)
	if code != 0 {
		t.Fatalf("make_model.py exited %d:\n%s", code, logs)
	}
}

// ctr is a started container.
type ctr struct {
	s    *suite
	id   string
	base string // http://address:port
}

func (s *suite) create(t *testing.T, image string, cmd, env, binds []string, netMode string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	hc := &container.HostConfig{Binds: binds}
	if netMode != "" {
		hc.NetworkMode = container.NetworkMode(netMode)
	}
	res, err := s.cli.ContainerCreate(ctx, client.ContainerCreateOptions{
		Config:     &container.Config{Image: s.image(image), Cmd: cmd, Env: env, Labels: map[string]string{docker.LabelInstance: s.instance}},
		HostConfig: hc,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		s.cli.ContainerRemove(ctx, res.ID, client.ContainerRemoveOptions{Force: true})
	})
	if _, err := s.cli.ContainerStart(ctx, res.ID, client.ContainerStartOptions{}); err != nil {
		t.Fatal(err)
	}
	return res.ID
}

// start runs image with `serve`, env and binds, and returns it (not yet ready).
func (s *suite) start(t *testing.T, image string, env, binds []string) *ctr {
	t.Helper()
	id := s.create(t, image, []string{"serve"}, env, binds, "")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	res, err := s.cli.ContainerInspect(ctx, id, client.ContainerInspectOptions{})
	if err != nil {
		t.Fatal(err)
	}
	ep := res.Container.NetworkSettings.Networks["bridge"]
	if ep == nil || !ep.IPAddress.IsValid() {
		t.Fatalf("container has no address on the bridge network")
	}
	port := "8080"
	for _, e := range env {
		if v, ok := strings.CutPrefix(e, "SAGEMAKER_BIND_TO_PORT="); ok {
			port = v
		}
	}
	return &ctr{s: s, id: id, base: "http://" + ep.IPAddress.String() + ":" + port}
}

// serve starts image with a single model at /opt/ml/model and waits for /ping.
func (s *suite) serve(t *testing.T, image, modelDir string, env ...string) *ctr {
	t.Helper()
	c := s.start(t, image, env, []string{modelDir + ":/opt/ml/model:ro"})
	c.waitReady(t, 90*time.Second)
	return c
}

// runToExit runs cmd in image to its end and returns its exit status and log.
func (s *suite) runToExit(t *testing.T, image string, cmd, env, binds []string, limit time.Duration) (int, string) {
	t.Helper()
	id := s.create(t, image, cmd, env, binds, "")
	return (&ctr{s: s, id: id}).waitExit(t, limit)
}

func (c *ctr) logs(t *testing.T) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	rc, err := c.s.cli.ContainerLogs(ctx, c.id, client.ContainerLogsOptions{ShowStdout: true, ShowStderr: true})
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	var out bytes.Buffer
	stdcopy.StdCopy(&out, &out, rc)
	return out.String()
}

// logsWith returns the log once it holds every one of want (Docker collects logs asynchronously),
// or the log as it is after limit.
func (c *ctr) logsWith(t *testing.T, limit time.Duration, want ...string) (string, bool) {
	t.Helper()
	deadline := time.Now().Add(limit)
	for {
		logs := c.logs(t)
		all := true
		for _, w := range want {
			all = all && strings.Contains(logs, w)
		}
		if all || time.Now().After(deadline) {
			return logs, all
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func (c *ctr) running(t *testing.T) bool {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	res, err := c.s.cli.ContainerInspect(ctx, c.id, client.ContainerInspectOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return res.Container.State.Running
}

// waitExit waits for the container to end and returns its exit status and log.
func (c *ctr) waitExit(t *testing.T, limit time.Duration) (int, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), limit)
	defer cancel()
	wait := c.s.cli.ContainerWait(ctx, c.id, client.ContainerWaitOptions{Condition: container.WaitConditionNotRunning})
	select {
	case res := <-wait.Result:
		return int(res.StatusCode), c.logs(t)
	case err := <-wait.Error:
		t.Fatalf("waiting for the container: %v\n%s", err, c.logs(t))
	}
	return 0, ""
}

// ping is one GET /ping: its status, or 0 when nothing answered.
func (c *ctr) ping() int {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, c.base+"/ping", nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0
	}
	resp.Body.Close()
	return resp.StatusCode
}

// waitReady polls /ping until 200; it fails when the container exits first.
func (c *ctr) waitReady(t *testing.T, limit time.Duration) {
	t.Helper()
	deadline := time.Now().Add(limit)
	for n := 0; ; n++ {
		if c.ping() == http.StatusOK {
			return
		}
		if n%20 == 19 && !c.running(t) {
			t.Fatalf("the container exited before /ping answered 200:\n%s", c.logs(t))
		}
		if time.Now().After(deadline) {
			t.Fatalf("/ping not 200 within %s:\n%s", limit, c.logs(t))
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// response is an HTTP answer.
type response struct {
	status int
	header http.Header
	body   []byte
}

// errorBody is the toolkit's error shape.
type errorBody struct {
	Code    int    `json:"code"`
	Type    string `json:"type"`
	Message string `json:"message"`
}

func (r response) error(t *testing.T) errorBody {
	t.Helper()
	var e errorBody
	if err := json.Unmarshal(r.body, &e); err != nil {
		t.Fatalf("error body %q is not the toolkit's JSON shape: %v", r.body, err)
	}
	if e.Code != r.status || r.header.Get("Content-Type") != "application/json" {
		t.Fatalf("error answer %d %q with Content-Type %q", r.status, r.body, r.header.Get("Content-Type"))
	}
	return e
}

// do sends method path with body and headers ("K: V" strings) to c.
func (c *ctr) do(t *testing.T, method, path string, body []byte, headers ...string) response {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, method, c.base+path, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	for _, h := range headers {
		k, v, _ := strings.Cut(h, ":")
		req.Header.Set(strings.TrimSpace(k), strings.TrimSpace(v))
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v\n%s", method, path, err, c.logs(t))
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, 16<<20))
	if err != nil {
		t.Fatal(err)
	}
	return response{status: resp.StatusCode, header: resp.Header, body: data}
}

// invoke POSTs body to /invocations.
func (c *ctr) invoke(t *testing.T, body string, headers ...string) response {
	t.Helper()
	return c.do(t, http.MethodPost, "/invocations", []byte(body), headers...)
}

// ---- expected values, computed here from the parameters the test chose

func linear(coef []float64, intercept float64, rows [][]float64) []float64 {
	out := make([]float64, len(rows))
	for i, r := range rows {
		y := intercept
		for j, x := range r {
			y += coef[j] * x
		}
		out[i] = y
	}
	return out
}

// affine is W·x + b for every row (a torch.nn.Linear).
func affine(w [][]float64, b []float64, rows [][]float64) [][]float64 {
	out := make([][]float64, len(rows))
	for i, r := range rows {
		out[i] = make([]float64, len(w))
		for k := range w {
			y := b[k]
			for j, x := range r {
				y += w[k][j] * x
			}
			out[i][k] = y
		}
	}
	return out
}

func softmax(v []float64) []float64 {
	m := math.Inf(-1)
	for _, x := range v {
		m = math.Max(m, x)
	}
	out, sum := make([]float64, len(v)), 0.0
	for i, x := range v {
		out[i] = math.Exp(x - m)
		sum += out[i]
	}
	for i := range out {
		out[i] /= sum
	}
	return out
}

func argmax(v []float64) int {
	best := 0
	for i := range v {
		if v[i] > v[best] {
			best = i
		}
	}
	return best
}

func near(a, b, tol float64) bool {
	return math.Abs(a-b) <= tol*math.Max(1, math.Abs(b))
}

func assertNear(t *testing.T, what string, got, want []float64, tol float64) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: got %v, want %v", what, got, want)
	}
	for i := range got {
		if !near(got[i], want[i], tol) {
			t.Fatalf("%s: got %v, want %v", what, got, want)
		}
	}
}

func assertNear2(t *testing.T, what string, got, want [][]float64, tol float64) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: got %v, want %v", what, got, want)
	}
	for i := range got {
		assertNear(t, fmt.Sprintf("%s row %d", what, i), got[i], want[i], tol)
	}
}

// csvRows formats rows as CSV.
func csvRows(rows [][]float64) string {
	var b strings.Builder
	for _, r := range rows {
		for j, x := range r {
			if j > 0 {
				b.WriteByte(',')
			}
			b.WriteString(strconv.FormatFloat(x, 'g', -1, 64))
		}
		b.WriteByte('\n')
	}
	return b.String()
}

// parseCSV reads rows of floats.
func parseCSV(t *testing.T, body []byte) [][]float64 {
	t.Helper()
	var rows [][]float64
	for line := range strings.Lines(strings.TrimSpace(string(body))) {
		var row []float64
		for _, f := range strings.Split(strings.TrimSpace(line), ",") {
			v, err := strconv.ParseFloat(f, 64)
			if err != nil {
				t.Fatalf("CSV %q: %v", body, err)
			}
			row = append(row, v)
		}
		rows = append(rows, row)
	}
	return rows
}

// npyF64 encodes rows as a little-endian float64 NPY file (format 1.0).
func npyF64(rows [][]float64) []byte {
	header := fmt.Sprintf("{'descr': '<f8', 'fortran_order': False, 'shape': (%d, %d), }", len(rows), len(rows[0]))
	pad := 64 - (10+len(header)+1)%64
	header += strings.Repeat(" ", pad%64) + "\n"
	var b bytes.Buffer
	b.WriteString("\x93NUMPY\x01\x00")
	binary.Write(&b, binary.LittleEndian, uint16(len(header)))
	b.WriteString(header)
	for _, r := range rows {
		for _, x := range r {
			binary.Write(&b, binary.LittleEndian, x)
		}
	}
	return b.Bytes()
}

// parseNPYF64 decodes a little-endian float64 NPY file into its values (any shape, C order).
func parseNPYF64(t *testing.T, data []byte) (shape string, values []float64) {
	t.Helper()
	if len(data) < 10 || string(data[:6]) != "\x93NUMPY" {
		t.Fatalf("not an NPY file: %q", data)
	}
	n := int(binary.LittleEndian.Uint16(data[8:10]))
	header := string(data[10 : 10+n])
	if !strings.Contains(header, "'descr': '<f8'") {
		t.Fatalf("NPY header %q: want '<f8'", header)
	}
	_, shape, _ = strings.Cut(header, "'shape': ")
	shape, _, _ = strings.Cut(shape, ")")
	raw := data[10+n:]
	values = make([]float64, len(raw)/8)
	binary.Read(bytes.NewReader(raw), binary.LittleEndian, values)
	return shape + ")", values
}

func jsonFloats(t *testing.T, body []byte) []float64 {
	t.Helper()
	var v []float64
	if err := json.Unmarshal(body, &v); err != nil {
		t.Fatalf("JSON %q: %v", body, err)
	}
	return v
}

func jsonRows(t *testing.T, body []byte) [][]float64 {
	t.Helper()
	var v [][]float64
	if err := json.Unmarshal(body, &v); err != nil {
		t.Fatalf("JSON %q: %v", body, err)
	}
	return v
}
