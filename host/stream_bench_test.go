package host

import (
	"bufio"
	"bytes"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws/protocol/eventstream"
	"github.com/rs/zerolog"

	"github.com/mce-run/mce/host/store"
	"github.com/mce-run/mce/internal/testenv"
)

// BenchmarkStreamTimeToFirstByte measures, in one run and alternating call
// by call, the time to first byte of a streamed answer from the probe
// container (stream=3,every=1ms: the first part at once, the others later)
// straight from the container (an HTTP POST to its address; time to the
// first body byte) and through mce's InvokeEndpointWithResponseStream over
// loopback HTTP (time to the first PayloadPart, decoded by aws-sdk-go-v2's
// event-stream decoder). Both reach the same container, at the same address.
// Reported: the p50s, mce's added p50 and the ratio mce/straight.
//
//	go test -run '^$' -bench StreamTimeToFirstByte -benchtime 2000x ./host/
func BenchmarkStreamTimeToFirstByte(b *testing.B) {
	testenv.Docker(b)
	img := testenv.OwnImage(b, "probe")
	out, err := exec.Command("docker", "run", "-d", "--rm", "--label", "mce-bench=stream-ttfb", img).CombinedOutput()
	if err != nil {
		b.Fatalf("docker run: %v\n%s", err, out)
	}
	id := strings.TrimSpace(string(out))
	b.Cleanup(func() { exec.Command("docker", "rm", "-f", id).Run() })
	ip, err := exec.Command("docker", "inspect", "-f", "{{range .NetworkSettings.Networks}}{{.IPAddress}}{{end}}", id).Output()
	if err != nil {
		b.Fatal(err)
	}
	container := "http://" + strings.TrimSpace(string(ip)) + ":8080"
	deadline := time.Now().Add(20 * time.Second)
	for {
		resp, err := http.Get(container + "/ping")
		if err == nil && resp.StatusCode == 200 {
			resp.Body.Close()
			break
		}
		if time.Now().After(deadline) {
			b.Fatalf("the probe at %s never answered /ping (%v)", container, err)
		}
		time.Sleep(50 * time.Millisecond)
	}

	st, err := store.Open(filepath.Join(b.TempDir(), "state.db"))
	if err != nil {
		b.Fatal(err)
	}
	defer st.Close()
	s := New(Config{Backend: benchBackend{container}, Store: st, Logger: zerolog.Nop()})
	defer s.Close(context.Background())
	p := plan("ttfb", "Serial", map[string][]string{"AllTraffic": {"echo:e"}})
	if _, err := s.startEndpoint(p, nil, p.ConfigName, nil); err != nil {
		b.Fatal(err)
	}
	if err := s.WaitEndpoint(context.Background(), "ttfb"); err != nil {
		b.Fatal(err)
	}
	hs := httptest.NewServer(s.Handler())
	defer hs.Close()
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 4}}

	const attrs = "stream=3,every=1ms"
	body := bytes.Repeat([]byte("x"), 64)
	// ttfb posts to url and returns the time until first() saw the first
	// piece of the answer; the rest is read and checked.
	ttfb := func(url string, first func(*bufio.Reader) ([]byte, error)) time.Duration {
		req, _ := http.NewRequest(http.MethodPost, url, bytes.NewReader(body))
		req.Header.Set("X-Amzn-SageMaker-Custom-Attributes", attrs)
		req.Header.Set("Content-Type", "application/octet-stream")
		start := time.Now()
		resp, err := client.Do(req)
		if err != nil {
			b.Fatal(err)
		}
		defer resp.Body.Close()
		br := bufio.NewReader(resp.Body)
		p, err := first(br)
		d := time.Since(start)
		if err != nil || resp.StatusCode != 200 || !bytes.HasPrefix(p, []byte("part 1 of 3")) {
			b.Fatalf("%s: %d %q %v", url, resp.StatusCode, p, err)
		}
		if _, err := io.Copy(io.Discard, br); err != nil {
			b.Fatal(err)
		}
		return d
	}
	firstByte := func(br *bufio.Reader) ([]byte, error) {
		if _, err := br.Peek(1); err != nil {
			return nil, err
		}
		return br.Peek(br.Buffered())
	}
	dec := eventstream.NewDecoder()
	firstEvent := func(br *bufio.Reader) ([]byte, error) {
		m, err := dec.Decode(br, nil)
		return m.Payload, err
	}
	direct := func() time.Duration { return ttfb(container+"/invocations", firstByte) }
	viaMCE := func() time.Duration {
		return ttfb(hs.URL+"/endpoints/ttfb/invocations-response-stream", firstEvent)
	}
	for range 50 { // warm both paths (connections, pools)
		direct()
		viaMCE()
	}
	straight := make([]time.Duration, 0, b.N)
	through := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for range b.N {
		straight = append(straight, direct())
		through = append(through, viaMCE())
	}
	b.StopTimer()
	p50 := func(ds []time.Duration) time.Duration {
		sort.Slice(ds, func(i, j int) bool { return ds[i] < ds[j] })
		return ds[len(ds)/2]
	}
	sp, mp := p50(straight), p50(through)
	b.ReportMetric(float64(sp.Microseconds()), "straight-ttfb-p50-us")
	b.ReportMetric(float64(mp.Microseconds()), "mce-ttfb-p50-us")
	b.ReportMetric(float64((mp - sp).Microseconds()), "added-p50-us")
	b.ReportMetric(float64(mp)/float64(sp), "mce/straight")
}
