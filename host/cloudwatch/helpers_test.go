package cloudwatch

import (
	"bytes"
	"context"
	"encoding/json"
	"math"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"
)

// clock is a settable clock for Options.Now.
type clock struct{ ns atomic.Int64 }

func newClock(t time.Time) *clock {
	c := &clock{}
	c.ns.Store(t.UnixNano())
	return c
}

func (c *clock) Now() time.Time      { return time.Unix(0, c.ns.Load()).UTC() }
func (c *clock) Set(t time.Time)     { c.ns.Store(t.UnixNano()) }
func (c *clock) Add(d time.Duration) { c.ns.Add(int64(d)) }
func (c *clock) Unix() int64         { return c.Now().Unix() }

// t0 is a whole hour, so that tests know where minutes and hours start.
var t0 = time.Date(2026, 11, 28, 10, 0, 0, 0, time.UTC)

func openTest(t testing.TB, dir string, c *clock, mod func(*Options)) *Service {
	t.Helper()
	o := Options{Dir: dir, Now: c.Now, FlushInterval: time.Hour}
	if mod != nil {
		mod(&o)
	}
	s, err := Open(o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func mustSeries(t testing.TB, s *Service, ns, name string, dims []Dimension, unit string, res Resolution) *Series {
	t.Helper()
	h, err := s.Series(ns, name, dims, unit, res)
	if err != nil {
		t.Fatal(err)
	}
	return h
}

var epDims = []Dimension{{"EndpointName", "ep"}, {"VariantName", "v1"}}

// callJSON sends an AWS JSON 1.0 call to s and decodes the answer.
func callJSON(t testing.TB, s *Service, op string, in any) (int, map[string]any, http.Header) {
	t.Helper()
	b, err := json.Marshal(in)
	if err != nil {
		t.Fatal(err)
	}
	req := httptest.NewRequest(http.MethodPost, "/", bytes.NewReader(b))
	req.Header.Set("X-Amz-Target", TargetPrefix+op)
	req.Header.Set("Content-Type", contentTypeJSON)
	rec := httptest.NewRecorder()
	s.ServeHTTP(rec, req)
	var out map[string]any
	if err := json.Unmarshal(rec.Body.Bytes(), &out); err != nil {
		t.Fatalf("%s answered %d with a body that is not JSON: %q", op, rec.Code, rec.Body.String())
	}
	return rec.Code, out, rec.Header()
}

// okJSON is callJSON that fails the test on anything but 200.
func okJSON(t testing.TB, s *Service, op string, in any) map[string]any {
	t.Helper()
	code, out, _ := callJSON(t, s, op, in)
	if code != http.StatusOK {
		t.Fatalf("%s: %d %v", op, code, out)
	}
	return out
}

// gms is a GetMetricStatistics input in JSON.
func gms(from, to time.Time, period int, stats []string, ext []string) map[string]any {
	m := map[string]any{
		"Namespace": "AWS/SageMaker", "MetricName": "ModelLatency",
		"Dimensions": []map[string]string{{"Name": "EndpointName", "Value": "ep"}, {"Name": "VariantName", "Value": "v1"}},
		"StartTime":  float64(from.UnixMilli()) / 1000, "EndTime": float64(to.UnixMilli()) / 1000, "Period": period,
	}
	if stats != nil {
		m["Statistics"] = stats
	}
	if ext != nil {
		m["ExtendedStatistics"] = ext
	}
	return m
}

func datapoints(t testing.TB, out map[string]any) []map[string]any {
	t.Helper()
	raw, ok := out["Datapoints"].([]any)
	if !ok {
		t.Fatalf("no Datapoints list in %v", out)
	}
	var dps []map[string]any
	for _, r := range raw {
		dps = append(dps, r.(map[string]any))
	}
	return dps
}

type ctxT = context.Context

func jsonUnmarshal(b []byte, v any) error { return json.Unmarshal(b, v) }

func nan() float64 { return math.NaN() }
