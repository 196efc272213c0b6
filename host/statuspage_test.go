package host

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sagemakerruntime"

	"github.com/mce-run/mce/containers"
	"github.com/mce-run/mce/containers/mme"
	"github.com/mce-run/mce/host/statuspage"
	"github.com/mce-run/mce/pipeline"
)

// detailBackend's containers tell what the Docker engine's do beyond
// pipeline.Container (ID, restarts, exit code, log tail), with the log
// lines a test gives: hostile text, as a container may print anything.
type detailBackend struct {
	*fakeBackend
	logs []string
}

func (b detailBackend) Launch(ctx context.Context, p containers.EndpointPlan, gen int) (containers.Launched, error) {
	l, err := b.fakeBackend.Launch(ctx, p, gen)
	if err != nil {
		return nil, err
	}
	return detailLaunched{l, b.logs}, nil
}

type detailLaunched struct {
	containers.Launched
	logs []string
}

func (l detailLaunched) Copies(v string) [][]pipeline.Container {
	cps := l.Launched.Copies(v)
	for i, cp := range cps {
		out := make([]pipeline.Container, len(cp))
		for j, c := range cp {
			out[j] = detailContainer{c, l.logs}
			if strings.HasPrefix(c.Hostname(), "mme") {
				out[j] = mmeContainer{detailContainer{c, l.logs}}
			}
		}
		cps[i] = out
	}
	return cps
}

type detailContainer struct {
	pipeline.Container
	logs []string
}

func (c detailContainer) ID() string          { return "0123456789abcdef0123456789abcdef" }
func (c detailContainer) Restarts() int       { return 2 }
func (c detailContainer) LastExitCode() int   { return 137 }
func (c detailContainer) LogTail() []string   { return c.logs }
func (c detailContainer) Unavailable() string { return "" }

var _ containers.ContainerDetail = detailContainer{}

// mmeContainer is a multi-model container holding 25 models, one with a
// hostile name.
type mmeContainer struct{ detailContainer }

func (mmeContainer) LoadedModels() []string {
	names := []string{"<i>model</i>.tar.gz"}
	for i := range 24 {
		names = append(names, "model-"+strconv.Itoa(i)+".tar.gz")
	}
	return names
}
func (mmeContainer) CacheUsage() (int64, int) { return 3 << 20, 25 }

// GPUMemory: a container whose server kept 6 GiB after two unloads.
func (mmeContainer) GPUMemory() (mme.GPUReport, bool) {
	return mme.GPUReport{Used: 30 << 30, Total: 80 << 30, PerContainer: true, Unreleased: 6 << 30, LeakyUnloads: 2}, true
}

var (
	_ containers.MultiModelDetail    = mmeContainer{}
	_ containers.MultiModelGPUDetail = mmeContainer{}
)

// hostileLogs are log lines as a container might print them.
var hostileLogs = []string{
	"booting",
	`<script>alert(1)</script>`,
	"\x1b[31mred\x1b[0m and a bell\x07 and \u202Ereversed",
	strings.Repeat("long ", 200),
	"invalid \xff utf-8",
}

func statusHarness(t *testing.T) *harness {
	t.Helper()
	h := newHarness(t, Config{MetricsOnAPI: true, Backend: detailBackend{&fakeBackend{t: t}, hostileLogs}})
	if err := h.deploy(plan("ab", "Serial", map[string][]string{"A": {"english:EN"}, "B": {"german:DE"}})); err != nil {
		t.Fatal(err)
	}
	for range 6 {
		if _, err := h.invoke(&sagemakerruntime.InvokeEndpointInput{EndpointName: aws.String("ab"), Body: body("x")}); err != nil {
			t.Fatal(err)
		}
	}
	// One error: the container answers 500.
	h.invoke(&sagemakerruntime.InvokeEndpointInput{EndpointName: aws.String("ab"), Body: body("x"), CustomAttributes: aws.String("status=500")})
	return h
}

func get(t *testing.T, c *http.Client, url string) (*http.Response, string) {
	t.Helper()
	resp, err := c.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	return resp, string(b)
}

// TestStatusPage: the page shows the endpoint, its variants and containers,
// a chart with the invocations, and the log lines escaped and cleaned; its
// headers forbid scripts and sniffing.
func TestStatusPage(t *testing.T) {
	h := statusHarness(t)
	for name, base := range map[string]string{"API listener": h.http.URL, "operator listener": operatorServer(t, h.srv)} {
		t.Run(name, func(t *testing.T) {
			resp, page := get(t, h.http.Client(), base+"/status")
			if resp.StatusCode != 200 {
				t.Fatalf("GET /status: %d %s", resp.StatusCode, page)
			}
			if csp := resp.Header.Get("Content-Security-Policy"); !strings.Contains(csp, "default-src 'none'") || strings.Contains(csp, "script-src") {
				t.Errorf("Content-Security-Policy %q", csp)
			}
			if resp.Header.Get("X-Content-Type-Options") != "nosniff" || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/html") {
				t.Errorf("headers %v", resp.Header)
			}
			for _, want := range []string{`<span class="name">ab</span>`, `st-InService`, `>english<`, `>german<`,
				`>A</td>`, `>B</td>`, `0123456789ab`, `<td class="num">137</td>`,
				`&lt;script&gt;alert(1)&lt;/script&gt;`, "red and a bell\uFFFD and \uFFFDreversed", "invalid \uFFFD utf-8",
				`http-equiv="refresh"`, "reached mce on a loopback address"} {
				if !strings.Contains(page, want) {
					t.Errorf("the page lacks %q", want)
				}
			}
			for _, bad := range []string{"<script>", "\x1b", "\x07", "\u202E", strings.Repeat("long ", 61), "https://", "http://"} {
				if strings.Contains(page, bad) {
					t.Errorf("the page holds %q", bad)
				}
			}
			// The rate chart counts the 7 invocations, 1 an error.
			if m := regexp.MustCompile(`data-total="(\d+)"`).FindStringSubmatch(page); m == nil || m[1] != "7" {
				t.Errorf("rate chart total %v, want 7", m)
			}
			if !regexp.MustCompile(`<polyline [^>]*points="[0-9.]+,[0-9.]+ `).MatchString(page) {
				t.Error("no polyline with points")
			}
			if !strings.Contains(page, "7 invocations, 1 errors") {
				t.Error("the endpoint's counts are missing")
			}

			resp, _ = get(t, &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}, base+"/")
			if resp.StatusCode != http.StatusFound || resp.Header.Get("Location") != "/status" {
				t.Errorf("GET /: %d to %q", resp.StatusCode, resp.Header.Get("Location"))
			}

			resp, js := get(t, h.http.Client(), base+"/status.json")
			if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "application/json" {
				t.Fatalf("GET /status.json: %d %s", resp.StatusCode, resp.Header.Get("Content-Type"))
			}
			var rep statuspage.Report
			if err := json.Unmarshal([]byte(js), &rep); err != nil {
				t.Fatal(err)
			}
			if rep.LogLines != "shown" || rep.StepSeconds != 5 || rep.WindowSeconds != 900 || len(rep.Endpoints) != 1 {
				t.Fatalf("report %+v", rep)
			}
			c := rep.Endpoints[0].Variants[0].Copies[0].Containers[0]
			if len(c.LogTail) != len(hostileLogs) || c.LogTail[1] != hostileLogs[1] || len([]rune(c.LogTail[3])) != statuspage.MaxLogLineRunes+1 || c.Restarts != 2 {
				t.Errorf("container %+v", c)
			}
			inv, errs := 0, 0
			for _, s := range rep.Series {
				if s.EndpointName != "ab" || (s.VariantName != "A" && s.VariantName != "B") {
					t.Errorf("series %s/%s", s.EndpointName, s.VariantName)
				}
				for _, p := range s.Points {
					inv += p.Invocations
					errs += p.Errors
					if p.Invocations > p.Errors && (p.LatencyP50Seconds <= 0 || p.LatencyP99Seconds < p.LatencyP50Seconds || p.LatencyMaxSeconds < p.LatencyP99Seconds) {
						t.Errorf("latencies %+v", p)
					}
				}
			}
			if inv != 7 || errs != 1 {
				t.Errorf("series count %d invocations, %d errors; want 7, 1", inv, errs)
			}
		})
	}
}

func operatorServer(t *testing.T, s *Server) string {
	op := httptest.NewServer(s.OperatorHandler())
	t.Cleanup(op.Close)
	return op.URL
}

// TestStatusPageBeyondLoopback: a request that arrives on an address other
// than loopback gets no log lines and no container IDs, and is told why.
func TestStatusPageBeyondLoopback(t *testing.T) {
	h := statusHarness(t)
	serve := func(path string) string {
		req := httptest.NewRequest(http.MethodGet, path, nil)
		req = req.WithContext(context.WithValue(req.Context(), http.LocalAddrContextKey, &net.TCPAddr{IP: net.ParseIP("192.0.2.10"), Port: 9464}))
		w := httptest.NewRecorder()
		h.srv.OperatorHandler().ServeHTTP(w, req)
		if w.Code != 200 {
			t.Fatalf("%s: %d", path, w.Code)
		}
		return w.Body.String()
	}
	page := serve("/status")
	for _, leak := range []string{"alert(1)", "booting", "0123456789ab"} {
		if strings.Contains(page, leak) {
			t.Errorf("the page beyond loopback shows %q", leak)
		}
	}
	if !strings.Contains(page, ">english<") || !strings.Contains(page, "shown only to requests that reach mce on a loopback address") {
		t.Error("the page beyond loopback lacks the containers or the reason for hiding logs")
	}
	var rep statuspage.Report
	if err := json.Unmarshal([]byte(serve("/status.json")), &rep); err != nil {
		t.Fatal(err)
	}
	c := rep.Endpoints[0].Variants[0].Copies[0].Containers[0]
	if rep.LogLines == "shown" || c.LogTail != nil || c.ID != "" || c.Hostname != "english" {
		t.Errorf("status.json beyond loopback: %q, container %+v", rep.LogLines, c)
	}
}

// TestStatusPageOnlyForTheOperator: with policies enforced the API listener
// serves no status page (it is unsigned), the operator's listener does.
func TestStatusPageOnlyForTheOperator(t *testing.T) {
	for _, c := range []struct {
		name string
		cfg  Config
		want int
	}{
		{"no policies, compatibility on", Config{MetricsOnAPI: true}, 200},
		{"no policies, compatibility off", Config{}, 404},
		{"policies enforced", Config{MetricsOnAPI: true, Authz: exampleAuthz(t)}, 404},
	} {
		t.Run(c.name, func(t *testing.T) {
			h := newHarness(t, c.cfg)
			for _, path := range []string{"/status", "/status.json"} {
				if resp, b := get(t, h.http.Client(), h.http.URL+path); resp.StatusCode != c.want {
					t.Errorf("GET %s on the API: %d %s, want %d", path, resp.StatusCode, b, c.want)
				}
				if resp, _ := get(t, h.http.Client(), operatorServer(t, h.srv)+path); resp.StatusCode != 200 {
					t.Errorf("GET %s on the operator's listener: %d", path, resp.StatusCode)
				}
			}
		})
	}
}

// TestStatusSeriesDroppedWithEndpoint: a deleted endpoint's series leave
// the report.
func TestStatusSeriesDroppedWithEndpoint(t *testing.T) {
	h := newHarness(t, Config{})
	for _, name := range []string{"keep", "gone"} {
		if err := h.deploy(plan(name, "Serial", map[string][]string{"AllTraffic": {"a:A"}})); err != nil {
			t.Fatal(err)
		}
		if _, err := h.invoke(&sagemakerruntime.InvokeEndpointInput{EndpointName: aws.String(name), Body: body("x")}); err != nil {
			t.Fatal(err)
		}
	}
	if h.srv.series.Len() != 2 {
		t.Fatalf("%d series, want 2", h.srv.series.Len())
	}
	e := h.srv.reg.get("gone")
	h.srv.deleteEndpoint(e)
	h.srv.bg.Wait()
	rep := h.srv.status.Report(false)
	if len(rep.Series) != 1 || rep.Series[0].EndpointName != "keep" || h.srv.series.Len() != 1 {
		t.Errorf("series after deleting an endpoint: %+v", rep.Series)
	}
}

// TestStatusPageFailedAndMultiModel: a failed endpoint shows its
// FailureReason (escaped); a multi-model container its models and cache.
func TestStatusPageFailedAndMultiModel(t *testing.T) {
	fb := &fakeBackend{t: t}
	h := newHarness(t, Config{Backend: detailBackend{fb, []string{"ok"}}})
	if err := h.deploy(plan("mme", "Serial", map[string][]string{"AllTraffic": {"mme1:M"}})); err != nil {
		t.Fatal(err)
	}
	fb.fail = errors.New("image <b>nope not found")
	if err := h.deploy(plan("broken", "Serial", map[string][]string{"AllTraffic": {"a:A"}})); err == nil {
		t.Fatal("the broken endpoint launched")
	}
	page := get200(t, operatorServer(t, h.srv)+"/status")
	for _, want := range []string{`<span class="st st-Failed">Failed</span>`, "image &lt;b&gt;nope not found",
		"25 loaded · cache 3.0 MiB in 25 model(s)", "&lt;i&gt;model&lt;/i&gt;.tar.gz, model-0.tar.gz", "model-18.tar.gz and 5 more",
		"no invocations in the last 15 minutes", "no containers running",
		"GPU memory 30.0 GiB of 80.0 GiB", "6.0 GiB of GPU memory kept after 2 unload(s) that did not free it"} {
		if !strings.Contains(page, want) {
			t.Errorf("the page lacks %q", want)
		}
	}
	metrics := get200(t, operatorServer(t, h.srv)+"/metrics")
	for _, want := range []string{
		`mce_mme_gpu_memory_unreleased_bytes{container="mme1",endpoint="mme",variant="AllTraffic"} 6.442450944e+09`,
		`mce_mme_gpu_memory_used_bytes{container="mme1",endpoint="mme",variant="AllTraffic"} 3.221225472e+10`,
	} {
		if !strings.Contains(metrics, want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}
	if strings.Contains(page, "<b>") || strings.Contains(page, "<i>") || strings.Contains(page, "model-19.tar.gz") {
		t.Error("the page holds raw markup or more than 20 model names")
	}
}

func get200(t *testing.T, url string) string {
	t.Helper()
	resp, b := get(t, http.DefaultClient, url)
	if resp.StatusCode != 200 {
		t.Fatalf("GET %s: %d %s", url, resp.StatusCode, b)
	}
	return b
}
