package cloudwatchlogs

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mce-run/mce/containers"
	"github.com/mce-run/mce/host/apierr"
)

// The Service on its Options alone: one endpoint whose only container
// prints what the test gives it. host's tests drive the same Service
// through its routes with the AWS SDK's CloudWatch Logs client and real
// containers.

// chatty is a container's output: a history line, and follows fed by say.
type chatty struct {
	mu      sync.Mutex
	follows []chan containers.LogLine
}

var _ Source = (*chatty)(nil)

func (c *chatty) Follow(buffer int) (<-chan containers.LogLine, <-chan struct{}, func()) {
	ch := make(chan containers.LogLine, buffer)
	c.mu.Lock()
	c.follows = append(c.follows, ch)
	c.mu.Unlock()
	return ch, make(chan struct{}), func() {}
}

func (c *chatty) Logs(ctx context.Context, n int, fn func(containers.LogLine) error) error {
	return fn(containers.LogLine{Stream: "stdout", Text: "earlier"})
}

func (c *chatty) LogsBetween(ctx context.Context, since, until time.Time, fn func(containers.LogLine) error) error {
	return nil
}

// say prints a line to every follow.
func (c *chatty) say(text string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, ch := range c.follows {
		ch <- containers.LogLine{Stream: "stdout", Text: text}
	}
}

type oneGroup struct{ src Source }

func (g oneGroup) Group(name string) Group {
	if !strings.EqualFold(name, "ep") {
		return nil
	}
	return g
}

func (g oneGroup) Name() string { return "ep" }

func (g oneGroup) Containers() Containers {
	return Containers{Running: true, Variants: []string{"AllTraffic"},
		List: []Container{{Variant: "AllTraffic", Copy: 0, Host: "c", Source: g.src}}}
}

func allow(context.Context, string, string) *apierr.Error { return nil }

// TestTailFollowsUntilStreamsEnd: a follow gets the history, then lines as
// they come, and ends once Options.Streams is cancelled (the host's
// EndStreams, so that a graceful shutdown does not wait for it); while
// maxFollowers follows run, one more is refused with 503.
func TestTailFollowsUntilStreamsEnd(t *testing.T) {
	src := &chatty{}
	streams, endStreams := context.WithCancel(context.Background())
	defer endStreams()
	svc := NewService(Options{Groups: oneGroup{src}, Region: "us-east-1", Account: "123456789012", Streams: streams})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		svc.Tail(w, r, "EP", allow)
	}))
	defer srv.Close()

	var bodies []io.ReadCloser
	defer func() {
		for _, b := range bodies {
			b.Close()
		}
	}()
	var readers []*bufio.Reader
	for range maxFollowers {
		resp, err := http.Get(srv.URL + "/?follow=true")
		if err != nil {
			t.Fatal(err)
		}
		bodies = append(bodies, resp.Body)
		if resp.StatusCode != http.StatusOK || resp.Header.Get(HeaderLogContainers) != "1" {
			t.Fatalf("follow: %s, %s %q", resp.Status, HeaderLogContainers, resp.Header.Get(HeaderLogContainers))
		}
		br := bufio.NewReader(resp.Body)
		var ev LogEvent
		if line, err := br.ReadBytes('\n'); err != nil || json.Unmarshal(line, &ev) != nil || ev.Message != "earlier" || !ev.History {
			t.Fatalf("first line %q (%v); want the history line", line, err)
		}
		readers = append(readers, br)
	}
	resp, err := http.Get(srv.URL + "/?follow=true")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusServiceUnavailable {
		t.Errorf("follow %d: %s; want 503 ServiceUnavailable", maxFollowers+1, resp.Status)
	}

	src.say("now")
	for i, br := range readers {
		var ev LogEvent
		if line, err := br.ReadBytes('\n'); err != nil || json.Unmarshal(line, &ev) != nil || ev.Message != "now" || ev.History || ev.Container != "c" {
			t.Fatalf("follow %d: line %q (%v); want the followed line", i, line, err)
		}
	}

	endStreams()
	for i, br := range readers {
		done := make(chan error, 1)
		go func() {
			_, err := io.Copy(io.Discard, br)
			done <- err
		}()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("follow %d ended with %v; want its end", i, err)
			}
		case <-time.After(20 * time.Second):
			t.Fatalf("follow %d still open 20 s after the streams ended", i)
		}
	}
}
