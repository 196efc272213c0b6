package host

import (
	"context"
	"io"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/mce-run/mce/containers"
)

// slowUsage is an engine whose statistics calls answer only when the test
// says so (Docker's stats endpoint takes 1–2 s a call): each call hands the
// test a channel to send its figures on, and ends early only when its
// context does.
type slowUsage struct {
	*fakeBackend
	calls    chan chan []containers.Usage
	expired  atomic.Int32 // calls ended by their context's deadline
	canceled atomic.Int32 // calls ended by their context's cancellation
}

func (u *slowUsage) Usage(ctx context.Context) []containers.Usage {
	reply := make(chan []containers.Usage)
	select {
	case u.calls <- reply:
	case <-ctx.Done():
		u.ended(ctx)
		return nil
	}
	select {
	case figures := <-reply:
		return figures
	case <-ctx.Done():
		u.ended(ctx)
		return nil
	}
}

func (u *slowUsage) ended(ctx context.Context) {
	if ctx.Err() == context.DeadlineExceeded {
		u.expired.Add(1)
	} else {
		u.canceled.Add(1)
	}
}

func (u *slowUsage) DiskPercent() (float64, error)                { return 30, nil }
func (u *slowUsage) GPUUtilization(int) (float64, float64, error) { return 0, 0, io.EOF }

// TestScrapeDoesNotWaitForUsage: a scrape answers while the engine's
// statistics call is in flight, with the figures of the last call that
// ended; Close ends the sampling.
func TestScrapeDoesNotWaitForUsage(t *testing.T) {
	src := &slowUsage{fakeBackend: &fakeBackend{t: t}, calls: make(chan chan []containers.Usage)}
	s := New(Config{Backend: src, Store: openStore(t), Logger: zerolog.Nop(), UsageInterval: time.Millisecond})
	closed := false
	t.Cleanup(func() {
		if !closed {
			s.Close(context.Background())
		}
	})
	scrape := func() string {
		t.Helper()
		done := make(chan string, 1)
		go func() {
			rec := httptest.NewRecorder()
			s.MetricsHandler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
			done <- rec.Body.String()
		}()
		select {
		case body := <-done:
			if n := src.expired.Load(); n > 0 {
				t.Fatalf("the scrape waited for a statistics call until its deadline (%d calls)", n)
			}
			return body
		case <-time.After(time.Minute): // a hang, not a speed limit
			t.Fatal("the scrape did not answer while a statistics call was in flight")
			return ""
		}
	}
	next := func() chan []containers.Usage {
		t.Helper()
		select {
		case r := <-src.calls:
			return r
		case <-time.After(time.Minute):
			t.Fatal("the engine's statistics were not asked for")
			return nil
		}
	}

	// Nothing sampled yet: the scrape answers without usage figures.
	if body := scrape(); strings.Contains(body, "mce_container_cpu_utilization_ratio") {
		t.Errorf("usage figures before any sample:\n%s", body)
	}
	next() <- []containers.Usage{{Endpoint: "e", Variant: "v", Container: "c", CPUPercent: 150, MemoryPercent: 40}}
	second := next() // the first sample is stored before the second is asked for
	body := scrape()
	for _, want := range []string{
		`mce_container_cpu_utilization_ratio{container="c",endpoint="e",variant="v"} 1.5`,
		`mce_container_memory_utilization_ratio{container="c",endpoint="e",variant="v"} 0.4`,
		`mce_disk_utilization_ratio 0.3`,
	} {
		if !strings.Contains(body, want) {
			t.Errorf("the scrape during the second call lacks %s:\n%s", want, body)
		}
	}
	_ = second // left unanswered: Close must end it

	done := make(chan struct{})
	go func() {
		s.Close(context.Background())
		close(done)
	}()
	select {
	case <-done:
		closed = true
	case <-time.After(time.Minute):
		t.Fatal("Close did not end the usage sampling")
	}
	if n := src.canceled.Load(); n != 1 {
		t.Errorf("%d statistics calls ended by Close, want the 1 in flight", n)
	}
	select {
	case <-src.calls:
		t.Error("the engine's statistics were asked for after Close")
	default:
	}
}
