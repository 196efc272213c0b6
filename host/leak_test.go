package host

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/mce-run/mce/containers/artifact"
	"github.com/mce-run/mce/containers/docker"
	"github.com/mce-run/mce/host/apierr"
)

// hostPath matches text that looks like a host path in an error body.
var hostPath = regexp.MustCompile(`(^|[\s"'(=\[])/(tmp|var|home|root|etc|proc|opt|usr|srv|run|mnt|dev|sys)(/|\b)`)

// TestBadInputsAreClientErrors walks bad inputs of every kind through the
// runtime and control-plane APIs: each gets a SageMaker-shaped 4xx, never a
// 5xx, and no answer names a host path (issue 9: a 300-byte TargetModel
// segment gave a 500 naming a folder under the cache).
func TestBadInputsAreClientErrors(t *testing.T) {
	h := newHarness(t, Config{BaseDir: t.TempDir()})
	if err := h.deploy(plan("ab", "Direct", map[string][]string{"AllTraffic": {"english:EN", "german:DE"}})); err != nil {
		t.Fatal(err)
	}
	mme := plan("mme", "Serial", map[string][]string{"AllTraffic": {"m:M"}})
	mme.Variants[0].Containers[0].Mode = "MultiModel"
	if err := h.deploy(mme); err != nil {
		t.Fatal(err)
	}
	long := strings.Repeat("a", 300)
	inv := func(ep string, hdr ...string) req {
		return req{method: "POST", path: "/endpoints/" + ep + "/invocations", body: "x", headers: hdr}
	}
	cw := func(op, body string) req {
		return req{method: "POST", path: "/", body: body, headers: []string{"X-Amz-Target", "Logs_20140328." + op, "Content-Type", "application/x-amz-json-1.1"}}
	}
	ctl := func(op, body string) req {
		return req{method: "POST", path: "/", body: body, headers: []string{"X-Amz-Target", "SageMaker." + op, "Content-Type", "application/x-amz-json-1.1"}}
	}
	cases := map[string]req{
		"300-byte TargetModel segment":  inv("mme", hdrTargetModel, long+".tar.gz"),
		"300-byte segment, deeper":      inv("mme", hdrTargetModel, "a/"+long+"/m.tar.gz"),
		"TargetModel of 1025 bytes":     inv("mme", hdrTargetModel, strings.Repeat("a/", 512)+"b"),
		"TargetModel ..":                inv("mme", hdrTargetModel, "../../etc/passwd"),
		"TargetModel absolute":          inv("mme", hdrTargetModel, "/etc/passwd"),
		"TargetModel empty segment":     inv("mme", hdrTargetModel, "a//b.tar.gz"),
		"TargetModel dot":               inv("mme", hdrTargetModel, "./m.tar.gz"),
		"TargetModel not printable":     inv("mme", hdrTargetModel, "a\u00a0b"),
		"TargetModel on a single model": inv("ab", hdrTargetModel, "m.tar.gz", hdrTargetContainer, "english"),
		"no such endpoint":              inv("nope"),
		"endpoint name too long":        inv(long),
		"endpoint name bad characters":  inv("a_b"),
		"no container hostname":         inv("ab"),
		"unknown container hostname":    inv("ab", hdrTargetContainer, "french"),
		"bad variant":                   inv("ab", hdrTargetVariant, "x_y", hdrTargetContainer, "english"),
		"non-ASCII content type":        inv("ab", hdrContentType, "tëxt", hdrTargetContainer, "english"),
		"session id":                    inv("ab", hdrSessionID, "abc", hdrTargetContainer, "english"),
		"inference component":           inv("ab", hdrInferenceComp, "c", hdrTargetContainer, "english"),
		"explanations":                  inv("ab", hdrEnableExplain, "`true`", hdrTargetContainer, "english"),
		"body over 6 MiB":               {method: "POST", path: "/endpoints/ab/invocations", body: strings.Repeat("x", MaxPayload+1), headers: []string{hdrTargetContainer, "english"}},
		"async invocation":              {method: "POST", path: "/endpoints/ab/async-invocations"},
		"streaming invocation":          {method: "POST", path: "/endpoints/ab/invocations-response-stream"},
		"streaming, multi-model":        {method: "POST", path: "/endpoints/mme/invocations-response-stream", body: "x"},
		"streaming with TargetModel":    {method: "POST", path: "/endpoints/mme/invocations-response-stream", body: "x", headers: []string{hdrTargetModel, "m.tar.gz"}},
		"streaming, bad Accept":         {method: "POST", path: "/endpoints/ab/invocations-response-stream", body: "x", headers: []string{hdrStreamAccept, "tëxt", hdrTargetContainer, "english"}},
		"streaming, body over 6 MiB":    {method: "POST", path: "/endpoints/ab/invocations-response-stream", body: strings.Repeat("x", MaxPayload+1), headers: []string{hdrTargetContainer, "english"}},
		"unknown path":                  {method: "GET", path: "/etc/passwd"},
		"logs of an unknown endpoint":   {method: "GET", path: "/mce/endpoints/nope/logs"},
		"logs, endpoint name traversal": {method: "GET", path: "/mce/endpoints/..%2f..%2fetc/logs"},
		"logs, tail out of range":       {method: "GET", path: "/mce/endpoints/ab/logs?tail=99999"},
		"logs, tail not a number":       {method: "GET", path: "/mce/endpoints/ab/logs?tail=-1"},
		"logs, follow not a boolean":    {method: "GET", path: "/mce/endpoints/ab/logs?follow=maybe"},
		"logs, container traversal":     {method: "GET", path: "/mce/endpoints/ab/logs?container=../../etc"},
		"logs, unknown container":       {method: "GET", path: "/mce/endpoints/ab/logs?container=french"},
		"logs, unknown variant":         {method: "GET", path: "/mce/endpoints/ab/logs?variant=Other"},
		"CloudWatch, unknown operation": cw("DeleteLogGroup", `{"logGroupName": "/aws/sagemaker/Endpoints/ab"}`),
		"CloudWatch, another log group": cw("FilterLogEvents", `{"logGroupName": "/var/log/syslog"}`),
		"CloudWatch, group traversal":   cw("FilterLogEvents", `{"logGroupName": "/aws/sagemaker/Endpoints/../../etc"}`),
		"CloudWatch, unknown endpoint":  cw("FilterLogEvents", `{"logGroupName": "/aws/sagemaker/Endpoints/nope"}`),
		"CloudWatch, malformed JSON":    cw("FilterLogEvents", `{"logGroupName": `),
		"CloudWatch, filterPattern":     cw("FilterLogEvents", `{"logGroupName": "/aws/sagemaker/Endpoints/ab", "filterPattern": "ERROR"}`),
		"CloudWatch, limit 0":           cw("FilterLogEvents", `{"logGroupName": "/aws/sagemaker/Endpoints/ab", "limit": 0}`),
		"CloudWatch, forged token":      cw("FilterLogEvents", `{"logGroupName": "/aws/sagemaker/Endpoints/ab", "nextToken": "f/AAAA"}`),
		"CloudWatch, no stream":         cw("GetLogEvents", `{"logGroupName": "/aws/sagemaker/Endpoints/ab"}`),
		"CloudWatch, unknown stream":    cw("GetLogEvents", `{"logGroupName": "/aws/sagemaker/Endpoints/ab", "logStreamName": "x/0/y"}`),
		"path traversal":                {method: "POST", path: "/endpoints/../../invocations"},
		"wrong method":                  {method: "DELETE", path: "/endpoints/ab/invocations"},
		"unknown operation":             ctl("DropTables", "{}"),
		"no target":                     {method: "POST", path: "/", body: "{}"},
		"malformed JSON":                ctl("DescribeEndpoint", `{"EndpointName": `),
		"JSON of the wrong type":        ctl("DescribeEndpoint", `{"EndpointName": 5}`),
		"array body":                    ctl("CreateModel", `[1,2]`),
		"missing name":                  ctl("DescribeEndpoint", `{}`),
		"name too long":                 ctl("DescribeModel", `{"ModelName": "`+long+`"}`),
		"unknown endpoint":              ctl("DeleteEndpoint", `{"EndpointName": "nope"}`),
		"control body over 1 MiB":       ctl("CreateModel", `{"ModelName": "`+strings.Repeat("m", 1<<20)+`"}`),
		"model with a missing file":     ctl("CreateModel", `{"ModelName": "m1", "PrimaryContainer": {"Image": "x", "ModelDataUrl": "file:///var/lib/nothing/m.tar.gz"}}`),
		"model with a relative file":    ctl("CreateModel", `{"ModelName": "m2", "PrimaryContainer": {"Image": "x", "ModelDataUrl": "file://../../../../etc"}}`),
		"config of a missing model":     ctl("CreateEndpointConfig", `{"EndpointConfigName": "c1", "ProductionVariants": [{"VariantName": "v", "ModelName": "nope", "InitialInstanceCount": 1, "InstanceType": "ml.m5.large"}]}`),
	}
	tmp := os.TempDir()
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			r, err := http.NewRequest(c.method, h.http.URL+c.path, strings.NewReader(c.body))
			if err != nil {
				t.Fatal(err)
			}
			for i := 0; i+1 < len(c.headers); i += 2 {
				r.Header.Set(c.headers[i], c.headers[i+1])
			}
			resp, err := h.http.Client().Do(r)
			if err != nil {
				t.Fatal(err)
			}
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode == 200 && (name == "model with a missing file" || name == "model with a relative file") {
				return // stored; the data is fetched when an endpoint starts
			}
			if resp.StatusCode < 400 || resp.StatusCode >= 500 {
				t.Errorf("status %d, want 4xx: %s", resp.StatusCode, b)
			}
			if resp.Header.Get("X-Amzn-ErrorType") == "" || !strings.Contains(string(b), `"__type"`) {
				t.Errorf("not SageMaker-shaped: %s", b)
			}
			// What the caller sent may come back; nothing else path-like.
			shown := strings.ReplaceAll(string(b), c.path, "")
			for i := 1; i < len(c.headers); i += 2 {
				shown = strings.ReplaceAll(shown, c.headers[i], "")
			}
			if strings.Contains(shown, tmp) || strings.Contains(shown, h.srv.cfg.BaseDir) || hostPath.MatchString(shown) {
				t.Errorf("the answer names a host path: %s", b)
			}
		})
	}
}

type req struct {
	method, path, body string
	headers            []string // name, value, …
}

func TestInternalErrorsAreGeneric(t *testing.T) {
	h := newHarness(t, Config{})
	err := fmt.Errorf("launch: %w", errors.New("open /var/lib/mce/instances/default/cache/abc: file name too long"))
	api := h.srv.toAPIError("ep", "req-1", err)
	if api.Status != 500 || api.Code != apierr.CodeInternalFailure {
		t.Fatalf("%d %s, want 500 InternalFailure", api.Status, api.Code)
	}
	if strings.Contains(api.Message, "/var") || strings.Contains(api.Message, "too long") || !strings.Contains(api.Message, "req-1") {
		t.Errorf("message %q: want the request ID and no details", api.Message)
	}
	api = h.srv.controlError("req-2", err)
	if api.Status != 500 || strings.Contains(api.Message, "/var") || !strings.Contains(api.Message, "req-2") {
		t.Errorf("control plane: %d %q", api.Status, api.Message)
	}
}

func TestRedactPaths(t *testing.T) {
	for in, want := range map[string]string{
		"no path here":                        "no path here",
		"open /var/lib/mce/x: no such file":   "open <path>: no such file",
		`model "a/b.tar.gz" not found`:        `model "a/b.tar.gz" not found`,
		"no artifact at file:///srv/m/a.tgz":  "no artifact at file://<path>",
		"no artifact at s3://bucket/key/a.gz": "no artifact at s3://bucket/key/a.gz",
		"/tmp/x/y is bad":                     "<path> is bad",
		`extract "/tmp/TestX/001/m" (denied)`: `extract "<path>" (denied)`,
		"entry ../../evil escapes":            "entry ../../evil escapes",
		"lstat /a/b:c/d: bad, then /e/f":      "lstat <path>: bad, then <path>",
		"ratio 10/1 exceeded":                 "ratio 10/1 exceeded",
		// An archive entry's name is archive content: shown, not redacted.
		`model data "file:///srv/m.tgz": unsafe archive entry "/../etc/passwd": ".." path components are not allowed`: `model data "file://<path>": unsafe archive entry "/../etc/passwd": ".." path components are not allowed`,
		`unsafe archive entry "/dev/null": character devices are not allowed; open /var/x: denied`:                    `unsafe archive entry "/dev/null": character devices are not allowed; open <path>: denied`,
		`unsafe archive entry "a\"/b": bad, unsafe archive entry "/c": bad /d`:                                        `unsafe archive entry "a\"/b": bad, unsafe archive entry "/c": bad <path>`,
		`unsafe archive entry "/unterminated`:                                                                         `unsafe archive entry "<path>`,
	} {
		if got := apierr.RedactPaths(in); got != want {
			t.Errorf("redactPaths(%q) = %q, want %q", in, got, want)
		}
	}
}

// TestFailureReasonShowsRefusedEntry: an endpoint whose archive holds a
// refused entry fails with a reason naming the entry as written, escaped,
// and no host path.
func TestFailureReasonShowsRefusedEntry(t *testing.T) {
	launch := &docker.LaunchError{Endpoint: "e", Variant: "v", Container: "c",
		Reason: `could not get its model data from "file:///srv/models/m.tar.gz"`,
		Err: fmt.Errorf("model data %q: %w", "file:///srv/models/m.tar.gz",
			&artifact.UnsafeEntryError{Name: "/../\x1b]evil\n", Reason: `".." path components are not allowed`})}
	got := apierr.RedactPaths(launch.Error())
	want := `container "c" (variant "v") of endpoint "e" could not get its model data from "file://<path>": ` +
		`model data "file://<path>": unsafe archive entry "/../\x1b]evil\n": ".." path components are not allowed`
	if got != want {
		t.Errorf("FailureReason =\n  %s\nwant\n  %s", got, want)
	}
}
