package cloudwatch

import (
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// Real Python clients against the package served on 127.0.0.1: boto3 1.43
// (pyenv's python3, AWS JSON 1.0), Debian's boto3 1.26 (/usr/bin/python3,
// the query protocol), and the aws CLI of each (v1.45 and Debian's v2.9).
// Each reads what was recorded and sees CloudWatch's error for a bad
// Period; the server checks which protocol each spoke.

const botoScript = `
import os, sys, json, datetime
import boto3, botocore
if os.environ.get("CW_PROTOCOL"):
    # Put one of the protocols CloudWatch's model lists first in botocore's
    # preference (botocore 1.43 picks json over smithy-rpc-v2-cbor).
    import botocore.model
    first = os.environ["CW_PROTOCOL"]
    botocore.model.PRIORITY_ORDERED_SUPPORTED_PROTOCOLS = (first,) + tuple(
        p for p in botocore.model.PRIORITY_ORDERED_SUPPORTED_PROTOCOLS if p != first)
url, t0 = sys.argv[1], float(sys.argv[2])
cw = boto3.client("cloudwatch", endpoint_url=url, region_name="us-east-1")
start = datetime.datetime.fromtimestamp(t0, datetime.timezone.utc)
end = start + datetime.timedelta(minutes=3)
dims = [{"Name": "EndpointName", "Value": "ep"}, {"Name": "VariantName", "Value": "v1"}]
out = {"botocore": botocore.__version__}
r = cw.get_metric_statistics(Namespace="AWS/SageMaker", MetricName="Invocations", Dimensions=dims,
    StartTime=start, EndTime=end, Period=60, Statistics=["Sum", "SampleCount"])
dps = sorted(r["Datapoints"], key=lambda d: d["Timestamp"])
out["sums"] = [[d["Timestamp"].timestamp(), d["Sum"], d["SampleCount"], d["Unit"]] for d in dps]
out["label"] = r["Label"]
r = cw.get_metric_statistics(Namespace="AWS/SageMaker", MetricName="ModelLatency", Dimensions=dims,
    StartTime=start, EndTime=end, Period=180, ExtendedStatistics=["p50", "p99"])
out["pct"] = r["Datapoints"][0]["ExtendedStatistics"]
r = cw.get_metric_data(StartTime=start, EndTime=end, ScanBy="TimestampAscending", MetricDataQueries=[
    {"Id": "calls", "MetricStat": {"Metric": {"Namespace": "AWS/SageMaker", "MetricName": "Invocations",
     "Dimensions": dims}, "Period": 60, "Stat": "Sum"}}])
res = r["MetricDataResults"][0]
out["gmd"] = [res["Id"], res["Values"], res["StatusCode"], [t.timestamp() for t in res["Timestamps"]]]
out["listed"] = sum(len(p["Metrics"]) for p in cw.get_paginator("list_metrics").paginate(Namespace="Custom"))
try:
    cw.get_metric_statistics(Namespace="AWS/SageMaker", MetricName="Invocations", StartTime=start,
        EndTime=end, Period=61, Statistics=["Sum"])
    out["err"] = None
except botocore.exceptions.ClientError as e:
    out["err"] = [type(e).__name__, e.response["Error"]["Code"], e.response["Error"]["Message"],
        e.response["ResponseMetadata"]["HTTPStatusCode"]]
print(json.dumps(out))
`

type botoResult struct {
	Botocore string          `json:"botocore"`
	Sums     [][]any         `json:"sums"`
	Label    string          `json:"label"`
	Pct      map[string]any  `json:"pct"`
	GMD      []any           `json:"gmd"`
	Listed   int             `json:"listed"`
	Err      []any           `json:"err"`
	Raw      json.RawMessage `json:"-"`
}

// clientServer records a few series and serves s, noting the protocol of
// each request.
func clientServer(t *testing.T) (url string, protocols func() map[string]int) {
	t.Helper()
	c := newClock(t0.Add(2 * time.Second))
	s := openTest(t, t.TempDir(), c, nil)
	inv := mustSeries(t, s, "AWS/SageMaker", "Invocations", epDims, "Count", Standard)
	lat := mustSeries(t, s, "AWS/SageMaker", "ModelLatency", epDims, "Microseconds", Standard)
	n := 0
	for m := range 3 {
		c.Set(t0.Add(time.Duration(m)*time.Minute + 2*time.Second))
		s.Flush()
		for range (m + 1) * 10 {
			n++
			inv.Observe(1)
			lat.Observe(float64(n) * 1000)
		}
	}
	for i := range 520 {
		mustSeries(t, s, "Custom", "M", []Dimension{{"I", fmt.Sprint(i)}}, "None", Standard).Observe(1)
	}
	return countingServer(t, s)
}

// countingServer serves s on loopback and counts the calls of each
// protocol: protocols returns the counts since its last call.
func countingServer(t *testing.T, s *Service) (url string, protocols func() map[string]int) {
	t.Helper()
	var mu sync.Mutex
	seen := map[string]int{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p, _ := detect(r)
		mu.Lock()
		seen[p.String()]++
		mu.Unlock()
		s.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	return srv.URL, func() map[string]int {
		mu.Lock()
		defer mu.Unlock()
		out := map[string]int{}
		for k, v := range seen {
			out[k] = v
		}
		for k := range seen {
			delete(seen, k)
		}
		return out
	}
}

// needClient skips, loudly, when a client is not installed and CI is not
// set; in CI a missing client fails the test.
func needClient(t *testing.T, path, what string) {
	t.Helper()
	if _, err := exec.LookPath(path); err != nil {
		missingClient(t, fmt.Sprintf("%s (%s) is not installed here: %v", what, path, err))
	}
}

func missingClient(t *testing.T, why string) {
	t.Helper()
	if os.Getenv("CI") != "" {
		t.Fatalf("in CI: %s", why)
	}
	t.Skipf("SKIPPED LOUDLY: %s; `make deps` (apt-get install -y python3-boto3 awscli) brings Debian's, pyenv's python3 has boto3 1.43 and the aws CLI v1", why)
}

// spoke checks that a client spoke the protocol its subtest is for: a
// python3 or aws on PATH that is another release (Debian's where pyenv's
// was meant) is a missing client, not a failure of the server.
func spoke(t *testing.T, protocols map[string]int, want, what string) {
	t.Helper()
	if protocols[want] == 0 || len(protocols) != 1 {
		missingClient(t, fmt.Sprintf("%s spoke %v, not only %s: the client release that speaks %s is not the one on PATH", what, protocols, want, want))
	}
}

func clientEnv() []string {
	env := []string{"AWS_ACCESS_KEY_ID=AKIDEXAMPLE", "AWS_SECRET_ACCESS_KEY=secret", "AWS_DEFAULT_REGION=us-east-1",
		"AWS_EC2_METADATA_DISABLED=true", "NO_PROXY=127.0.0.1", "no_proxy=127.0.0.1", "AWS_PAGER="}
	for _, k := range []string{"PATH", "HOME", "AWS_CONFIG_FILE", "AWS_SHARED_CREDENTIALS_FILE", "PYENV_ROOT", "PYENV_VERSION"} {
		if v, ok := os.LookupEnv(k); ok {
			env = append(env, k+"="+v)
		}
	}
	return env
}

// boto3Client is one boto3 the tests run, and the protocol it speaks.
type boto3Client struct {
	python, what, protocol, prefer string
}

// boto3Clients are the boto3s every CloudWatch operation is tried with.
var boto3Clients = []boto3Client{
	{"python3", "boto3 1.43 (AWS JSON 1.0)", "awsJson1_0", ""},
	{"/usr/bin/python3", "Debian's boto3 (the query protocol)", "awsQuery", ""},
	// botocore's own CBOR codec, a second implementation beside
	// aws-sdk-go-v2's: boto3 1.43 told to prefer the protocol.
	{"python3", "boto3 1.43 preferring smithy-rpc-v2-cbor", "rpcv2Cbor", "smithy-rpc-v2-cbor"},
}

// forEachBoto3 runs test as a subtest per boto3Clients entry, skipping
// (loudly, see needClient) one that is not installed.
func forEachBoto3(t *testing.T, test func(t *testing.T, c boto3Client)) {
	for _, c := range boto3Clients {
		t.Run(c.protocol, func(t *testing.T) {
			needClient(t, c.python, c.what)
			if err := exec.Command(c.python, "-c", "import boto3").Run(); err != nil {
				missingClient(t, c.python+" has no boto3")
			}
			test(t, c)
		})
	}
}

// run runs script with c's python and args, asking it for c's protocol
// (CW_PROTOCOL), and returns what it printed.
func (c boto3Client) run(t *testing.T, script string, args ...string) []byte {
	t.Helper()
	path := filepath.Join(t.TempDir(), "script.py")
	if err := os.WriteFile(path, []byte(script), 0o600); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(c.python, append([]string{path}, args...)...)
	cmd.Env = append(clientEnv(), "CW_PROTOCOL="+c.prefer)
	outb, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%s: %v\n%s", c.what, err, outb)
	}
	return outb
}

func TestBoto3Clients(t *testing.T) {
	forEachBoto3(t, func(t *testing.T, tc boto3Client) {
		url, protocols := clientServer(t)
		outb := tc.run(t, botoScript, url, fmt.Sprint(t0.Unix()))
		var got botoResult
		if err := json.Unmarshal(outb, &got); err != nil {
			t.Fatalf("%s printed %q", tc.what, outb)
		}
		t.Logf("%s: botocore %s", tc.what, got.Botocore)
		spoke(t, protocols(), tc.protocol, tc.what)
		m0, m1, m2 := float64(t0.Unix()), float64(t0.Unix()+60), float64(t0.Unix()+120)
		want := fmt.Sprint([][]any{{m0, 10.0, 10.0, "Count"}, {m1, 20.0, 20.0, "Count"}, {m2, 30.0, 30.0, "Count"}})
		if fmt.Sprint(got.Sums) != want || got.Label != "Invocations" {
			t.Errorf("get_metric_statistics: %v (label %q), want %s", got.Sums, got.Label, want)
		}
		for k, w := range map[string]float64{"p50": 30000, "p99": 59000} {
			v, _ := got.Pct[k].(float64)
			if math.Abs(v-w) > w*sketchAccuracy {
				t.Errorf("%s = %v, want %v ±1%%", k, got.Pct[k], w)
			}
		}
		if fmt.Sprint(got.GMD) != fmt.Sprint([]any{"calls", []any{10.0, 20.0, 30.0}, "Complete", []any{m0, m1, m2}}) {
			t.Errorf("get_metric_data: %v", got.GMD)
		}
		if got.Listed != 520 {
			t.Errorf("list_metrics paginated %d metrics, want 520", got.Listed)
		}
		if len(got.Err) != 4 || got.Err[0] != "InvalidParameterValueException" || got.Err[1] != CodeInvalidParameterValue ||
			!strings.Contains(fmt.Sprint(got.Err[2]), "Period") || got.Err[3] != 400.0 {
			t.Errorf("Period 61: %v, want InvalidParameterValueException / InvalidParameterValue / 400", got.Err)
		}
	})
}

func TestAWSCLIClients(t *testing.T) {
	for _, tc := range []struct {
		aws, what, protocol string
	}{
		{"aws", "the aws CLI v1 (AWS JSON 1.0)", "awsJson1_0"},
		{"/usr/bin/aws", "Debian's aws CLI v2 (the query protocol)", "awsQuery"},
	} {
		t.Run(tc.protocol, func(t *testing.T) {
			needClient(t, tc.aws, tc.what)
			url, protocols := clientServer(t)
			run := func(args ...string) ([]byte, error) {
				cmd := exec.Command(tc.aws, append(args, "--endpoint-url", url, "--region", "us-east-1", "--output", "json")...)
				cmd.Env = clientEnv()
				return cmd.CombinedOutput()
			}
			common := []string{"cloudwatch", "get-metric-statistics", "--namespace", "AWS/SageMaker", "--metric-name", "Invocations",
				"--dimensions", "Name=EndpointName,Value=ep", "Name=VariantName,Value=v1",
				"--start-time", t0.Format(time.RFC3339), "--end-time", t0.Add(3 * time.Minute).Format(time.RFC3339), "--statistics", "Sum"}
			outb, err := run(append(common, "--period", "60")...)
			if err != nil {
				t.Fatalf("%s: %v\n%s", tc.what, err, outb)
			}
			spoke(t, protocols(), tc.protocol, tc.what)
			var got struct {
				Label      string
				Datapoints []struct {
					Sum  float64
					Unit string
				}
			}
			if err := json.Unmarshal(outb, &got); err != nil {
				t.Fatalf("%s printed %q", tc.what, outb)
			}
			sum := 0.0
			for _, dp := range got.Datapoints {
				sum += dp.Sum
			}
			if len(got.Datapoints) != 3 || sum != 60 || got.Label != "Invocations" {
				t.Errorf("%s: %+v, want 3 datapoints summing to 60", tc.what, got)
			}
			outb, err = run(append(common, "--period", "61")...)
			if err == nil || !strings.Contains(string(outb), "InvalidParameterValue") || !strings.Contains(string(outb), "Period") {
				t.Errorf("Period 61: %v %s", err, outb)
			}
		})
	}
}
