package applicationautoscaling

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	aas "github.com/aws/aws-sdk-go-v2/service/applicationautoscaling"

	"github.com/mce-run/mce/host/cloudwatch"
	"github.com/mce-run/mce/internal/sdkhttp"
)

// clock is a test's AWS time, stepped by hand.
type clock struct{ ns atomic.Int64 }

func newClock(t time.Time) *clock {
	c := &clock{}
	c.ns.Store(t.UnixNano())
	return c
}

func (c *clock) Now() time.Time      { return time.Unix(0, c.ns.Load()).UTC() }
func (c *clock) Add(d time.Duration) { c.ns.Add(int64(d)) }

var t0 = time.Date(2026, 11, 28, 10, 0, 0, 0, time.UTC)

// fakeTargets are SageMaker's resources: capacities by key, the calls
// that set them, and an error to answer SetCapacity with.
type fakeTargets struct {
	mu    sync.Mutex
	caps  map[string]int
	sets  []int
	fail  error
	reads int
}

func newFake(caps map[string]int) *fakeTargets { return &fakeTargets{caps: caps} }

func (f *fakeTargets) Capacity(_ context.Context, dim, id string) (int, bool, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.reads++
	n, ok := f.caps[key(dim, id)]
	return n, ok, nil
}

func (f *fakeTargets) SetCapacity(_ context.Context, dim, id string, n int) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.fail != nil {
		return f.fail
	}
	f.caps[key(dim, id)] = n
	f.sets = append(f.sets, n)
	return nil
}

func (f *fakeTargets) get(dim, id string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.caps[key(dim, id)]
}

func (f *fakeTargets) setFail(err error) {
	f.mu.Lock()
	f.fail = err
	f.mu.Unlock()
}

var errUpdating = errors.New("Cannot update in-progress endpoint")

const (
	vID = "endpoint/ep/variant/v1"
	cID = "inference-component/ic1"
)

type fixture struct {
	t     *testing.T
	dir   string
	clock *clock
	cw    *cloudwatch.Service
	svc   *Service
	fake  *fakeTargets
	url   string
	c     *aas.Client
	stop  func()
}

// open opens a CloudWatch service and the service on dir (a fresh one when
// ""), hands it fake, serves it, and makes an aws-sdk-go-v2 client. The
// test evaluates by hand (Evaluate), at the times it sets.
func open(t *testing.T, dir string, c *clock, fake *fakeTargets) *fixture {
	t.Helper()
	return openWith(t, dir, c, fake, false)
}

// openRunning is open with Run running, as mce serve runs it.
func openRunning(t *testing.T, dir string, c *clock, fake *fakeTargets) *fixture {
	t.Helper()
	return openWith(t, dir, c, fake, true)
}

func openWith(t *testing.T, dir string, c *clock, fake *fakeTargets, run bool) *fixture {
	t.Helper()
	if dir == "" {
		dir = t.TempDir()
	}
	cw, err := cloudwatch.Open(cloudwatch.Options{Dir: dir + "/cloudwatch", Now: c.Now, AlarmInterval: time.Hour, FlushInterval: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	svc, err := Open(Options{Dir: dir + "/applicationautoscaling", CloudWatch: cw, Now: c.Now, Interval: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	if run {
		go func() { svc.Run(ctx, fake); close(done) }()
		for svc.resources() == nil {
			time.Sleep(time.Millisecond)
		}
	} else {
		svc.mu.Lock()
		svc.res = fake
		svc.mu.Unlock()
		close(done)
	}
	srv := httptest.NewServer(svc)
	f := &fixture{t: t, dir: dir, clock: c, cw: cw, svc: svc, fake: fake, url: srv.URL}
	f.c = aas.New(aas.Options{Region: "us-east-1", BaseEndpoint: aws.String(srv.URL),
		Credentials: credentials.NewStaticCredentialsProvider("AKIDEXAMPLE", "secret", ""),
		HTTPClient:  &sdkhttp.Client{Next: srv.Client()}, Retryer: aws.NopRetryer{}})
	var once sync.Once
	f.stop = func() {
		once.Do(func() {
			srv.Close()
			cancel()
			<-done
			svc.Close()
			cw.Close()
		})
	}
	t.Cleanup(f.stop)
	return f
}

var _ http.Handler = (*Service)(nil)

func errorsAs(err error, target any) bool { return errors.As(err, target) }
