package authz

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"sort"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/rs/zerolog"
)

// benchAuthorizer has 10 principals with perPrincipal statements each: a
// mix of exact, prefix and glob actions and resources and StringLike/
// StringEquals/Null/IpAddress conditions, most of them about InvokeEndpoint
// (so the action index does not help); the request matches only the last
// statement.
func benchAuthorizer(b *testing.B, logger zerolog.Logger, perPrincipal, cache int) (*Authorizer, []Input) {
	dir := b.TempDir()
	var creds strings.Builder
	creds.WriteString("Credentials:\n")
	var inputs []Input
	for p := 0; p < 10; p++ {
		var stmts []string
		for s := 0; s < perPrincipal-1; s++ {
			switch s % 4 {
			case 0:
				stmts = append(stmts, fmt.Sprintf(`{"Sid": "S%d", "Effect": "Allow", "Action": "sagemaker:Describe%d*", "Resource": "arn:aws:sagemaker:us-east-1:123456789012:endpoint/ep-%d"}`, s, s, s))
			case 1:
				stmts = append(stmts, fmt.Sprintf(`{"Sid": "S%d", "Effect": "Allow", "Action": ["sagemaker:InvokeEndpoint", "sagemaker:InvokeEndpointAsync"], "Resource": "arn:aws:sagemaker:*:123456789012:endpoint/team-%d-*", "Condition": {"StringLike": {"sagemaker:TargetModel": ["m%d/*", "common-%d/*"]}}}`, s, s, s, s))
			case 2:
				stmts = append(stmts, fmt.Sprintf(`{"Sid": "S%d", "Effect": "Deny", "Action": "sagemaker:Invoke*", "Resource": "arn:aws:sagemaker:us-east-1:123456789012:endpoint/ep-?%d", "Condition": {"StringEquals": {"sagemaker:TargetVariant": "v%d"}, "Null": {"sagemaker:TargetModel": "false"}}}`, s, s, s))
			case 3:
				stmts = append(stmts, fmt.Sprintf(`{"Sid": "S%d", "Effect": "Allow", "Action": "sagemaker:InvokeEndpoint", "Resource": "*", "Condition": {"IpAddress": {"aws:SourceIp": "10.%d.0.0/16"}, "StringLike": {"sagemaker:TargetContainerHostname": "c%d-*"}}}`, s, s, s))
			}
		}
		stmts = append(stmts, `{"Sid": "Match", "Effect": "Allow", "Action": "sagemaker:InvokeEndpoint", "Resource": "arn:aws:sagemaker:us-east-1:123456789012:endpoint/*", "Condition": {"StringLike": {"sagemaker:TargetContainerHostname": ["customIps*", "common*"]}}}`)
		doc := `{"Version": "2012-10-17", "Statement": [` + strings.Join(stmts, ",\n") + `]}`
		name := fmt.Sprintf("p%d.json", p)
		if err := os.WriteFile(filepath.Join(dir, name), []byte(doc), 0o600); err != nil {
			b.Fatal(err)
		}
		arn := fmt.Sprintf("arn:aws:iam::123456789012:user/u%d", p)
		fmt.Fprintf(&creds, "  - {AccessKeyId: AKIA%d, SecretAccessKey: s%d, Arn: %q, Policies: [%s]}\n", p, p, arn, name)
		inputs = append(inputs, Input{
			Principal: PrincipalFromARN(arn),
			Action:    ActionInvokeEndpoint,
			Resource:  EndpointARN("us-east-1", "123456789012", "my-mce"),
			Context:   map[string]string{KeyTargetContainerHostname: "common-2", KeyTargetModel: "m1/model.tar.gz"},
			SourceIP:  "127.0.0.1",
		})
	}
	cf := filepath.Join(dir, "creds.yaml")
	if err := os.WriteFile(cf, []byte(creds.String()), 0o600); err != nil {
		b.Fatal(err)
	}
	a, err := Load(context.Background(), Config{CredentialsFile: cf, Logger: logger, DecisionCache: cache})
	if err != nil {
		b.Fatal(err)
	}
	return a, inputs
}

// BenchmarkAuthorize measures one decision and reports the p50 and p99 of
// the individual calls (target: p50 ≤ 50 µs) and the CPU time of the
// calling thread per call. "10x5" is 10 principals with 50 statements in
// all; "10x50" gives each principal 50 statements. "eval" disables the
// decision cache, so every call evaluates the Rego; "cached" is the steady
// state of repeated requests (the 10 inputs are cycled).
func BenchmarkAuthorize(b *testing.B) {
	for _, bc := range []struct {
		name  string
		per   int
		cache int
		log   bool
	}{
		{"10x5/eval", 5, -1, false},
		{"10x5/eval-jsonlog", 5, -1, true},
		{"10x5/cached", 5, 0, false},
		{"10x5/cached-jsonlog", 5, 0, true},
		{"10x50/eval", 50, -1, false},
		{"10x50/cached", 50, 0, false},
	} {
		b.Run(bc.name, func(b *testing.B) {
			logger := zerolog.Nop()
			if bc.log {
				logger = zerolog.New(io.Discard).With().Timestamp().Logger()
			}
			a, inputs := benchAuthorizer(b, logger, bc.per, bc.cache)
			ctx := context.Background()
			for i, in := range inputs { // warm the glob cache; check the answer
				d, err := a.Authorize(ctx, in)
				if err != nil || !d.Allowed || d.By != fmt.Sprintf("p%d.json:Match", i) {
					b.Fatalf("got %+v, %v", d, err)
				}
			}
			lat := make([]time.Duration, 0, b.N)
			runtime.LockOSThread()
			defer runtime.UnlockOSThread()
			cpu0 := threadCPU()
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				start := time.Now()
				if _, err := a.Authorize(ctx, inputs[i%len(inputs)]); err != nil {
					b.Fatal(err)
				}
				lat = append(lat, time.Since(start))
			}
			b.StopTimer()
			// CPU time of this thread per call: what a call costs without
			// the other processes sharing the machine (GC work on other
			// threads is not counted).
			b.ReportMetric(float64((threadCPU()-cpu0).Nanoseconds())/float64(b.N), "cpu-ns/op")
			sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
			b.ReportMetric(float64(lat[len(lat)/2].Nanoseconds()), "p50-ns")
			b.ReportMetric(float64(lat[len(lat)*99/100].Nanoseconds()), "p99-ns")
		})
	}
}

// BenchmarkAuthenticate measures SigV4 verification of an InvokeEndpoint
// request signed by aws-sdk-go-v2, for two body sizes.
func BenchmarkAuthenticate(b *testing.B) {
	a := loadTestdata(b)
	for _, size := range []int{1 << 10, 1 << 20} {
		b.Run(fmt.Sprintf("body=%dB", size), func(b *testing.B) {
			body := bytes.Repeat([]byte("x"), size)
			creq, err := http.NewRequest(http.MethodPost, "http://localhost:8080/endpoints/my-mce/invocations", bytes.NewReader(body))
			if err != nil {
				b.Fatal(err)
			}
			creq.Header.Set("Content-Type", "application/json")
			creq.Header.Set("X-Amzn-SageMaker-Target-Container-Hostname", "customIps1")
			signWithSDK(b, creq, body)
			// What the server sees.
			r := &http.Request{Method: creq.Method, URL: creq.URL, RequestURI: creq.URL.RequestURI(), Host: creq.Host,
				Header: creq.Header.Clone(), ContentLength: creq.ContentLength}
			r.Header.Set("Content-Length", fmt.Sprint(len(body)))
			if _, err := a.Authenticate(r, body); err != nil {
				b.Fatal(err)
			}
			b.ReportAllocs()
			b.SetBytes(int64(size))
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				if _, err := a.Authenticate(r, body); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
	// What the host adds before reading a signed body.
	b.Run("headers only", func(b *testing.B) {
		creq, _ := http.NewRequest(http.MethodPost, "http://localhost:8080/endpoints/my-mce/invocations", bytes.NewReader([]byte("x")))
		signWithSDK(b, creq, []byte("x"))
		r := &http.Request{Method: creq.Method, URL: creq.URL, RequestURI: creq.URL.RequestURI(), Host: creq.Host, Header: creq.Header.Clone()}
		b.ReportAllocs()
		for b.Loop() {
			if _, _, err := a.AuthenticateHeaders(r); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// threadCPU is the CPU time used by the calling OS thread.
func threadCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(rusageThread, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

const rusageThread = 1 // RUSAGE_THREAD (Linux)
