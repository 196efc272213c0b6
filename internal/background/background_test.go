package background

import (
	"bytes"
	"context"
	"strings"
	"sync"
	"testing"

	"github.com/rs/zerolog"
)

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func TestPanicsAreReportedNotFatal(t *testing.T) {
	var log syncBuffer
	g := New(context.Background(), zerolog.New(&log))
	reported := make(chan any, 1)
	g.GoOr(func() { panic("boom") }, func(v any) { reported <- v })
	g.Go(func() { panic("unreported") })
	g.GoOr(func() { panic("first") }, func(any) { panic("second") })
	g.Stop()
	if v := <-reported; v != "boom" {
		t.Fatalf("failed got %v, want boom", v)
	}
	for _, want := range []string{`"panic":"unreported"`, `"panic":"second"`, `"stack":"`} {
		if !strings.Contains(log.String(), want) {
			t.Errorf("log lacks %s: %s", want, log.String())
		}
	}
	if strings.Contains(log.String(), `"panic":"boom"`) {
		t.Errorf("a panic reported to failed was logged by the group too: %s", log.String())
	}
}

func TestStopCancelsAndWaits(t *testing.T) {
	g := New(context.Background(), zerolog.Nop())
	done := false
	g.Go(func() {
		<-g.Context().Done()
		done = true
	})
	g.Stop()
	if !done {
		t.Fatal("Stop returned before its goroutine")
	}
}
