package probe

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mce-run/mce/examples/containers/internal/smserve"
)

// newProbe builds a handler whose Exit records the code.
func newProbe(t *testing.T, environ ...string) (*Handler, *atomic.Int64) {
	t.Helper()
	var code atomic.Int64
	code.Store(-1)
	cfg, err := smserve.ConfigFromEnviron(append([]string{"SM_MODEL_DIR=testdata/model"}, environ...), func(c int) { code.Store(int64(c)) })
	if err != nil {
		t.Fatal(err)
	}
	s, err := SettingsFromConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return NewHandler(s, cfg, "probe-host", time.Now()), &code
}

func post(h http.Handler, body string, headers ...string) *httptest.ResponseRecorder {
	req := httptest.NewRequest(http.MethodPost, "/invocations", strings.NewReader(body))
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	return rec
}

func TestEchoAndSwitches(t *testing.T) {
	const attrs = AttributesHeader
	tests := []struct {
		name      string
		environ   []string
		body      string
		headers   []string
		wantCode  int
		wantCT    string
		wantBody  string
		wantAttrs string
	}{
		{name: "echo keeps content type", body: "hello", headers: []string{"Content-Type", "text/csv; charset=utf-8"},
			wantCode: 200, wantCT: "text/csv; charset=utf-8", wantBody: "hello"},
		{name: "echo default content type", body: "\x00\x01", wantCode: 200, wantCT: "application/octet-stream", wantBody: "\x00\x01"},
		{name: "empty echo", body: "", wantCode: 200, wantCT: "application/octet-stream", wantBody: ""},
		{name: "tag appended", environ: []string{"PROBE_TAG=b"}, body: "xa", wantCode: 200, wantCT: "application/octet-stream", wantBody: "xab"},
		{name: "forced status", body: "x", headers: []string{attrs, "status=503"},
			wantCode: 503, wantCT: "text/plain", wantBody: "probe probe-host: forced status 503"},
		{name: "forced status with ct and attrs", body: "x", headers: []string{attrs, "status=404, ct=application/json, attrs=k=v"},
			wantCode: 404, wantCT: "application/json", wantBody: "probe probe-host: forced status 404", wantAttrs: "k=v"},
		{name: "content type override", body: "{}", headers: []string{"Content-Type", "text/plain", attrs, "ct=application/json"},
			wantCode: 200, wantCT: "application/json", wantBody: "{}"},
		{name: "size", environ: []string{"PROBE_TAG=t"}, body: "ignored", headers: []string{attrs, "size=5"},
			wantCode: 200, wantCT: "application/octet-stream", wantBody: "xxxxx"},
		{name: "size zero", body: "ignored", headers: []string{attrs, "size=0"}, wantCode: 200, wantCT: "application/octet-stream", wantBody: ""},
		{name: "unknown attributes ignored", body: "e", headers: []string{attrs, "trace_id=abc, foo"},
			wantCode: 200, wantCT: "application/octet-stream", wantBody: "e"},
		{name: "short sleep", body: "z", headers: []string{attrs, "sleep=1ms"}, wantCode: 200, wantCT: "application/octet-stream", wantBody: "z"},
		{name: "bad switch", body: "x", headers: []string{attrs, "status=42"}, wantCode: 400, wantCT: "application/json"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h, _ := newProbe(t, tt.environ...)
			rec := post(h, tt.body, tt.headers...)
			if rec.Code != tt.wantCode {
				t.Fatalf("status %d (%q), want %d", rec.Code, rec.Body, tt.wantCode)
			}
			if got := rec.Header().Get("Content-Type"); got != tt.wantCT {
				t.Errorf("Content-Type %q, want %q", got, tt.wantCT)
			}
			if tt.wantCode == 400 {
				if !strings.Contains(rec.Body.String(), "status=") {
					t.Errorf("error body %q does not name the switch", rec.Body)
				}
				return
			}
			if got := rec.Body.String(); got != tt.wantBody {
				t.Errorf("body %q, want %q", got, tt.wantBody)
			}
			if got := rec.Header().Get(attrs); got != tt.wantAttrs {
				t.Errorf("custom attributes %q, want %q", got, tt.wantAttrs)
			}
		})
	}
}

func TestEchoLargeAndChunked(t *testing.T) {
	h, _ := newProbe(t, "PROBE_TAG=!")
	for _, n := range []int{smallBody - 1, smallBody, 3 * smallBody} {
		body := bytes.Repeat([]byte("ab"), n/2+1)[:n]
		req := httptest.NewRequest(http.MethodPost, "/invocations", bytes.NewReader(body))
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		if want := append(body, '!'); !bytes.Equal(rec.Body.Bytes(), want) {
			t.Errorf("%d bytes: echo of %d bytes differs", n, rec.Body.Len())
		}
	}
	// Unknown length: read with the cap.
	req := httptest.NewRequest(http.MethodPost, "/invocations", io.MultiReader(strings.NewReader("chunk")))
	req.ContentLength = -1
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	if rec.Body.String() != "chunk!" {
		t.Errorf("chunked echo %q, want chunk!", rec.Body)
	}
	req = httptest.NewRequest(http.MethodPost, "/invocations", strings.NewReader("x"))
	req.ContentLength = smserve.MaxBodyBytes + 1
	rec = httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	if rec.Code != http.StatusRequestEntityTooLarge {
		t.Errorf("over the cap: %d, want 413", rec.Code)
	}
}

func TestCrash(t *testing.T) {
	h, code := newProbe(t)
	rec := post(h, "x", AttributesHeader, "crash=3,status=500")
	if code.Load() != 3 {
		t.Errorf("exit code %d, want 3", code.Load())
	}
	if rec.Body.Len() != 0 {
		t.Errorf("crash wrote %q", rec.Body)
	}
}

func TestSleepHonoursCancellation(t *testing.T) {
	h, _ := newProbe(t)
	ctx, cancel := context.WithCancel(context.Background())
	req := httptest.NewRequestWithContext(ctx, http.MethodPost, "/invocations", strings.NewReader("x"))
	req.Header.Set(AttributesHeader, "sleep=1m")
	done := make(chan struct{})
	go func() {
		h.ServeHTTP(httptest.NewRecorder(), req)
		close(done)
	}()
	time.Sleep(10 * time.Millisecond)
	cancel()
	select {
	case <-done:
	case <-time.After(2 * time.Second):
		t.Fatal("sleep ignored the cancelled request")
	}
}

func TestInfo(t *testing.T) {
	h, _ := newProbe(t, "SAGEMAKER_BIND_TO_PORT=9000", "SAGEMAKER_SAFE_PORT_RANGE=9001-9999",
		"PROBE_TAG=a", "MCE_ENDPOINT=e1", "HOME=/root")
	rec := post(h, "x", "Content-Type", "text/csv", "Accept", "application/json", AttributesHeader, "info,trace=1")
	if rec.Code != 200 || rec.Header().Get("Content-Type") != "application/json" {
		t.Fatalf("%d %s: %s", rec.Code, rec.Header().Get("Content-Type"), rec.Body)
	}
	var got Info
	if err := json.Unmarshal(rec.Body.Bytes(), &got); err != nil {
		t.Fatal(err)
	}
	tag := "v2"
	want := Info{
		Hostname: "probe-host",
		Instance: got.Instance, // the machine's addresses (TestSessions)
		Env: map[string]string{"SAGEMAKER_BIND_TO_PORT": "9000", "SAGEMAKER_SAFE_PORT_RANGE": "9001-9999",
			"PROBE_TAG": "a", "MCE_ENDPOINT": "e1"},
		ContentType:      "text/csv",
		Accept:           "application/json",
		CustomAttributes: "info,trace=1",
		ModelDir:         "testdata/model",
		ModelFiles:       []ModelFile{{Path: "sub/weights.bin", Size: 5}, {Path: "tag", Size: 3}},
		ModelTag:         &tag,
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("info\n got %+v\nwant %+v", got, want)
	}
}

func TestInfoWithoutModelDir(t *testing.T) {
	h, _ := newProbe(t, "SM_MODEL_DIR=testdata/absent")
	rec := post(h, "", AttributesHeader, "info")
	var got Info
	if err := json.Unmarshal(rec.Body.Bytes(), &got); err != nil {
		t.Fatal(err)
	}
	if got.ModelFiles == nil || len(got.ModelFiles) != 0 || got.ModelTag != nil {
		t.Errorf("files %v tag %v, want an empty list and no tag", got.ModelFiles, got.ModelTag)
	}
}

func TestParseAttributes(t *testing.T) {
	tests := []struct {
		in      string
		want    Attributes
		wantErr bool
	}{
		{in: "", want: Attributes{Crash: -1, Status: -1, Size: -1}},
		{in: "status=500, sleep=1.5s ,size=10,ct=text/csv;charset=utf-8",
			want: Attributes{Crash: -1, Status: 500, Sleep: 1500 * time.Millisecond, Size: 10, ContentType: "text/csv;charset=utf-8"}},
		{in: "attrs=", want: Attributes{Crash: -1, Status: -1, Size: -1, HasRespAttrs: true}},
		{in: "attrs=a=b", want: Attributes{Crash: -1, Status: -1, Size: -1, RespAttrs: "a=b", HasRespAttrs: true}},
		{in: "info,crash=0", want: Attributes{Crash: 0, Status: -1, Size: -1, Info: true}},
		{in: "status=99", wantErr: true},
		{in: "status=600", wantErr: true},
		{in: "sleep=forever", wantErr: true},
		{in: "sleep=11m", wantErr: true},
		{in: "sleep=-1s", wantErr: true},
		{in: "size=-1", wantErr: true},
		{in: "size=67108865", wantErr: true},
		{in: "crash=256", wantErr: true},
		{in: "ct=not a type", wantErr: true},
		{in: "attrs=\x7f", wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			got, err := ParseAttributes(tt.in)
			if tt.wantErr {
				if err == nil {
					t.Fatalf("got %+v, want an error", got)
				}
				return
			}
			if err != nil || got != tt.want {
				t.Errorf("got %+v, %v; want %+v", got, err, tt.want)
			}
		})
	}
}

func FuzzParseAttributes(f *testing.F) {
	for _, s := range []string{"status=500,sleep=1s", "info", "attrs=a=b,ct=text/csv", "size=1,crash=2", ",,=,"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, in string) {
		a, err := ParseAttributes(in)
		if err != nil {
			return
		}
		if a.Status != -1 && (a.Status < 200 || a.Status > 599) || a.Size > MaxSize || a.Sleep > MaxSleep ||
			a.Sleep < 0 || a.Crash > 255 || len(a.RespAttrs) > maxAttrsValue || !printableASCII(a.RespAttrs) {
			t.Fatalf("out-of-range switches %+v from %q", a, in)
		}
	})
}

func TestSettings(t *testing.T) {
	tests := []struct {
		name    string
		environ []string
		want    Settings
		wantErr bool
	}{
		{name: "defaults", want: Settings{ExitCode: 1}},
		{name: "all", environ: []string{"PROBE_TAG=c", "PROBE_PING=fail", "PROBE_READY_AFTER=2s", "PROBE_EXIT_AFTER=1m", "PROBE_EXIT_CODE=7"},
			want: Settings{Tag: "c", PingFail: true, ReadyAfter: 2 * time.Second, ExitAfter: time.Minute, ExitCode: 7}},
		{name: "ping ok", environ: []string{"PROBE_PING=ok"}, want: Settings{ExitCode: 1}},
		{name: "bad ping", environ: []string{"PROBE_PING=maybe"}, wantErr: true},
		{name: "bad duration", environ: []string{"PROBE_READY_AFTER=10"}, wantErr: true},
		{name: "negative duration", environ: []string{"PROBE_EXIT_AFTER=-1s"}, wantErr: true},
		{name: "bad exit code", environ: []string{"PROBE_EXIT_CODE=300"}, wantErr: true},
		{name: "status", environ: []string{"PROBE_STATUS=500"}, want: Settings{ExitCode: 1, Status: 500}},
		{name: "bad status", environ: []string{"PROBE_STATUS=199"}, wantErr: true},
		{name: "status not a number", environ: []string{"PROBE_STATUS=5xx"}, wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg, err := smserve.ConfigFromEnviron(tt.environ, nil)
			if err != nil {
				t.Fatal(err)
			}
			got, err := SettingsFromConfig(cfg)
			if tt.wantErr {
				if !errors.Is(err, smserve.ErrConfig) {
					t.Fatalf("err = %v, want ErrConfig", err)
				}
				return
			}
			if err != nil || got != tt.want {
				t.Errorf("got %+v, %v; want %+v", got, err, tt.want)
			}
		})
	}
}

func TestReadiness(t *testing.T) {
	tests := []struct {
		name    string
		environ []string
		age     time.Duration
		want    bool
	}{
		{"default", nil, 0, true},
		{"ping fail", []string{"PROBE_PING=fail"}, time.Hour, false},
		{"not yet", []string{"PROBE_READY_AFTER=1m"}, 30 * time.Second, false},
		{"ready after", []string{"PROBE_READY_AFTER=1m"}, 2 * time.Minute, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg, err := smserve.ConfigFromEnviron(tt.environ, nil)
			if err != nil {
				t.Fatal(err)
			}
			s, err := SettingsFromConfig(cfg)
			if err != nil {
				t.Fatal(err)
			}
			if got := NewHandler(s, cfg, "h", time.Now().Add(-tt.age)).Ready(); got != tt.want {
				t.Errorf("Ready = %v, want %v", got, tt.want)
			}
		})
	}
}

func TestExitAfter(t *testing.T) {
	codes := make(chan int, 1)
	cfg, err := smserve.ConfigFromEnviron([]string{"PROBE_EXIT_AFTER=20ms", "PROBE_EXIT_CODE=4"}, func(c int) { codes <- c })
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Load(t.Context(), cfg); err != nil {
		t.Fatal(err)
	}
	select {
	case c := <-codes:
		if c != 4 {
			t.Errorf("exit code %d, want 4", c)
		}
	case <-time.After(2 * time.Second):
		t.Fatal("no exit after PROBE_EXIT_AFTER")
	}

	// Shutting down first (the load context ends) cancels the timer.
	cfg, err = smserve.ConfigFromEnviron([]string{"PROBE_EXIT_AFTER=30ms"}, func(c int) { codes <- c })
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	if _, err := Load(ctx, cfg); err != nil {
		t.Fatal(err)
	}
	cancel()
	select {
	case c := <-codes:
		t.Errorf("exited with %d after the context ended", c)
	case <-time.After(100 * time.Millisecond):
	}
}

func TestLoadRejectsBadSettings(t *testing.T) {
	cfg, err := smserve.ConfigFromEnviron([]string{"PROBE_EXIT_CODE=x"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Load(t.Context(), cfg); smserve.ExitCode(err) != 2 {
		t.Errorf("Load = %v, want a configuration error (exit 2)", err)
	}
}

func BenchmarkEcho(b *testing.B) {
	cfg, err := smserve.ConfigFromEnviron(nil, nil)
	if err != nil {
		b.Fatal(err)
	}
	h := NewHandler(Settings{}, cfg, "h", time.Now())
	srv := httptest.NewServer(h)
	defer srv.Close()
	client := srv.Client()
	payload := []byte(`{"instances":[[0.1,0.2,0.3]]}`)
	b.ReportAllocs()
	for b.Loop() {
		resp, err := client.Post(srv.URL, "application/json", bytes.NewReader(payload))
		if err != nil {
			b.Fatal(err)
		}
		if _, err := io.Copy(io.Discard, resp.Body); err != nil {
			b.Fatal(err)
		}
		resp.Body.Close()
	}
}

func BenchmarkEchoHandler(b *testing.B) {
	cfg, err := smserve.ConfigFromEnviron(nil, nil)
	if err != nil {
		b.Fatal(err)
	}
	h := NewHandler(Settings{}, cfg, "h", time.Now())
	payload := []byte(`{"instances":[[0.1,0.2,0.3]]}`)
	rec := httptest.NewRecorder()
	b.ReportAllocs()
	for b.Loop() {
		req := httptest.NewRequest(http.MethodPost, "/invocations", bytes.NewReader(payload))
		req.Header.Set("Content-Type", "application/json")
		rec.Body.Reset()
		h.ServeHTTP(rec, req)
	}
}

// TestStatusSetting: with PROBE_STATUS every invocation answers that status
// as status= does, unless the call asks for a status of its own.
func TestStatusSetting(t *testing.T) {
	cfg, err := smserve.ConfigFromEnviron([]string{"PROBE_STATUS=500"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	s, err := SettingsFromConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	h := NewHandler(s, cfg, "probe-1", time.Now())
	for _, tc := range []struct {
		attrs string
		want  int
	}{{"", 500}, {"status=201", 201}, {"sleep=1ms", 500}} {
		r := httptest.NewRequest(http.MethodPost, "/invocations", strings.NewReader("x"))
		if tc.attrs != "" {
			r.Header.Set(AttributesHeader, tc.attrs)
		}
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		if w.Code != tc.want || !strings.Contains(w.Body.String(), "forced status") {
			t.Errorf("attrs %q: %d %q, want %d", tc.attrs, w.Code, w.Body, tc.want)
		}
	}
}
