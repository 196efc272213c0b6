package host

import (
	"bytes"
	"io"
	"net/http"
	"slices"
	"testing"
	"time"
)

// BenchmarkOpenAIRouteOverhead measures, in one run and alternating call by
// call, the same chat completion sent to the same container through
// InvokeEndpoint (POST /endpoints/chat/invocations) and through the
// OpenAI-compatible route (POST /endpoints/chat/openai/v1/chat/completions),
// with one keep-alive HTTP client for both. Reported: each route's p50, the
// route's added p50 (µs) and the ratio.
//
//	go test -run '^$' -bench OpenAIRouteOverhead -benchtime 5000x ./host/
func BenchmarkOpenAIRouteOverhead(b *testing.B) {
	h := newHarness(b, Config{})
	if err := h.deploy(plan("chat", "Serial", map[string][]string{"AllTraffic": {"primary:openai"}})); err != nil {
		b.Fatal(err)
	}
	body := []byte(`{"model":"m","messages":[{"role":"user","content":"one two three four"}]}`)
	client := h.http.Client()
	call := func(path string) time.Duration {
		req, _ := http.NewRequest(http.MethodPost, h.http.URL+path, bytes.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Authorization", "Bearer unused")
		start := time.Now()
		resp, err := client.Do(req)
		if err != nil {
			b.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		took := time.Since(start)
		if resp.StatusCode != 200 {
			b.Fatalf("%s: %d", path, resp.StatusCode)
		}
		return took
	}
	for range 200 { // warm both paths
		call("/endpoints/chat/invocations")
		call("/endpoints/chat/openai/v1/chat/completions")
	}
	var invoke, route []time.Duration
	b.ResetTimer()
	for range b.N {
		invoke = append(invoke, call("/endpoints/chat/invocations"))
		route = append(route, call("/endpoints/chat/openai/v1/chat/completions"))
	}
	b.StopTimer()
	p50 := func(d []time.Duration) time.Duration { slices.Sort(d); return d[len(d)/2] }
	pi, pr := p50(invoke), p50(route)
	b.ReportMetric(float64(pi.Microseconds()), "invoke-p50-µs")
	b.ReportMetric(float64(pr.Microseconds()), "openai-p50-µs")
	b.ReportMetric(float64(pr-pi)/1e3, "added-p50-µs")
	b.ReportMetric(float64(pr)/float64(pi), "openai/invoke")
}
