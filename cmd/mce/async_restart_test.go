package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/sagemakerruntime"

	"github.com/mce-run/mce/host/store"
	"github.com/mce-run/mce/internal/testenv"
)

// TestAsyncRestartAfterSIGKILL queues asynchronous requests on a slow
// container, kills mce with SIGKILL while the backlog is being worked
// through, starts it again and waits. Every accepted request must end as
// exactly one object: its answer at its OutputLocation, holding its own
// input (the probe echoes it); none at a failure location; no request
// answered twice (each answer is logged once, by whichever run wrote it);
// and the durable queue empty at the end.
func TestAsyncRestartAfterSIGKILL(t *testing.T) {
	cli := testenv.Docker(t)
	testenv.Image(t, "probe")
	s3srv := testenv.S3Server(t)
	s3srv.Bucket(t, "async")
	const n = 50
	for i := range n {
		s3srv.Put(t, "async", fmt.Sprintf("in/%d", i), []byte(fmt.Sprintf("request %d", i)))
	}

	listen := freePort(t)
	base := "http://" + listen
	dir := t.TempDir()
	file := filepath.Join(dir, "ep.yaml")
	os.WriteFile(file, []byte(`
Models:
  - ModelName: m
    PrimaryContainer: {Image: mce-example/probe:latest}
EndpointConfigs:
  - EndpointConfigName: c
    ProductionVariants: [{VariantName: AllTraffic, ModelName: m, InitialInstanceCount: 1, InstanceType: ml.c5.large, ContainerStartupHealthCheckTimeoutInSeconds: 60}]
    AsyncInferenceConfig:
      ClientConfig: {MaxConcurrentInvocationsPerInstance: 4}
      OutputConfig: {S3OutputPath: 's3://async/out', S3FailurePath: 's3://async/failed'}
Endpoints:
  - {EndpointName: ep, EndpointConfigName: c}
`), 0o644)
	f := serveFlagsFor(t, listen, file)
	f.stateDir = filepath.Join(dir, "state")
	logf := filepath.Join(dir, "mce.log")
	defer func() {
		if t.Failed() {
			b, _ := os.ReadFile(logf)
			t.Logf("mce log:\n%s", b)
		}
	}()
	start := func() *exec.Cmd {
		argv := []string{"serve", "--listen", f.listen, "--instance", f.instance, "--state-dir", f.stateDir,
			"--stop-grace", "2s", "--log-format", "json", "--log-level", "info", "--metrics-listen", "off",
			"--s3-endpoint", s3srv.Endpoint, "--s3-path-style", "-f", file}
		b, _ := json.Marshal(argv)
		cmd := exec.Command(os.Args[0], "-test.run=^$")
		cmd.Env = append(os.Environ(), "MCE_SERVE_ARGS="+string(b), "AWS_ACCESS_KEY_ID="+s3srv.AccessKey,
			"AWS_SECRET_ACCESS_KEY="+s3srv.SecretKey, "AWS_REGION="+s3srv.Region, "AWS_EC2_METADATA_DISABLED=true")
		out, err := os.OpenFile(logf, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
		if err != nil {
			t.Fatal(err)
		}
		cmd.Stdout, cmd.Stderr = out, out
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		return cmd
	}
	child := start()
	defer func() {
		if child != nil {
			child.Process.Kill()
			child.Wait()
		}
	}()
	waitInService(t, base, 1)

	rt := sagemakerruntime.New(sagemakerruntime.Options{Region: "us-east-1", BaseEndpoint: aws.String(base), Credentials: aws.AnonymousCredentials{}})
	// 50 requests of 400 ms, four at a time: about 5 s of work, arriving
	// from five callers over about a second. The kill comes while they are
	// still arriving and the backlog is being worked through.
	var accepted sync.Map // inference id → output location
	var nAccepted, refused atomic.Int64
	var refusedIDs sync.Map
	var wg sync.WaitGroup
	next := atomic.Int64{}
	for range 5 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := next.Add(1) - 1
				if i >= n {
					return
				}
				ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
				out, err := rt.InvokeEndpointAsync(ctx, &sagemakerruntime.InvokeEndpointAsyncInput{EndpointName: aws.String("ep"),
					InputLocation: aws.String(fmt.Sprintf("s3://async/in/%d", i)), InferenceId: aws.String(fmt.Sprintf("req-%d", i)),
					CustomAttributes: aws.String("sleep=400ms"), ContentType: aws.String("text/plain")})
				cancel()
				if err != nil {
					// mce was killed: the caller heard no 202 and sends
					// the request again after the restart. (Killed after
					// the write and before the 202, it may have been
					// accepted too: then it is answered twice, both
					// answers at the same key.)
					refused.Add(1)
					refusedIDs.Store(fmt.Sprintf("req-%d", i), true)
					continue
				}
				accepted.Store(aws.ToString(out.InferenceId), aws.ToString(out.OutputLocation))
				nAccepted.Add(1)
				time.Sleep(100 * time.Millisecond) // arrivals spread over about a second
			}
		}()
	}
	// Kill once about a third is accepted and some are answered.
	c3 := s3srv.Client(t)
	count := func(prefix string) map[string]string {
		objs := map[string]string{}
		p := s3.NewListObjectsV2Paginator(c3, &s3.ListObjectsV2Input{Bucket: aws.String("async"), Prefix: aws.String(prefix)})
		for p.HasMorePages() {
			page, err := p.NextPage(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			for _, o := range page.Contents {
				objs[aws.ToString(o.Key)] = aws.ToString(o.ETag)
			}
		}
		return objs
	}
	deadline := time.Now().Add(30 * time.Second)
	for (nAccepted.Load() < 20 || len(count("out/")) < 3) && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	child.Process.Kill()
	child.Wait()
	atKill := count("out/")
	acceptedAtKill, answeredAtKill := nAccepted.Load(), len(atKill)
	wg.Wait() // the rest are refused while mce is down
	child = start()
	waitInService(t, base, 1)
	// The rest of the requests, after the restart.
	for i := range n {
		id := fmt.Sprintf("req-%d", i)
		if _, ok := accepted.Load(id); ok {
			continue
		}
		out, err := rt.InvokeEndpointAsync(context.Background(), &sagemakerruntime.InvokeEndpointAsyncInput{EndpointName: aws.String("ep"),
			InputLocation: aws.String(fmt.Sprintf("s3://async/in/%d", i)), InferenceId: aws.String(id),
			CustomAttributes: aws.String("sleep=400ms"), ContentType: aws.String("text/plain")})
		if err != nil {
			t.Fatalf("after the restart: %v", err)
		}
		accepted.Store(id, aws.ToString(out.OutputLocation))
		nAccepted.Add(1)
	}
	deadline = time.Now().Add(60 * time.Second)
	for len(count("out/")) < n && time.Now().Before(deadline) {
		time.Sleep(100 * time.Millisecond)
	}
	time.Sleep(time.Second) // anything further (a duplicate, a failure) would show now
	child.Process.Signal(os.Interrupt)
	if err := child.Wait(); err != nil {
		t.Errorf("clean stop: %v", err)
	}
	child = nil
	if c, n := testenv.Leftovers(t, cli, f.instance); c+n > 0 {
		t.Errorf("after a clean stop: %d containers, %d networks", c, n)
	}

	outs, failed := count("out/"), count("failed/")
	lost := 0
	accepted.Range(func(k, v any) bool {
		id, url := k.(string), v.(string)
		if url != "s3://async/out/"+id+".out" {
			t.Errorf("%s: OutputLocation %s", id, url)
		}
		if _, ok := outs["out/"+id+".out"]; !ok {
			lost++
			return true
		}
		want := "request " + strings.TrimPrefix(id, "req-")
		if got := string(s3srv.Get(t, "async", "out/"+id+".out")); got != want {
			t.Errorf("%s answered %q, want %q", id, got, want)
		}
		return true
	})
	// Which run wrote each answer, from the log: one "answered" line per
	// request across both runs, or a duplicate write happened.
	writes := map[string]int{}
	alreadyAnswered := 0
	lf, err := os.Open(logf)
	if err != nil {
		t.Fatal(err)
	}
	sc := bufio.NewScanner(lf)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		var l struct {
			Message     string `json:"message"`
			InferenceID string `json:"inference_id"`
		}
		if json.Unmarshal(sc.Bytes(), &l) != nil {
			continue
		}
		switch l.Message {
		case "async request answered", "async request failed":
			writes[l.InferenceID]++
		case "async request was answered before the restart":
			alreadyAnswered++
		}
	}
	lf.Close()
	duplicates, resentTwice := 0, 0
	for id, w := range writes {
		if _, resent := refusedIDs.Load(id); resent && w == 2 {
			resentTwice++ // persisted, then killed before its 202: the caller sent it again
			continue
		}
		if w > 1 {
			duplicates += w - 1
			t.Errorf("%s was written %d times", id, w)
		}
	}
	// A request answered in the instant of the SIGKILL may have its object
	// written and its queue entry removed, but not its log line: it counts
	// as written when its object was already there at the kill.
	unlogged := 0
	for key := range outs {
		id := strings.TrimSuffix(strings.TrimPrefix(key, "out/"), ".out")
		if writes[id] == 0 {
			if _, ok := atKill[key]; !ok {
				t.Errorf("%s has an answer but no run logged writing it", id)
				continue
			}
			writes[id] = 1
			unlogged++
		}
	}
	if unlogged > 0 {
		t.Logf("%d answers written just before the SIGKILL, their log lines lost with it", unlogged)
	}
	total := int(nAccepted.Load())
	t.Logf("accepted %d (%d before the SIGKILL, %d refused while mce was down and sent again), answered %d (%d before the kill), "+
		"failed %d, duplicates %d, lost %d; %d found already answered on recovery; %d accepted in the instant of the kill and sent again",
		total, acceptedAtKill, refused.Load(), len(outs), answeredAtKill, len(failed), duplicates, lost, alreadyAnswered, resentTwice)
	if total != n || len(outs) != n || len(failed) != 0 || lost != 0 || duplicates != 0 || len(writes) != n {
		t.Errorf("accepted %d, answered %d, failed %d, lost %d, duplicates %d, written %d; want %d, %d, 0, 0, 0, %d",
			total, len(outs), len(failed), lost, duplicates, len(writes), n, n, n)
	}
	if acceptedAtKill == int64(answeredAtKill) {
		t.Errorf("no backlog at the kill (%d accepted, %d answered): the test proved nothing", acceptedAtKill, answeredAtKill)
	}
	// The durable queue is empty: every request was marked done.
	st, err := store.Open(filepath.Join(f.stateDir, "instances", f.instance, "state.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	left := 0
	store.List(st, store.AsyncRequests, func(json.RawMessage) error { left++; return nil })
	if left != 0 {
		t.Errorf("%d async requests left in the state", left)
	}
}
