package shadow

import (
	"bytes"
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/mce-run/mce/pipeline"
)

type invocation struct {
	endpoint, variant string
	total, model      time.Duration
	err               error
}

func TestObserveShadow(t *testing.T) {
	var invs []invocation
	var records []bool
	var answered []string
	ob := New(Options{
		Invocation: func(e, v string, total, model time.Duration, err error) {
			invs = append(invs, invocation{e, v, total, model, err})
		},
		Record:   func(_, _ string, _ time.Time, ok bool) { records = append(records, ok) },
		Answered: func(c *pipeline.ShadowCall) { answered = append(answered, string(c.Response.Body)) },
	})
	ok := &pipeline.ShadowCall{Endpoint: "ep", Variant: "shadow", Latency: 3 * time.Millisecond,
		Request:  &pipeline.Request{Body: []byte("in")},
		Response: &pipeline.Response{Body: []byte("out"), ModelLatency: 2 * time.Millisecond}}
	failed := &pipeline.ShadowCall{Endpoint: "ep", Variant: "shadow", Latency: time.Millisecond,
		Err: &pipeline.ModelError{Variant: "shadow", OriginalStatusCode: 500}}
	cut := &pipeline.ShadowCall{Endpoint: "ep", Variant: "shadow", Err: fmt.Errorf("pipeline: %w", context.Canceled)}
	for _, c := range []*pipeline.ShadowCall{ok, failed, cut} {
		ob.ObserveShadow(c)
	}
	if len(invs) != 2 || invs[0] != (invocation{"ep", "shadow", 3 * time.Millisecond, 2 * time.Millisecond, nil}) ||
		invs[1].err != failed.Err || invs[1].model != 0 {
		t.Errorf("invocations = %+v, want the answered and the failed copy (not the one cut at shutdown)", invs)
	}
	if len(records) != 2 || !records[0] || records[1] {
		t.Errorf("status page records = %v, want [true false]", records)
	}
	if len(answered) != 1 || answered[0] != "out" {
		t.Errorf("capture hook saw %q, want only the answered copy", answered)
	}
}

func TestDroppedShadowLogsAtMostOncePerInterval(t *testing.T) {
	var buf bytes.Buffer
	now := time.Unix(1000, 0)
	var dropped []string
	ob := New(Options{Log: zerolog.New(&buf), DropLogInterval: time.Minute, Now: func() time.Time { return now },
		Dropped: func(e, v, reason string) { dropped = append(dropped, e+"/"+v+"/"+reason) }})
	for range 5 {
		ob.DroppedShadow("ep", "shadow", pipeline.DropBusy)
	}
	now = now.Add(61 * time.Second)
	ob.DroppedShadow("ep", "shadow", pipeline.DropMemory)
	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	if len(dropped) != 6 || dropped[5] != "ep/shadow/memory" {
		t.Errorf("counted drops %v, want 6, the last for memory", dropped)
	}
	if len(lines) != 2 || !strings.Contains(lines[0], `"dropped":1`) || !strings.Contains(lines[1], `"dropped":5`) ||
		!strings.Contains(lines[1], `"reason":"memory"`) {
		t.Errorf("log lines:\n%s\nwant 2: the first drop, then the 5 since, a minute later", buf.String())
	}
}
