package host_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sagemakerruntime"
	"github.com/aws/aws-sdk-go-v2/service/sagemakerruntime/types"

	"github.com/mce-run/mce/host"
	"github.com/mce-run/mce/internal/testenv"
	"github.com/mce-run/mce/internal/testenv/hostenv"
)

// dockerHost serves the endpoints of the given files on real containers and
// returns an aws-sdk-go-v2 client pointed at it.
func dockerHost(t testing.TB, files ...string) *sagemakerruntime.Client {
	c, _ := dockerHostURL(t, files...)
	return c
}

// dockerHostURL is dockerHost, also returning the host's URL. The
// container time limit is 5 s (tests of ModelInvocationTimeExceeded rely on
// it); dockerHostURLTimeout gives another.
func dockerHostURL(t testing.TB, files ...string) (*sagemakerruntime.Client, string) {
	t.Helper()
	return dockerHostURLTimeout(t, 5*time.Second, files...)
}

func dockerHostURLTimeout(t testing.TB, containerTimeout time.Duration, files ...string) (*sagemakerruntime.Client, string) {
	t.Helper()
	h := dockerHostOn(t, containerTimeout, files...)
	return h.RuntimeClient(), h.URL
}

// dockerHostOn is a host on Docker serving files, for a test that needs more
// of it than its client and URL (its instance, to tell its containers from
// those of tests running beside it).
func dockerHostOn(t testing.TB, containerTimeout time.Duration, files ...string) *hostenv.Host {
	t.Helper()
	testenv.Docker(t)
	for _, img := range []string{"probe", "sentiment", "featurizer", "classifier"} {
		testenv.Image(t, img)
	}
	testenv.Models(t)
	h := hostenv.New(t, hostenv.Options{
		// Model roots as mce serve makes them for these files: the examples'
		// data lies in the repository's build folder, the tests' in t.TempDir().
		ModelRoots: []string{os.TempDir(), filepath.Join(testenv.RepoRoot(t), "build")},
		Host:       func(c *host.Config) { c.ContainerTimeout = containerTimeout },
	})
	h.Apply(t, files...)
	return h
}

func invoke(t *testing.T, c *sagemakerruntime.Client, in *sagemakerruntime.InvokeEndpointInput) (*sagemakerruntime.InvokeEndpointOutput, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	return c.InvokeEndpoint(ctx, in)
}

func TestExamplesOnDocker(t *testing.T) {
	root := testenv.RepoRoot(t)
	c, url := dockerHostURL(t, filepath.Join(root, "examples/go-ab-test/endpoint.yaml"), filepath.Join(root, "examples/go-preprocess-inference/endpoint.yaml"))
	scrape := func() string {
		resp, err := http.Get(url + "/metrics")
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return string(b)
	}
	scrape() // the first sample sets the CPU baseline

	for _, tc := range []struct{ host, text, label string }{
		{"english", "What a wonderful, helpful service", "POSITIVE"},
		{"english", "This was terrible and slow", "NEGATIVE"},
		{"german", "Das ist wunderbar, vielen Dank", "POSITIVE"},
		{"german", "Das war leider furchtbar", "NEGATIVE"},
	} {
		out, err := invoke(t, c, &sagemakerruntime.InvokeEndpointInput{EndpointName: aws.String("ab-test"),
			TargetContainerHostname: aws.String(tc.host), ContentType: aws.String("text/plain"), Body: []byte(tc.text)})
		if err != nil {
			t.Fatalf("%s %q: %v", tc.host, tc.text, err)
		}
		var got struct{ Label, Language string }
		if err := json.Unmarshal(out.Body, &got); err != nil {
			t.Fatal(err)
		}
		if got.Label != tc.label || got.Language != map[string]string{"english": "en", "german": "de"}[tc.host] {
			t.Errorf("%s %q: %s", tc.host, tc.text, out.Body)
		}
	}

	out, err := invoke(t, c, &sagemakerruntime.InvokeEndpointInput{EndpointName: aws.String("preprocess-inference"),
		ContentType: aws.String("text/plain"), Accept: aws.String("text/csv"),
		Body: []byte("I was charged twice this month\nThe app crashes on start\nWhere is my parcel")})
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Fields(string(out.Body)); strings.Join(got, ",") != "billing,technical,shipping" {
		t.Errorf("chain labels = %q", out.Body)
	}
	if aws.ToString(out.ContentType) != "text/csv" {
		t.Errorf("chain content type = %q", aws.ToString(out.ContentType))
	}

	// Usage is sampled in the background (every 5 s; one Docker stats call
	// takes 1-2 s a container here), so the figures of these containers
	// appear within a few intervals, not at once.
	usageWants := []string{
		`mce_container_cpu_utilization_ratio{container="german",endpoint="ab-test",variant="AllTraffic"}`,
		`mce_container_memory_utilization_ratio{container="classifier",endpoint="preprocess-inference",variant="AllTraffic"}`,
		"mce_disk_utilization_ratio ",
	}
	var metrics string
	for deadline := time.Now().Add(60 * time.Second); ; time.Sleep(time.Second) {
		metrics = scrape()
		missing := 0
		for _, want := range usageWants {
			if !strings.Contains(metrics, want) {
				missing++
			}
		}
		if missing == 0 || time.Now().After(deadline) {
			break
		}
	}
	for _, want := range usageWants {
		if !strings.Contains(metrics, want) {
			t.Errorf("/metrics lacks %s after 60 s", want)
		}
	}

	// A content type the sentiment container does not take: its 415 comes
	// back as a ModelError naming it.
	_, err = invoke(t, c, &sagemakerruntime.InvokeEndpointInput{EndpointName: aws.String("ab-test"),
		TargetContainerHostname: aws.String("german"), ContentType: aws.String("image/png"), Body: []byte("x")})
	var me *types.ModelError
	if !errors.As(err, &me) || aws.ToInt32(me.OriginalStatusCode) != 415 || !strings.Contains(aws.ToString(me.Message), "german") {
		t.Errorf("err = %v, want ModelError 415 from german", err)
	}
}

// TestCopiesFailOver runs two copies of a variant, crashes one, and checks
// that every following request is answered by the healthy copy.
func TestCopiesFailOver(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "copies.yaml")
	os.WriteFile(file, []byte(`
Models:
  - ModelName: twice
    PrimaryContainer: {Image: mce-example/probe:latest}
EndpointConfigs:
  - EndpointConfigName: twice
    ProductionVariants:
      - {VariantName: AllTraffic, ModelName: twice, InitialInstanceCount: 2, InstanceType: ml.c5.large}
Endpoints:
  - {EndpointName: twice, EndpointConfigName: twice}
`), 0o644)
	c := dockerHost(t, file)
	// The crash request itself gets no answer: a ModelError.
	_, err := invoke(t, c, &sagemakerruntime.InvokeEndpointInput{EndpointName: aws.String("twice"), Body: []byte("x"),
		CustomAttributes: aws.String("crash=4")})
	var me *types.ModelError
	if !errors.As(err, &me) {
		t.Fatalf("crash request: err = %v, want ModelError", err)
	}
	for i := range 100 {
		out, err := invoke(t, c, &sagemakerruntime.InvokeEndpointInput{EndpointName: aws.String("twice"), Body: []byte(fmt.Sprint(i))})
		if err != nil {
			t.Fatalf("request %d after the crash: %v", i, err)
		}
		if string(out.Body) != fmt.Sprint(i) {
			t.Fatalf("request %d: %q", i, out.Body)
		}
	}
}
