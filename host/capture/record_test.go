package capture

import (
	"encoding/base64"
	"strings"
	"testing"
	"time"

	"github.com/mce-run/mce/host/spec"
)

// TestRecordGolden writes the call of SageMaker's own example and compares
// the line byte for byte with the record SageMaker shows for it: "View
// Captured Data" in
// https://docs.aws.amazon.com/sagemaker/latest/dg/model-monitor-data-capture-endpoint.html
// (a real-time endpoint invoked with text/csv, its answer text/csv;
// charset=utf-8, captured with the SageMaker Python SDK's default content
// types). The page wraps the line for display; joined, it is this.
func TestRecordGolden(t *testing.T) {
	const input = "69,0,153.7,109,194.0,105,256.1,114,14.1,6,1,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,1,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,1,0,1,0,1,0\n"
	const golden = `{"captureData":{"endpointInput":{"observedContentType":"text/csv","mode":"INPUT",` +
		`"data":"69,0,153.7,109,194.0,105,256.1,114,14.1,6,1,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,1,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,1,0,1,0,1,0\n",` +
		`"encoding":"CSV"},"endpointOutput":{"observedContentType":"text/csv; charset=utf-8","mode":"OUTPUT","data":"0.0254181120544672","encoding":"CSV"}},` +
		`"eventMetadata":{"eventId":"aaaaaaaa-bbbb-cccc-dddd-eeeeeeeeeeee","inferenceTime":"2022-02-14T17:25:49Z"},"eventVersion":"0"}` + "\n"

	store := newMemStore()
	w := newWriter(t, store, func(o *Options) { o.NewID = func() string { return "aaaaaaaa-bbbb-cccc-dddd-eeeeeeeeeeee" } })
	c := mustCapturer(t, w, "DEMO-xgb-churn", config(100, "s3://bucket/datacapture"))
	at := time.Date(2022, 2, 14, 17, 25, 49, 123e6, time.UTC)
	c.Sample().Record(Call{Variant: "AllTraffic", Time: at,
		Input: []byte(input), InputContentType: "text/csv",
		Output: []byte("0.0254181120544672"), OutputContentType: "text/csv; charset=utf-8"})
	flush(t, w)

	want := "s3://bucket/datacapture/DEMO-xgb-churn/AllTraffic/2022/02/14/17/25-49-123-aaaaaaaa-bbbb-cccc-dddd-eeeeeeeeeeee.jsonl"
	urls := store.urls()
	if len(urls) != 1 || urls[0] != want {
		t.Fatalf("objects %q, want [%q]", urls, want)
	}
	if got := string(store.objects[want]); got != golden {
		t.Errorf("record\n got: %s\nwant: %s", got, golden)
	}
	if ct := store.types[want]; ct != "application/jsonlines" {
		t.Errorf("Content-Type %q", ct)
	}
}

// TestRecordEncodings: each payload is written as the content-type lists
// say, and reads back to the bytes sent.
func TestRecordEncodings(t *testing.T) {
	binary := []byte{0x89, 'P', 'N', 'G', 0, 0xff, '<', '>', '&'}
	tests := []struct {
		name    string
		header  *spec.CaptureContentTypeHeader
		ct      string
		data    []byte
		wantEnc string
	}{
		{"csv", sdkHeader(), "text/csv", []byte("1,2\n3,4"), EncodingCSV},
		{"csv with a charset, in capitals", sdkHeader(), "Text/CSV ; charset=utf-8", []byte("1,2"), EncodingCSV},
		{"json", sdkHeader(), "application/json", []byte(`{"instances":[1,"<b>"]}`), EncodingJSON},
		{"json with parameters", sdkHeader(), "application/json; charset=utf-8; x=y", []byte(`[1]`), EncodingJSON},
		{"a type in neither list", sdkHeader(), "application/x-npy", binary, EncodingBase64},
		{"jsonlines is not json", sdkHeader(), "application/jsonlines", []byte(`{"a":1}`), EncodingBase64},
		{"no content type", sdkHeader(), "", []byte("1,2"), EncodingBase64},
		{"csv that is not UTF-8", sdkHeader(), "text/csv", []byte{'1', ',', 0xff}, EncodingBase64},
		{"empty csv", sdkHeader(), "text/csv", nil, EncodingCSV},
		// Without CaptureContentTypeHeader SageMaker writes base64, text/csv included.
		{"no header: csv in base64", nil, "text/csv", []byte("1,2"), EncodingBase64},
		{"no header: json in base64", nil, "application/json", []byte(`{}`), EncodingBase64},
		{"custom lists", &spec.CaptureContentTypeHeader{CSVContentTypes: []string{"application/x-csv"}, JSONContentTypes: []string{"application/jsonlines"}},
			"application/jsonlines", []byte("{\"a\":1}\n{\"a\":2}\n"), EncodingJSON},
		{"custom lists: text/csv not in them", &spec.CaptureContentTypeHeader{CSVContentTypes: []string{"application/x-csv"}}, "text/csv", []byte("1"), EncodingBase64},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			store := newMemStore()
			w := newWriter(t, store, nil)
			cfg := config(100, "s3://b/c")
			cfg.CaptureContentTypeHeader = tt.header
			c := mustCapturer(t, w, "ep", cfg)
			c.Sample().Record(Call{Variant: "v", Input: tt.data, InputContentType: tt.ct, Output: tt.data, OutputContentType: tt.ct})
			flush(t, w)
			recs := store.records(t)
			if len(recs) != 1 {
				t.Fatalf("%d records", len(recs))
			}
			for _, p := range []*Payload{recs[0].CaptureData.EndpointInput, recs[0].CaptureData.EndpointOutput} {
				if p == nil {
					t.Fatal("a payload is missing")
				}
				if p.Encoding != tt.wantEnc || p.ObservedContentType != tt.ct {
					t.Errorf("%s: encoding %s, observedContentType %q; want %s, %q", p.Mode, p.Encoding, p.ObservedContentType, tt.wantEnc, tt.ct)
				}
				if tt.wantEnc != EncodingBase64 && p.Data != string(tt.data) {
					t.Errorf("%s: data %q, want the text itself", p.Mode, p.Data)
				}
				if tt.wantEnc == EncodingBase64 && p.Data != base64.StdEncoding.EncodeToString(tt.data) {
					t.Errorf("%s: data %q, want base64", p.Mode, p.Data)
				}
				got, err := p.Bytes()
				if err != nil || string(got) != string(tt.data) {
					t.Errorf("%s: Bytes() = %q, %v; want %q", p.Mode, got, err, tt.data)
				}
			}
			if recs[0].CaptureData.EndpointInput.Mode != ModeInput || recs[0].CaptureData.EndpointOutput.Mode != ModeOutput {
				t.Errorf("modes %s, %s", recs[0].CaptureData.EndpointInput.Mode, recs[0].CaptureData.EndpointOutput.Mode)
			}
		})
	}
}

func sdkHeader() *spec.CaptureContentTypeHeader {
	return &spec.CaptureContentTypeHeader{CSVContentTypes: []string{"text/csv"}, JSONContentTypes: []string{"application/json"}}
}

// TestRecordMetadata: eventMetadata carries a UUID per record, the caller's
// inference ID when there is one, and the call's time in UTC to the second;
// a capture mode keeps only its side of the call.
func TestRecordMetadata(t *testing.T) {
	store := newMemStore()
	w := newWriter(t, store, nil)
	in := config(100, "s3://b/in-only")
	in.CaptureOptions = []spec.CaptureOption{{CaptureMode: spec.CaptureInput}}
	out := config(100, "s3://b/out-only")
	out.CaptureOptions = []spec.CaptureOption{{CaptureMode: spec.CaptureOutput}}
	both := config(100, "s3://b/both")
	both.CaptureOptions = []spec.CaptureOption{{CaptureMode: spec.CaptureInputAndOutput}}
	at := time.Date(2024, 7, 1, 23, 59, 58, 999e6, time.FixedZone("CEST", 2*3600))
	call := Call{Variant: "v", InferenceID: "order-17", Time: at, Input: []byte("1"), InputContentType: "text/csv", Output: []byte("2"), OutputContentType: "text/csv"}
	for _, cfg := range []spec.DataCaptureConfig{in, out, both} {
		c := mustCapturer(t, w, "ep", cfg)
		tk := c.Sample()
		if !tk.Active() || tk.Input() != (cfg.DestinationS3URI != "s3://b/out-only") || tk.Output() != (cfg.DestinationS3URI != "s3://b/in-only") {
			t.Fatalf("%s: ticket active %v input %v output %v", cfg.DestinationS3URI, tk.Active(), tk.Input(), tk.Output())
		}
		tk.Record(call)
	}
	call.InferenceID = ""
	mustCapturer(t, w, "ep", both).Sample().Record(call)
	flush(t, w)
	recs := map[string][]Record{}
	ids := map[string]bool{}
	for _, u := range store.urls() {
		if !strings.Contains(u, "/ep/v/2024/07/01/21/59-58-999-") {
			t.Errorf("object %s: want the UTC hour 21 and 59-58-999", u)
		}
		dest := u[:strings.Index(u, "/ep/")]
		recs[dest] = append(recs[dest], decodeLines(t, store.objects[u])...)
	}
	for dest, rs := range recs {
		for _, r := range rs {
			if r.EventVersion != "0" || r.EventMetadata.InferenceTime != "2024-07-01T21:59:58Z" {
				t.Errorf("%s: eventVersion %q, inferenceTime %q", dest, r.EventVersion, r.EventMetadata.InferenceTime)
			}
			if len(r.EventMetadata.EventID) != 36 || ids[r.EventMetadata.EventID] {
				t.Errorf("%s: eventId %q is not a fresh UUID", dest, r.EventMetadata.EventID)
			}
			ids[r.EventMetadata.EventID] = true
		}
	}
	if r := recs["s3://b/in-only"]; len(r) != 1 || r[0].CaptureData.EndpointInput == nil || r[0].CaptureData.EndpointOutput != nil || r[0].EventMetadata.InferenceID != "order-17" {
		t.Errorf("Input only: %+v", r)
	}
	if r := recs["s3://b/out-only"]; len(r) != 1 || r[0].CaptureData.EndpointInput != nil || r[0].CaptureData.EndpointOutput == nil {
		t.Errorf("Output only: %+v", r)
	}
	if r := recs["s3://b/both"]; len(r) != 2 || r[0].CaptureData.EndpointInput == nil || r[0].CaptureData.EndpointOutput == nil {
		t.Errorf("InputAndOutput: %+v", r)
	} else if r[0].EventMetadata.InferenceID+r[1].EventMetadata.InferenceID != "order-17" {
		t.Errorf("inferenceId: want it on the call that had one only, got %q and %q", r[0].EventMetadata.InferenceID, r[1].EventMetadata.InferenceID)
	}
}

func TestObjectURL(t *testing.T) {
	at := time.Date(2020, 3, 11, 12, 32, 18, 648_900_000, time.UTC)
	got := objectURL("s3://bucket/prefix", "DEMO-xgb-churn-pred", "AllTraffic", at, "cee08c3a-02ce-4790-b8ba-3173cfc12813")
	want := "s3://bucket/prefix/DEMO-xgb-churn-pred/AllTraffic/2020/03/11/12/32-18-648-cee08c3a-02ce-4790-b8ba-3173cfc12813.jsonl"
	if got != want {
		t.Errorf("objectURL\n got: %s\nwant: %s", got, want)
	}
	if got := objectURL("s3://b", "e", "v", time.Date(2021, 1, 2, 3, 4, 5, 6e6, time.UTC), "id"); got != "s3://b/e/v/2021/01/02/03/04-05-006-id.jsonl" {
		t.Errorf("objectURL = %s", got)
	}
}
