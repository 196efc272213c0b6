package host_test

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"testing"
	"time"

	"github.com/mce-run/mce/internal/testenv"
)

// BenchmarkMultiModelHit compares, in one run and interleaved, a cache-hit
// call to a multi-model endpoint with a call to a single-model endpoint whose
// container is the same model server serving the same model (issue target:
// within 5%). It also reports the time mce adds to a cold call on top of the
// download and extraction and the container's own load.
//
//	go test -run '^$' -bench MultiModelHit -benchtime 2000x ./host/
func BenchmarkMultiModelHit(b *testing.B) {
	dir := testenv.MMEModels(b)
	testenv.Image(b, "modelserver")
	man := loadManifest(b, dir)
	single := filepath.Join(b.TempDir(), "single.yaml")
	os.WriteFile(single, []byte(fmt.Sprintf(`
Models:
  - ModelName: single
    PrimaryContainer: {Image: mce-example/modelserver:latest, ModelDataUrl: "file://%s/%s"}
EndpointConfigs:
  - EndpointConfigName: single
    ProductionVariants: [{VariantName: AllTraffic, ModelName: single, InitialInstanceCount: 1, InstanceType: ml.c5.large}]
Endpoints:
  - {EndpointName: single, EndpointConfigName: single}
`, dir, man.Models[0].TargetModel)), 0o644)
	_, url := dockerHostURL(b, mmeEndpointFile(b, dir, 20), single)
	hc := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 4}}
	post := func(endpoint, target string, body []byte) (time.Duration, error) {
		req, _ := http.NewRequest(http.MethodPost, url+"/endpoints/"+endpoint+"/invocations", bytes.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		if target != "" {
			req.Header.Set("X-Amzn-SageMaker-Target-Model", target)
		}
		start := time.Now()
		resp, err := hc.Do(req)
		if err != nil {
			return 0, err
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 {
			return 0, fmt.Errorf("%s: status %d", endpoint, resp.StatusCode)
		}
		return time.Since(start), nil
	}
	body := man.Models[0].Request
	target := man.Models[0].TargetModel
	// Cold calls first: mce's share is the call's time minus the download,
	// the load and a warm call's time.
	var cold []time.Duration
	for i := 1; i <= 10; i++ {
		before := scrapeMetrics(b, url)
		d, err := post("mme", man.Models[i].TargetModel, man.Models[i].Request)
		if err != nil {
			b.Fatal(err)
		}
		after := scrapeMetrics(b, url)
		dl := metricValue(after, "mce_model_downloading_seconds_sum") - metricValue(before, "mce_model_downloading_seconds_sum")
		ld := metricValue(after, "mce_model_loading_seconds_sum") - metricValue(before, "mce_model_loading_seconds_sum")
		warm, err := post("mme", man.Models[i].TargetModel, man.Models[i].Request)
		if err != nil {
			b.Fatal(err)
		}
		cold = append(cold, d-time.Duration((dl+ld)*float64(time.Second))-warm)
	}
	for range 200 { // warm both paths
		post("mme", target, body)
		post("single", "", body)
	}
	hit := make([]time.Duration, 0, b.N)
	one := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for range b.N {
		d, err := post("mme", target, body)
		if err != nil {
			b.Fatal(err)
		}
		hit = append(hit, d)
		d, err = post("single", "", body)
		if err != nil {
			b.Fatal(err)
		}
		one = append(one, d)
	}
	b.StopTimer()
	p50 := func(ds []time.Duration) time.Duration {
		s := append([]time.Duration(nil), ds...)
		sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
		return s[len(s)/2]
	}
	hp, sp := p50(hit), p50(one)
	b.ReportMetric(float64(hp.Microseconds()), "hit-p50-us")
	b.ReportMetric(float64(sp.Microseconds()), "single-p50-us")
	b.ReportMetric(float64(hp)/float64(sp), "hit/single")
	b.ReportMetric(float64(p50(cold).Microseconds()), "cold-added-p50-us")
}

func scrapeMetrics(b *testing.B, url string) string {
	resp, err := http.Get(url + "/metrics")
	if err != nil {
		b.Fatal(err)
	}
	defer resp.Body.Close()
	text, _ := io.ReadAll(resp.Body)
	return string(text)
}
