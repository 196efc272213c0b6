package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/sagemaker"

	"github.com/mce-run/mce/internal/testenv"
)

// logsEndpoints: "slow" passes /ping only after 6 s (so its wait is
// reported); "ep" is a Direct endpoint of two probes, b of which exits every
// 10 s and is restarted (so it prints a new line while it is followed).
const logsEndpoints = `
Models:
  - ModelName: slow
    PrimaryContainer: {Image: mce-example/probe:latest, Environment: {PROBE_READY_AFTER: 6s}}
  - ModelName: two
    Containers:
      - {ContainerHostname: a, Image: mce-example/probe:latest, Environment: {PROBE_TAG: A}}
      - {ContainerHostname: b, Image: mce-example/probe:latest, Environment: {PROBE_TAG: B, PROBE_EXIT_AFTER: 10s}}
    InferenceExecutionConfig: {Mode: Direct}
EndpointConfigs:
  - EndpointConfigName: slow
    ProductionVariants: [{VariantName: AllTraffic, ModelName: slow, InitialInstanceCount: 1, InstanceType: ml.c5.large, ContainerStartupHealthCheckTimeoutInSeconds: 60}]
  - EndpointConfigName: two
    ProductionVariants: [{VariantName: AllTraffic, ModelName: two, InitialInstanceCount: 1, InstanceType: ml.c5.large, ContainerStartupHealthCheckTimeoutInSeconds: 60}]
Endpoints:
  - {EndpointName: slow, EndpointConfigName: slow}
  - {EndpointName: ep, EndpointConfigName: two}
`

// logsCredentials: reader may read the logs of ep, other may do anything in
// SageMaker but read no logs; unsigned callers may list and invoke.
const reader = "AKIAREADER000EXAMPLE"

const logsCredentials = `
Credentials:
  - AccessKeyId: AKIAREADER000EXAMPLE
    SecretAccessKey: reader-example-secret-key-00000000000
    Arn: arn:aws:iam::123456789012:user/reader
    Policies:
      - Name: read-ep-logs
        Document: '{"Version": "2012-10-17", "Statement": [{"Effect": "Allow", "Action": "logs:FilterLogEvents", "Resource": ["arn:aws:logs:*:*:log-group:/aws/sagemaker/Endpoints/ep:*", "arn:aws:logs:*:*:log-group:/aws/sagemaker/Endpoints/nope:*"]}]}'
  - AccessKeyId: AKIAOTHER0000EXAMPLE
    SecretAccessKey: other-example-secret-key-000000000000
    Arn: arn:aws:iam::123456789012:user/other
    Policies:
      - Name: sagemaker-only
        Document: '{"Version": "2012-10-17", "Statement": [{"Effect": "Allow", "Action": "sagemaker:*", "Resource": "*"}]}'
  - AccessKeyId: AKIAOPS00000EXAMPLE
    SecretAccessKey: ops-example-secret-key-00000000000000
    Arn: arn:aws:iam::123456789012:user/ops
    Policies:
      - Name: all-logs
        Document: '{"Version": "2012-10-17", "Statement": [{"Effect": "Allow", "Action": "logs:*", "Resource": "*"}]}'
Anonymous:
  Policies:
    - Name: anonymous
      Document: '{"Version": "2012-10-17", "Statement": [{"Effect": "Allow", "Action": ["sagemaker:ListEndpoints", "sagemaker:InvokeEndpoint"], "Resource": "*"}]}'
`

// TestProgressLogsAndAccessLog runs mce serve with policies and an access
// log on real containers: the wait for /ping is reported with the time
// waited and the container's last line, a failed invocation is logged at
// info with its fields, every request gets one access line, and mce logs
// shows history, follows new lines, filters by container, refuses callers
// the policies do not allow, and leaves nothing running when its client
// goes away.
func TestProgressLogsAndAccessLog(t *testing.T) {
	cli := testenv.Docker(t)
	testenv.Image(t, "probe")
	dir := t.TempDir()
	file := filepath.Join(dir, "ep.yaml")
	creds := filepath.Join(dir, "credentials.yaml")
	access := filepath.Join(dir, "access.log")
	os.WriteFile(file, []byte(logsEndpoints), 0o644)
	os.WriteFile(creds, []byte(logsCredentials), 0o600)

	listen := freePort(t)
	f := serveFlagsFor(t, listen, file)
	f.credentials, f.accessLog = creds, access
	f.log.level = "info"
	logs := &testenv.SyncBuffer{}
	f.logTo = logs
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- serve(ctx, f) }()
	t.Cleanup(func() {
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("serve: %v", err)
			}
		case <-time.After(90 * time.Second):
			t.Error("serve did not stop")
		}
		if c, n := testenv.Leftovers(t, cli, f.instance); c+n > 0 {
			t.Errorf("left behind %d containers, %d networks", c, n)
		}
		if t.Failed() {
			t.Logf("mce log:\n%s", logs.String())
		}
	})
	base := "http://" + listen
	waitInService(t, base, 2)

	t.Run("ping wait reported", func(t *testing.T) {
		ev := findEvent(t, logs.String(), func(ev map[string]any) bool {
			return ev["event"] == "ping_wait" && ev["endpoint"] == "slow"
		})
		msg, _ := ev["message"].(string)
		last, _ := ev["last_output"].(string)
		if !strings.HasPrefix(msg, "waiting for /ping on primary (5") || !strings.Contains(last, "probe") ||
			!strings.HasSuffix(msg, last) || ev["elapsed_ms"] == nil || ev["level"] != "info" {
			t.Errorf("ping wait line = %v; want the elapsed time and the container's last line", ev)
		}
		if ev := findEvent(t, logs.String(), func(ev map[string]any) bool {
			return ev["event"] == "ping_ready" && ev["endpoint"] == "slow"
		}); ev["took_ms"] == nil {
			t.Errorf("ping ready line = %v; want the time it took, with a unit", ev)
		}
	})

	t.Run("failed invocation logged at info", func(t *testing.T) {
		req, _ := http.NewRequest(http.MethodPost, base+"/endpoints/ep/invocations", strings.NewReader("x"))
		req.Header.Set("Content-Type", "text/plain")
		req.Header.Set("X-Amzn-SageMaker-Target-Container-Hostname", "a")
		req.Header.Set("X-Amzn-SageMaker-Custom-Attributes", "status=503")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		id := resp.Header.Get("X-Amzn-RequestId")
		if resp.StatusCode != http.StatusFailedDependency || id == "" {
			t.Fatalf("status %d, request id %q; want 424 with an id", resp.StatusCode, id)
		}
		ev := findEvent(t, logs.String(), func(ev map[string]any) bool { return ev["request_id"] == id })
		lat, _ := ev["latency_ms"].(float64)
		if ev["level"] != "info" || ev["event"] != "invocation_failed" || ev["endpoint"] != "ep" || ev["variant"] != "AllTraffic" ||
			ev["container"] != "a" || ev["status"] != float64(424) || ev["original_status"] != float64(503) ||
			ev["code"] != "ModelError" || lat <= 0 || ev["error"] == "" {
			t.Errorf("failed invocation line = %v", ev)
		}
	})

	t.Run("history", func(t *testing.T) {
		out, err := runLogs(t, base, reader, logsFlags{container: "a", tail: 5}, "ep")
		if err != nil || !strings.Contains(out, "probe listening on") || strings.Contains(out, " | ") {
			t.Errorf("logs ep --container a: %q, %v; want its start line, unprefixed", out, err)
		}
		out, err = runLogs(t, base, reader, logsFlags{tail: 5}, "ep")
		if err != nil || !strings.Contains(out, "AllTraffic/0/a | probe listening on") || !strings.Contains(out, "AllTraffic/0/b | probe listening on") {
			t.Errorf("logs ep: %q, %v; want both containers' lines, prefixed", out, err)
		}
		out, err = runLogs(t, base, reader, logsFlags{tail: 5, variant: "AllTraffic", container: "b"}, "ep")
		if err != nil || strings.Count(out, "probe listening on") < 1 || strings.Contains(out, "A\n") {
			t.Errorf("logs ep --variant AllTraffic --container b: %q, %v", out, err)
		}
	})

	t.Run("errors", func(t *testing.T) {
		for _, c := range []struct {
			ep   string
			f    logsFlags
			want string
		}{
			{"nope", logsFlags{}, `ValidationException: Could not find endpoint "arn:aws:sagemaker:us-east-1:123456789012:endpoint/nope".`},
			{"ep", logsFlags{container: "c"}, "ValidationException: Endpoint ep has no container c."},
			{"ep", logsFlags{variant: "Other"}, "ValidationException: Endpoint ep has no variant Other."},
			{"ep", logsFlags{tail: 10001}, "ValidationException: tail"},
		} {
			_, err := runLogs(t, base, reader, c.f, c.ep)
			var ee *exitError
			if !errors.As(err, &ee) || !strings.HasPrefix(ee.msg, c.want) {
				t.Errorf("logs %s %+v: %v; want %q", c.ep, c.f, err, c.want)
			}
		}
	})

	t.Run("authorization", func(t *testing.T) {
		for _, c := range []struct{ key, ep, want string }{
			{"", "ep", "AccessDenied"},
			{"AKIAOTHER0000EXAMPLE", "ep", "AccessDenied"},
			{"AKIAREADER000EXAMPLE", "slow", "AccessDenied"},
			{"AKIAREADER000EXAMPLE", "ep", ""},
		} {
			out, err := runLogs(t, base, c.key, logsFlags{tail: 1}, c.ep)
			var ee *exitError
			switch {
			case c.want == "" && (err != nil || !strings.Contains(out, "AllTraffic/0/a | probe")):
				t.Errorf("%s reading %s: %q, %v; want the logs", c.key, c.ep, out, err)
			case c.want != "" && (!errors.As(err, &ee) || !strings.Contains(ee.msg, c.want) || !strings.Contains(ee.msg, "logs:FilterLogEvents")):
				t.Errorf("%s reading %s: %v; want %s naming logs:FilterLogEvents", c.key, c.ep, err, c.want)
			}
		}
	})

	t.Run("follow", func(t *testing.T) {
		// b restarts every 10 s; with --tail 0 every line printed is one
		// that came after the follow began.
		fctx, fcancel := context.WithTimeout(context.Background(), 45*time.Second)
		defer fcancel()
		pr, pw := io.Pipe()
		ended := make(chan error, 1)
		t.Setenv("AWS_ACCESS_KEY_ID", reader)
		t.Setenv("AWS_SECRET_ACCESS_KEY", "reader-example-secret-key-00000000000")
		go func() {
			ended <- showLogs(fctx, logsFlags{endpointURL: base, region: "us-east-1", container: "b", follow: true}, "ep", pw, io.Discard)
			pw.Close()
		}()
		sc := bufio.NewScanner(pr)
		got := ""
		for sc.Scan() {
			if strings.Contains(sc.Text(), "probe listening on") {
				got = sc.Text()
				break
			}
		}
		if got == "" {
			t.Fatalf("no line of b's restart within 45 s")
		}
		if n := followers("containerLogs("); n != 1 {
			t.Errorf("%d log followers running, want 1", n)
		}
		fcancel() // the client goes away
		go io.Copy(io.Discard, pr)
		if err := <-ended; err != nil {
			t.Errorf("follow ended with %v", err)
		}
		deadline := time.Now().Add(10 * time.Second)
		for followers("containerLogs") > 0 && time.Now().Before(deadline) {
			time.Sleep(50 * time.Millisecond)
		}
		if n := followers("containerLogs"); n != 0 {
			buf := make([]byte, 1<<20)
			t.Errorf("%d log followers still running after the client left:\n%s", n, buf[:runtime.Stack(buf, true)])
		}
	})

	t.Run("access log", func(t *testing.T) {
		// Lines are written by a goroutine; give it a moment.
		var lines []map[string]any
		deadline := time.Now().Add(5 * time.Second)
		for {
			lines = readJSONLines(t, access)
			if countOp(lines, "logs:FilterLogEvents") >= 12 || time.Now().After(deadline) {
				break
			}
			time.Sleep(100 * time.Millisecond)
		}
		fi, err := os.Stat(access)
		if err != nil || fi.Mode().Perm() != 0o640 {
			t.Errorf("access log mode: %v, %v; want 0640", fi.Mode(), err)
		}
		var inv map[string]any
		for _, l := range lines {
			if l["operation"] == "InvokeEndpoint" {
				inv = l
			}
			for _, k := range []string{"time", "request_id", "remote", "method", "path", "status", "bytes_in", "bytes_out", "duration_ms"} {
				if _, ok := l[k]; !ok {
					t.Errorf("access line %v has no %s", l, k)
				}
			}
		}
		if inv == nil || inv["endpoint"] != "ep" || inv["status"] != float64(424) || inv["bytes_in"] != float64(1) || inv["bytes_out"].(float64) == 0 {
			t.Errorf("access line of the failed invocation = %v", inv)
		}
		if n := countOp(lines, "logs:FilterLogEvents"); n != 12 {
			t.Errorf("%d access lines of logs calls, want 12 (one per call)", n)
		}
	})

	t.Run("CloudWatch Logs API", func(t *testing.T) {
		// The aws CLI v2 (Debian's awscli, installed by scripts/deps.sh)
		// and boto3, as a SageMaker user reads endpoint logs.
		const cli, py = "/usr/bin/aws", "/usr/bin/python3"
		if _, err := os.Stat(cli); err != nil {
			t.Skip("no aws CLI v2 at /usr/bin/aws (scripts/deps.sh installs it)")
		}
		run := func(key, secret string, name string, args ...string) (string, error) {
			cmd := exec.Command(name, args...)
			cmd.Env = append(os.Environ(), "AWS_ACCESS_KEY_ID="+key, "AWS_SECRET_ACCESS_KEY="+secret, "AWS_REGION=us-east-1", "AWS_DEFAULT_REGION=us-east-1",
				"AWS_CONFIG_FILE=/dev/null", "AWS_SHARED_CREDENTIALS_FILE=/dev/null", "AWS_EC2_METADATA_DISABLED=true", "AWS_PAGER=")
			out, err := cmd.CombinedOutput()
			return string(out), err
		}
		const ops, opsSecret = "AKIAOPS00000EXAMPLE", "ops-example-secret-key-00000000000000"
		out, err := run(ops, opsSecret, cli, "logs", "tail", "/aws/sagemaker/Endpoints/ep", "--endpoint-url", base, "--since", "1h")
		if err != nil || !strings.Contains(out, " AllTraffic/0/a probe listening on") || !strings.Contains(out, " AllTraffic/0/b probe listening on") {
			t.Errorf("aws logs tail: %v\n%s", err, out)
		}
		out, err = run(reader, "reader-example-secret-key-00000000000", cli, "logs", "get-log-events", "--endpoint-url", base,
			"--log-group-name", "/aws/sagemaker/Endpoints/ep", "--log-stream-name", "AllTraffic/0/a")
		if err == nil || !strings.Contains(out, "AccessDenied") || !strings.Contains(out, "logs:GetLogEvents") {
			t.Errorf("reader's get-log-events: %v\n%s; want AccessDenied (its policy allows FilterLogEvents only)", err, out)
		}
		out, err = run(ops, opsSecret, cli, "logs", "tail", "/aws/sagemaker/Endpoints/nope", "--endpoint-url", base)
		if err == nil || !strings.Contains(out, "ResourceNotFoundException") {
			t.Errorf("aws logs tail of an unknown endpoint: %v\n%s", err, out)
		}
		if exec.Command(py, "-c", "import boto3").Run() != nil {
			t.Skip("no boto3 for /usr/bin/python3 (scripts/deps.sh installs it)")
		}
		// Paging: one event a page must give every event once, in order;
		// GetLogEvents from the head pages until the token repeats.
		out, err = run(ops, opsSecret, py, "-c", `
import sys, boto3
logs = boto3.client("logs", endpoint_url=sys.argv[1])
g = "/aws/sagemaker/Endpoints/ep"
ids, ts = [], []
for page in logs.get_paginator("filter_log_events").paginate(logGroupName=g, PaginationConfig={"PageSize": 1}):
    ids += [e["eventId"] for e in page["events"]]
    ts += [e["timestamp"] for e in page["events"]]
assert len(ids) == len(set(ids)) and ts == sorted(ts), (ids, ts)
# The SageMaker SDK's live logging (deploy(endpoint_logging=True)) prints
# only the pages that carry a nextToken and resumes from it at its next
# poll: every event must reach it, once.
cfg, sdk = {"PageSize": 10000}, []
for _ in range(2):
    for page in logs.get_paginator("filter_log_events").paginate(logGroupName=g, logStreamNamePrefix="AllTraffic/", PaginationConfig=cfg):
        if "nextToken" in page:
            cfg["StartingToken"] = page["nextToken"]
            sdk += [e["eventId"] for e in page["events"]]
assert len(sdk) == len(set(sdk)) and set(ids) <= set(sdk), (len(ids), len(sdk))
kw = dict(logGroupName=g, logStreamName="AllTraffic/0/a", startFromHead=True, limit=1)
got = []
while True:
    r = logs.get_log_events(**kw)
    got += [e["message"] for e in r["events"]]
    if r["nextForwardToken"] == kw.get("nextToken"):
        break
    kw["nextToken"] = r["nextForwardToken"]
tail = logs.get_log_events(logGroupName=g, logStreamName="AllTraffic/0/a", limit=1)["events"]
assert [e["message"] for e in tail] == got[-1:], (tail, got)
streams = [s["logStreamName"] for s in logs.describe_log_streams(logGroupName=g)["logStreams"]]
print(len(ids), len(got), streams, got)
`, base)
		if err != nil || !strings.Contains(out, "['AllTraffic/0/a', 'AllTraffic/0/b']") || !strings.Contains(out, "'probe listening on") {
			t.Errorf("boto3: %v\n%s", err, out)
		}
		t.Log(out)
	})

	t.Run("at most 32 followers", func(t *testing.T) {
		t.Setenv("AWS_ACCESS_KEY_ID", reader)
		t.Setenv("AWS_SECRET_ACCESS_KEY", "reader-example-secret-key-00000000000")
		fctx, fcancel := context.WithCancel(context.Background())
		defer fcancel()
		for i := range 33 {
			req, _ := http.NewRequestWithContext(fctx, http.MethodGet, base+"/mce/endpoints/ep/logs?follow=true&tail=0", nil)
			if err := signRequest(fctx, req, "us-east-1"); err != nil {
				t.Fatal(err)
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			want := http.StatusOK
			if i == 32 {
				want = http.StatusServiceUnavailable
			}
			if resp.StatusCode != want {
				t.Fatalf("follow %d: status %d, want %d", i+1, resp.StatusCode, want)
			}
		}
		fcancel()
		deadline := time.Now().Add(10 * time.Second)
		for followers("containerLogs") > 0 && time.Now().Before(deadline) {
			time.Sleep(50 * time.Millisecond)
		}
		if n := followers("containerLogs("); n != 0 {
			t.Errorf("%d followers left after their clients went away", n)
		}
	})

	t.Run("deleting the endpoint ends followers", func(t *testing.T) {
		t.Setenv("AWS_ACCESS_KEY_ID", reader)
		t.Setenv("AWS_SECRET_ACCESS_KEY", "reader-example-secret-key-00000000000")
		fctx, fcancel := context.WithTimeout(context.Background(), time.Minute)
		defer fcancel()
		ended := make(chan error, 1)
		go func() {
			ended <- showLogs(fctx, logsFlags{endpointURL: base, region: "us-east-1", follow: true}, "ep", io.Discard, io.Discard)
		}()
		deadline := time.Now().Add(10 * time.Second)
		for followers("containerLogs(") == 0 && time.Now().Before(deadline) {
			time.Sleep(20 * time.Millisecond)
		}
		sm := sagemaker.New(sagemaker.Options{Region: "us-east-1", BaseEndpoint: aws.String(base),
			Credentials: credentials.NewStaticCredentialsProvider("AKIAOTHER0000EXAMPLE", "other-example-secret-key-000000000000", "")})
		if _, err := sm.DeleteEndpoint(context.Background(), &sagemaker.DeleteEndpointInput{EndpointName: aws.String("ep")}); err != nil {
			t.Fatal(err)
		}
		select {
		case err := <-ended:
			if err != nil {
				t.Errorf("the follow ended with %v", err)
			}
		case <-time.After(45 * time.Second):
			t.Error("the follow did not end when the endpoint was deleted")
		}
	})

	t.Run("shutdown ends followers", func(t *testing.T) {
		// A follow in progress must not hold up a shutdown for the drain
		// period (10 s here): mce ends it at once.
		t.Setenv("AWS_ACCESS_KEY_ID", "AKIAOPS00000EXAMPLE")
		t.Setenv("AWS_SECRET_ACCESS_KEY", "ops-example-secret-key-00000000000000")
		fctx, fcancel := context.WithTimeout(context.Background(), time.Minute)
		defer fcancel()
		ended := make(chan error, 1)
		go func() {
			ended <- showLogs(fctx, logsFlags{endpointURL: base, region: "us-east-1", follow: true}, "slow", io.Discard, io.Discard)
		}()
		deadline := time.Now().Add(10 * time.Second)
		for followers("containerLogs(") == 0 && time.Now().Before(deadline) {
			time.Sleep(20 * time.Millisecond)
		}
		start := time.Now()
		cancel() // SIGTERM
		select {
		case err := <-ended:
			if err != nil || time.Since(start) > 5*time.Second {
				t.Errorf("the follow ended after %s with %v; want it ended at once, cleanly", time.Since(start), err)
			}
		case <-time.After(30 * time.Second):
			t.Error("the follow did not end when mce shut down")
		}
		err := <-done
		done <- err // for the clean-up
	})
}

// followers counts the goroutines whose stacks hold frame: the handler of
// the logs call ("containerLogs(") or it and its helpers ("containerLogs").
func followers(frame string) int {
	buf := make([]byte, 4<<20)
	stacks := string(buf[:runtime.Stack(buf, true)])
	n := 0
	for g := range strings.SplitSeq(stacks, "\n\n") {
		if strings.Contains(g, "host.(*Server)."+frame) {
			n++
		}
	}
	return n
}

// runLogs runs mce logs against base, signed with key's credentials ("" for
// none), and returns what it printed.
func runLogs(t *testing.T, base, key string, f logsFlags, endpoint string) (string, error) {
	t.Helper()
	secrets := map[string]string{
		"AKIAREADER000EXAMPLE": "reader-example-secret-key-00000000000",
		"AKIAOTHER0000EXAMPLE": "other-example-secret-key-000000000000",
	}
	t.Setenv("AWS_ACCESS_KEY_ID", key)
	t.Setenv("AWS_SECRET_ACCESS_KEY", secrets[key])
	f.endpointURL, f.region = base, "us-east-1"
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var out strings.Builder
	err := showLogs(ctx, f, endpoint, &out, io.Discard)
	return out.String(), err
}

// findEvent returns the first JSON log line match accepts.
func findEvent(t *testing.T, log string, match func(map[string]any) bool) map[string]any {
	t.Helper()
	for line := range strings.SplitSeq(log, "\n") {
		var ev map[string]any
		if json.Unmarshal([]byte(line), &ev) == nil && match(ev) {
			return ev
		}
	}
	t.Fatalf("no such line in the log")
	return nil
}

func readJSONLines(t *testing.T, path string) []map[string]any {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var out []map[string]any
	for line := range strings.SplitSeq(strings.TrimSpace(string(b)), "\n") {
		var m map[string]any
		if err := json.Unmarshal([]byte(line), &m); err != nil {
			t.Fatalf("access line %q: %v", line, err)
		}
		out = append(out, m)
	}
	return out
}

func countOp(lines []map[string]any, op string) int {
	n := 0
	for _, l := range lines {
		if l["operation"] == op {
			n++
		}
	}
	return n
}
