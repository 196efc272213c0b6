package host_test

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sagemakerruntime"
	"github.com/aws/aws-sdk-go-v2/service/sagemakerruntime/types"
	"github.com/aws/smithy-go"

	"github.com/mce-run/mce/internal/testenv"
)

type mmeManifest struct {
	Models []struct {
		TargetModel string          `json:"target_model"`
		Request     json.RawMessage `json:"request"`
		Response    struct {
			Outputs []struct {
				Data []float64 `json:"data"`
			} `json:"outputs"`
		} `json:"response"`
	} `json:"models"`
}

func loadManifest(t testing.TB, dir string) mmeManifest {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, "manifest.json"))
	if err != nil {
		t.Fatal(err)
	}
	var m mmeManifest
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	return m
}

// mmeEndpointFile writes an MME endpoint on the given prefix folder, its
// model server holding `fit` models of the generated size at once.
func mmeEndpointFile(t testing.TB, prefix string, fit int) string {
	t.Helper()
	file := filepath.Join(t.TempDir(), "mme.yaml")
	os.WriteFile(file, []byte(fmt.Sprintf(`
Models:
  - ModelName: mme
    Containers:
      - ContainerHostname: modelserver
        Image: mce-example/modelserver:latest
        Mode: MultiModel
        ModelDataUrl: file://%s/
        Environment: {MODELSERVER_MEMORY_BYTES: "%d"}
EndpointConfigs:
  - EndpointConfigName: mme
    ProductionVariants: [{VariantName: AllTraffic, ModelName: mme, InitialInstanceCount: 1, InstanceType: ml.c5.large}]
Endpoints:
  - {EndpointName: mme, EndpointConfigName: mme}
`, prefix, fit*10<<20)), 0o644)
	return file
}

func checkOutput(t *testing.T, got []byte, want []float64) error {
	var out struct {
		Outputs []struct {
			Data []float64 `json:"data"`
		} `json:"outputs"`
	}
	if err := json.Unmarshal(got, &out); err != nil || len(out.Outputs) != 1 || len(out.Outputs[0].Data) != len(want) {
		return fmt.Errorf("answer %s", got)
	}
	for i, v := range out.Outputs[0].Data {
		if math.Abs(v-want[i]) > 1e-5 {
			return fmt.Errorf("output %d = %v, want %v", i, v, want[i])
		}
	}
	return nil
}

func metricValue(text, name string) float64 {
	re := regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(name) + `(\{[^}]*\})? ([0-9.e+-]+)$`)
	total := 0.0
	for _, m := range re.FindAllStringSubmatch(text, -1) {
		v, _ := strconv.ParseFloat(m[2], 64)
		total += v
	}
	return total
}

// TestMultiModelEndpoint serves the 200 generated models through the model
// server, which holds 20 at a time, and checks every answer against the
// manifest.
func TestMultiModelEndpoint(t *testing.T) {
	dir := testenv.MMEModels(t)
	testenv.Image(t, "modelserver")
	man := loadManifest(t, dir)
	c, url := dockerHostURL(t, mmeEndpointFile(t, dir, 20))
	scrape := func() string {
		resp, err := http.Get(url + "/metrics")
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return string(b)
	}
	call := func(i int) error {
		m := man.Models[i]
		out, err := c.InvokeEndpoint(context.Background(), &sagemakerruntime.InvokeEndpointInput{
			EndpointName: aws.String("mme"), TargetModel: aws.String(m.TargetModel),
			ContentType: aws.String("application/json"), Body: m.Request})
		if err != nil {
			return err
		}
		return checkOutput(t, out.Body, m.Response.Outputs[0].Data)
	}

	// 100 concurrent first calls for one model: one download, one load.
	var wg sync.WaitGroup
	errs := make(chan error, 100)
	for range 100 {
		wg.Add(1)
		go func() { defer wg.Done(); errs <- call(7) }()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatalf("concurrent first call: %v", err)
		}
	}
	text := scrape()
	if d, l := metricValue(text, "mce_model_downloading_seconds_count"), metricValue(text, "mce_model_loading_seconds_count"); d != 1 || l != 1 {
		t.Errorf("100 concurrent first calls caused %v downloads and %v loads; want 1 and 1", d, l)
	}

	// 50 clients, random models among 200, the server holding 20.
	const clients, perClient = 50, 20
	var mu sync.Mutex
	var lat []time.Duration
	var failures []error
	for w := range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := rand.New(rand.NewPCG(uint64(w), 42))
			for range perClient {
				start := time.Now()
				err := call(r.IntN(len(man.Models)))
				mu.Lock()
				lat = append(lat, time.Since(start))
				if err != nil {
					failures = append(failures, err)
				}
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	text = scrape()
	hits, calls := metricValue(text, "mce_model_cache_hits_total"), metricValue(text, "mce_model_cache_requests_total")
	unloads, evictions := metricValue(text, "mce_model_unloading_seconds_count"), metricValue(text, "mce_model_evictions_total")
	sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
	t.Logf("200 models, 20 resident, %d clients: %d requests, %d failed, hit ratio %.2f (%v of %v), %v unloads (%v evictions), loaded now %v, p50 %v, p99 %v",
		clients, len(lat), len(failures), hits/calls, hits, calls, unloads, evictions, metricValue(text, "mce_loaded_models"),
		lat[len(lat)/2].Round(time.Microsecond), lat[len(lat)*99/100].Round(time.Microsecond))
	for i, err := range failures {
		if i < 5 {
			t.Errorf("failed request: %v", err)
		}
	}
	if evictions == 0 || hits == 0 {
		t.Errorf("metrics show %v evictions and %v cache hits; want both", evictions, hits)
	}
	if loaded := metricValue(text, "mce_loaded_models"); loaded < 1 || loaded > 20 {
		t.Errorf("mce_loaded_models = %v, want 1..20", loaded)
	}
}

func tarGz(t *testing.T, path string, hdrs []tar.Header, body string) {
	t.Helper()
	var buf bytes.Buffer
	gz := gzip.NewWriter(&buf)
	tw := tar.NewWriter(gz)
	for _, h := range hdrs {
		if h.Typeflag == tar.TypeReg {
			h.Size = int64(len(body))
		}
		tw.WriteHeader(&h)
		if h.Typeflag == tar.TypeReg {
			io.WriteString(tw, body)
		}
	}
	tw.Close()
	gz.Close()
	os.WriteFile(path, buf.Bytes(), 0o644)
}

// TestMultiModelBadArtifacts: missing, corrupt and malicious artifacts are
// refused with clear errors, and the endpoint keeps serving good models.
func TestMultiModelBadArtifacts(t *testing.T) {
	src := testenv.MMEModels(t)
	testenv.Image(t, "modelserver")
	man := loadManifest(t, src)
	prefix := t.TempDir()
	good, _ := os.ReadFile(filepath.Join(src, man.Models[3].TargetModel))
	os.WriteFile(filepath.Join(prefix, "good.tar.gz"), good, 0o644)
	os.WriteFile(filepath.Join(prefix, "corrupt.tar.gz"), []byte("\x1f\x8bnot really gzip"), 0o644)
	tarGz(t, filepath.Join(prefix, "slip.tar.gz"), []tar.Header{{Name: "../../../evil", Mode: 0o644, Typeflag: tar.TypeReg}}, "x")
	tarGz(t, filepath.Join(prefix, "link.tar.gz"), []tar.Header{{Name: "model.json", Linkname: "/etc/passwd", Typeflag: tar.TypeSymlink}}, "")
	c, _ := dockerHostURL(t, mmeEndpointFile(t, prefix, 20))
	invoke := func(target string) (*sagemakerruntime.InvokeEndpointOutput, error) {
		return c.InvokeEndpoint(context.Background(), &sagemakerruntime.InvokeEndpointInput{EndpointName: aws.String("mme"),
			TargetModel: aws.String(target), ContentType: aws.String("application/json"), Body: man.Models[3].Request})
	}
	for _, tc := range []struct{ target, code string }{
		{"missing.tar.gz", "ValidationError"},
		{"corrupt.tar.gz", "ValidationError"},
		{"slip.tar.gz", "ValidationError"},
		{"link.tar.gz", "ValidationError"},
		{"../outside.tar.gz", "ValidationError"},
		// Issue 9: a 300-byte segment was a 500 naming a folder of the cache.
		{strings.Repeat("a", 300) + ".tar.gz", "ValidationError"},
		{"sub/" + strings.Repeat("b", 256) + "/m.tar.gz", "ValidationError"},
	} {
		_, err := invoke(tc.target)
		var ae smithy.APIError
		if !errors.As(err, &ae) || ae.ErrorCode() != tc.code {
			t.Errorf("%s: %v, want %s", tc.target, err, tc.code)
			continue
		}
		if strings.Contains(ae.ErrorMessage(), prefix) || strings.Contains(ae.ErrorMessage(), os.TempDir()) {
			t.Errorf("%s: the message names a host path: %s", tc.target, ae.ErrorMessage())
		}
		t.Logf("%s: %s: %s", tc.target, ae.ErrorCode(), ae.ErrorMessage())
	}
	if _, err := os.Stat(filepath.Join(filepath.Dir(prefix), "evil")); err == nil {
		t.Error("the tar-slip archive wrote outside")
	}
	out, err := invoke("good.tar.gz")
	if err != nil {
		t.Fatal(err)
	}
	if err := checkOutput(t, out.Body, man.Models[3].Response.Outputs[0].Data); err != nil {
		t.Error(err)
	}
	// The header is required on a multi-model endpoint.
	_, err = c.InvokeEndpoint(context.Background(), &sagemakerruntime.InvokeEndpointInput{EndpointName: aws.String("mme"), Body: []byte("{}")})
	var ve *types.ValidationError
	if !errors.As(err, &ve) || !strings.Contains(aws.ToString(ve.Message), "TargetModel") {
		t.Errorf("no TargetModel: %v", err)
	}
}
