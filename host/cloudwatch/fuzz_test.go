package cloudwatch

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/fxamacker/cbor/v2"
)

// Fuzz targets over each protocol's decoder, driven through Serve as host
// will call it: a hostile body gets 200 or a 4xx in the protocol's shape,
// never a panic, and one call allocates a bounded amount.

var (
	fuzzOnce sync.Once
	fuzzSvc  *Service
	fuzzDir  string
)

// fuzzService is one store with a little data, shared by a fuzz run.
func fuzzService(t *testing.T) *Service {
	fuzzOnce.Do(func() {
		dir, err := os.MkdirTemp("", "cloudwatch-fuzz-")
		if err != nil {
			t.Fatal(err)
		}
		fuzzDir = dir
		c := newClock(t0)
		s, err := Open(Options{Dir: dir, Now: c.Now, FlushInterval: time.Hour})
		if err != nil {
			t.Fatal(err)
		}
		h, _ := s.Series("AWS/SageMaker", "ModelLatency", epDims, "Microseconds", Standard)
		for i := range 100 {
			h.Observe(float64(i))
		}
		fuzzSvc = s
	})
	return fuzzSvc
}

const maxAllocPerCall = 64 << 20

func fuzzServe(t *testing.T, p protocol, op string, body []byte) {
	s := fuzzService(t)
	var req *http.Request
	switch p {
	case protoJSON:
		req = httptest.NewRequest(http.MethodPost, "/", bytes.NewReader(body))
		req.Header.Set("X-Amz-Target", TargetPrefix+op)
		req.Header.Set("Content-Type", contentTypeJSON)
	case protoCBOR:
		req = httptest.NewRequest(http.MethodPost, CBORPathPrefix+op, bytes.NewReader(body))
		req.Header.Set("Smithy-Protocol", smithyRPCv2CBOR)
		req.Header.Set("Content-Type", contentTypeCBOR)
	case protoQuery:
		req = httptest.NewRequest(http.MethodPost, "/", bytes.NewReader(body))
		req.Header.Set("Content-Type", contentTypeForm)
	}
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	rec := httptest.NewRecorder()
	s.Serve(rec, req, body)
	runtime.ReadMemStats(&after)
	if n := after.TotalAlloc - before.TotalAlloc; n > maxAllocPerCall {
		t.Fatalf("one call allocated %d bytes", n)
	}
	switch rec.Code {
	case http.StatusOK, http.StatusBadRequest, http.StatusForbidden, http.StatusRequestEntityTooLarge:
	default:
		t.Fatalf("status %d: %s", rec.Code, rec.Body)
	}
	switch p {
	case protoJSON:
		if !json.Valid(rec.Body.Bytes()) {
			t.Fatalf("not JSON: %q", rec.Body)
		}
	case protoCBOR:
		var v any
		if err := cbor.Unmarshal(rec.Body.Bytes(), &v); err != nil {
			t.Fatalf("not CBOR: %v", err)
		}
	case protoQuery:
		if !strings.Contains(rec.Body.String(), "<?xml") {
			t.Fatalf("not XML: %q", rec.Body)
		}
	}
}

var fuzzOps = []string{"GetMetricStatistics", "GetMetricData", "ListMetrics"}

func FuzzJSONDecoder(f *testing.F) {
	for _, s := range []string{
		`{}`, `{"Namespace":"AWS/SageMaker","MetricName":"ModelLatency","StartTime":1795860000,"EndTime":1795863600,"Period":60,"Statistics":["Sum"]}`,
		`{"MetricDataQueries":[{"Id":"a","MetricStat":{"Metric":{"Namespace":"N","MetricName":"M"},"Period":60,"Stat":"p99"}}],"StartTime":0,"EndTime":1e10}`,
		`{"Dimensions":[{"Name":"A"}],"RecentlyActive":"PT3H","NextToken":"AA"}`,
		`{"StartTime":1e400}`, `{"Period":2147483648}`, `[`, `null`, `{"Statistics":[1,2]}`,
	} {
		for i := range fuzzOps {
			f.Add(uint8(i), []byte(s))
		}
	}
	f.Fuzz(func(t *testing.T, op uint8, body []byte) {
		fuzzServe(t, protoJSON, fuzzOps[int(op)%len(fuzzOps)], body)
	})
}

func FuzzCBORDecoder(f *testing.F) {
	seeds := []any{
		map[string]any{},
		map[string]any{"Namespace": "AWS/SageMaker", "MetricName": "ModelLatency", "StartTime": cbor.Tag{Number: 1, Content: 1795860000},
			"EndTime": cbor.Tag{Number: 1, Content: 1795863600.5}, "Period": 60, "ExtendedStatistics": []string{"p50"}},
		map[string]any{"MetricDataQueries": []any{map[string]any{"Id": "a", "MetricStat": map[string]any{"Period": 60, "Stat": "Sum",
			"Metric": map[string]any{"Namespace": "N", "MetricName": "M"}}}}, "StartTime": cbor.Tag{Number: 1, Content: 0}, "EndTime": cbor.Tag{Number: 1, Content: 1e10}},
		map[string]any{"StartTime": cbor.Tag{Number: 0, Content: "2026-01-01T00:00:00Z"}},
		map[string]any{"Dimensions": []any{map[string]any{"Name": "A"}}},
	}
	for _, s := range seeds {
		b, _ := cbor.Marshal(s)
		for i := range fuzzOps {
			f.Add(uint8(i), b)
		}
	}
	for _, raw := range [][]byte{{0xbf, 0xff}, {0x9f}, {0xc1, 0xf9, 0x7c, 0x00}, {0xa1, 0x61, 0x41, 0xc1, 0xfb, 0x7f, 0xf0, 0, 0, 0, 0, 0, 0}, {0x5b, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff}} {
		f.Add(uint8(0), raw)
	}
	f.Fuzz(func(t *testing.T, op uint8, body []byte) {
		fuzzServe(t, protoCBOR, fuzzOps[int(op)%len(fuzzOps)], body)
	})
}

func FuzzQueryDecoder(f *testing.F) {
	for _, s := range []string{
		"Action=GetMetricStatistics&Version=2010-08-01&Namespace=AWS%2FSageMaker&MetricName=ModelLatency&StartTime=2026-11-28T10:00:00Z&EndTime=2026-11-28T11:00:00Z&Period=60&Statistics.member.1=Sum",
		"Action=GetMetricData&Version=2010-08-01&MetricDataQueries.member.1.Id=a&MetricDataQueries.member.1.MetricStat.Metric.Namespace=N&MetricDataQueries.member.1.MetricStat.Metric.MetricName=M&MetricDataQueries.member.1.MetricStat.Period=60&MetricDataQueries.member.1.MetricStat.Stat=p99&StartTime=0&EndTime=9999999999",
		"Action=ListMetrics&Version=2010-08-01&Dimensions.member.1.Name=A&RecentlyActive=PT3H",
		"Action=ListMetrics&Version=2010-08-01&Dimensions.member.9999.Value=x",
		"Action=GetMetricStatistics&Version=2010-08-01&Period=x&StartTime=y",
		"Action=Nope&Version=2010-08-01", "Version=1", "%",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		fuzzServe(t, protoQuery, "", body)
	})
}
