package host_test

import (
	"context"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/sagemakerruntime"
)

var completedRe = regexp.MustCompile(`mce_async_requests_completed_total\{endpoint="ep",outcome="answered"\} (\d+)`)

// completed is the answered count from /metrics.
func (a *asyncEnv) completed(t testing.TB) int {
	m := completedRe.FindStringSubmatch(a.scrape(t))
	if m == nil {
		return 0
	}
	n, _ := strconv.Atoi(m[1])
	return n
}

// BenchmarkAsync measures asynchronous inference against a synchronous call
// in the same run, on the probe container (an echo) and versitygw:
//
//	sync            InvokeEndpoint, one call at a time: ns/op is its latency
//	async-latency   InvokeEndpointAsync, one at a time, from the call until
//	                the answer is in S3 (HEAD of OutputLocation every
//	                0.5 ms, as a caller polls): ns/op is the whole round trip
//	async-throughput  b.N requests submitted by 16 callers, one instance at
//	                MaxConcurrentInvocationsPerInstance 16: req/s through the queue
//
// The overhead per request is async-latency minus sync: the durable accept
// (one fsynced write), the input GET, the answer PUT and the fsynced mark.
//
//	go test -run '^$' -bench Async -benchtime 200x ./host/
func BenchmarkAsync(b *testing.B) {
	a := asyncHost(b, 16, 1)
	a.s3.Put(b, asyncBucket, "in/bench", []byte(`{"x":1}`))
	ctx := context.Background()
	in := func(i int) *sagemakerruntime.InvokeEndpointAsyncInput {
		return &sagemakerruntime.InvokeEndpointAsyncInput{EndpointName: aws.String("ep"), InputLocation: aws.String("s3://async/in/bench"),
			ContentType: aws.String("application/json"), InferenceId: aws.String(fmt.Sprintf("b-%d-%d", time.Now().UnixNano(), i))}
	}
	b.Run("sync", func(b *testing.B) {
		for range b.N {
			if _, err := a.rt.InvokeEndpoint(ctx, &sagemakerruntime.InvokeEndpointInput{EndpointName: aws.String("sync"),
				ContentType: aws.String("application/json"), Body: []byte(`{"x":1}`)}); err != nil {
				b.Fatal(err)
			}
		}
	})
	s3c := a.s3.Client(b)
	b.Run("async-latency", func(b *testing.B) {
		for i := range b.N {
			out, err := a.rt.InvokeEndpointAsync(ctx, in(i))
			if err != nil {
				b.Fatal(err)
			}
			key := strings.TrimPrefix(aws.ToString(out.OutputLocation), "s3://"+asyncBucket+"/")
			for {
				if _, err := s3c.HeadObject(ctx, &s3.HeadObjectInput{Bucket: aws.String(asyncBucket), Key: aws.String(key)}); err == nil {
					break
				}
				time.Sleep(500 * time.Microsecond)
			}
		}
	})
	b.Run("async-throughput", func(b *testing.B) {
		before := a.completed(b)
		start := time.Now()
		next := make(chan int)
		done := make(chan error, 16)
		for range 16 {
			go func() {
				for i := range next {
					if _, err := a.rt.InvokeEndpointAsync(ctx, in(i)); err != nil {
						done <- err
						return
					}
				}
				done <- nil
			}()
		}
		for i := range b.N {
			next <- i
		}
		close(next)
		for range 16 {
			if err := <-done; err != nil {
				b.Fatal(err)
			}
		}
		accepted := time.Since(start)
		for a.completed(b) < before+b.N {
			time.Sleep(time.Millisecond)
		}
		took := time.Since(start)
		b.ReportMetric(float64(b.N)/took.Seconds(), "req/s")
		b.ReportMetric(float64(b.N)/accepted.Seconds(), "accepted/s")
	})
}
