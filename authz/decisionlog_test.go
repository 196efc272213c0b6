package authz

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"
)

// logLines is a concurrency-safe log sink that splits what it got into
// lines.
type logLines struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (l *logLines) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.Write(p)
}

func (l *logLines) lines(msg string) []string { // the lines holding msg
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []string
	for _, line := range strings.Split(l.buf.String(), "\n") {
		if strings.Contains(line, msg) {
			out = append(out, line)
		}
	}
	return out
}

// loggedAuthz loads an authorizer whose admin key may do everything and
// whose unsigned callers may do nothing, logging to the returned sink.
func loggedAuthz(t *testing.T, window time.Duration) (*Authorizer, *logLines) {
	t.Helper()
	cf := filepath.Join(t.TempDir(), "creds.yaml")
	if err := os.WriteFile(cf, []byte(`
Credentials:
  - {AccessKeyId: AKIAADMIN0000EXAMPLE, SecretAccessKey: admin-secret, Arn: "arn:aws:iam::123456789012:user/admin",
     Policies: [{Statement: {Effect: Allow, Action: "*", Resource: "*"}}]}
`), 0o600); err != nil {
		t.Fatal(err)
	}
	sink := &logLines{}
	a, err := Load(context.Background(), Config{CredentialsFile: cf, Region: testRegion, Logger: zerolog.New(sink),
		DenialLogWindow: window})
	if err != nil {
		t.Fatal(err)
	}
	return a, sink
}

// addTagsInput is an unsigned AddTags of n tags, as the host builds it.
func addTagsInput(n int, value string, ip string) Input {
	in := Input{Principal: Principal{Anonymous: true}, Action: "sagemaker:AddTags",
		Resource: "arn:aws:sagemaker:us-east-1:123456789012:endpoint/victim", SourceIP: ip,
		Context: make(map[string]string, n), MultiContext: map[string][]string{}}
	for i := range n {
		k := fmt.Sprintf("tag-%05d", i)
		in.Context["aws:RequestTag/"+k] = value
		in.MultiContext[KeyTagKeys] = append(in.MultiContext[KeyTagKeys], k)
	}
	return in
}

// TestDecisionLogLineBounded: a denied unsigned AddTags of 20,000 tags (an
// 859 KiB body) was logged with its whole context, ~937 KiB a line (issue
// 26). The line is now under 16 KiB, also with huge values and names, says
// how many keys it left out, and keeps no control character; an ordinary
// allowed decision is logged whole.
func TestDecisionLogLineBounded(t *testing.T) {
	a, sink := loggedAuthz(t, 0)
	ctx := context.Background()
	for name, in := range map[string]Input{
		"20,000 tags":      addTagsInput(20_000, strings.Repeat("v", 24), "192.0.2.1"),
		"huge values":      addTagsInput(40, strings.Repeat("\x1b[31m", 100_000), "192.0.2.2"),
		"huge action, ARN": {Principal: Principal{Anonymous: true}, Action: strings.Repeat("a", 1<<20), Resource: strings.Repeat("r", 1<<20), SourceIP: "192.0.2.3"},
	} {
		before := len(sink.lines(`"message":"authz decision"`))
		if d, _ := a.Authorize(ctx, in); d.Allowed {
			t.Fatalf("%s: allowed", name)
		}
		lines := sink.lines(`"message":"authz decision"`)
		if len(lines) != before+1 {
			t.Fatalf("%s: %d decision lines, want 1", name, len(lines)-before)
		}
		line := lines[len(lines)-1]
		if len(line) > 16<<10 {
			t.Errorf("%s: the decision line is %d bytes, want at most 16 KiB", name, len(line))
		}
		if strings.Contains(line, `\u001b`) {
			t.Errorf("%s: a control character reached the line", name)
		}
		var m map[string]any
		if err := json.Unmarshal([]byte(line), &m); err != nil {
			t.Fatalf("%s: %v: %.300s", name, err, line)
		}
		if name == "20,000 tags" && m["context_omitted"] != float64(20_000+1-logMaxContextKeys) {
			t.Errorf("%s: context_omitted = %v, want %d", name, m["context_omitted"], 20_000+1-logMaxContextKeys)
		}
		if name == "huge values" && !strings.Contains(line, "bytes]") {
			t.Errorf("%s: a cut value does not say so: %.500s", name, line)
		}
	}
	in := Input{Principal: Principal{ARN: "arn:aws:iam::123456789012:user/admin"}, Action: "sagemaker:InvokeEndpoint",
		Resource: "arn:aws:sagemaker:us-east-1:123456789012:endpoint/ep", SourceIP: "127.0.0.1",
		Context: map[string]string{"sagemaker:TargetModel": "model-a.tar.gz", "aws:RequestTag/team": "red"}}
	if d, err := a.Authorize(ctx, in); err != nil || !d.Allowed {
		t.Fatalf("admin: %+v %v", d, err)
	}
	lines := sink.lines(`"message":"authz decision"`)
	if l := lines[len(lines)-1]; !strings.Contains(l, `"context":{"aws:RequestTag/team":"red","sagemaker:TargetModel":"model-a.tar.gz"}`) {
		t.Errorf("an ordinary decision is not logged whole: %s", l)
	}
}

// TestDenialLogLimited: one client's burst of 1,000 denials wrote 1,000
// lines (issue 26: 18 MiB in 9 s). Now the first DenialLogBurst (5) of a
// window are logged, another client's are logged as well, and once the
// window ends one line says how many more there were; failed
// authentications are limited the same way.
func TestDenialLogLimited(t *testing.T) {
	ctx := context.Background()
	a, sink := loggedAuthz(t, 0) // one minute: no window ends during the test
	for range 1000 {
		a.Authorize(ctx, addTagsInput(3, "x", "192.0.2.10"))
	}
	if n := len(sink.lines(`"message":"authz decision"`)); n != defaultDenialLogBurst {
		t.Fatalf("1,000 denials of one client wrote %d decision lines, want %d", n, defaultDenialLogBurst)
	}
	a.Authorize(ctx, addTagsInput(3, "x", "192.0.2.11"))
	if n := len(sink.lines(`"message":"authz decision"`)); n != defaultDenialLogBurst+1 {
		t.Fatalf("another client's first denial: %d decision lines, want %d", n, defaultDenialLogBurst+1)
	}
	// An allowed caller is not limited.
	admin := Input{Principal: Principal{ARN: "arn:aws:iam::123456789012:user/admin"}, Action: "sagemaker:InvokeEndpoint",
		Resource: "arn:aws:sagemaker:us-east-1:123456789012:endpoint/ep", SourceIP: "192.0.2.10"}
	for range 20 {
		a.Authorize(ctx, admin)
	}
	if n := len(sink.lines(`"message":"authz decision"`)); n != defaultDenialLogBurst+21 {
		t.Fatalf("20 allowed decisions: %d decision lines, want %d", n, defaultDenialLogBurst+21)
	}
	for range 1000 {
		r, _ := http.NewRequest(http.MethodPost, "http://127.0.0.1/", nil)
		r.RemoteAddr = "192.0.2.12:40000"
		r.Header.Set("X-Amz-Date", time.Now().UTC().Format("20060102T150405Z"))
		r.Header.Set("Authorization", "AWS4-HMAC-SHA256 Credential=AKIANOBODY000EXAMPLE/"+time.Now().UTC().Format("20060102")+
			"/us-east-1/sagemaker/aws4_request, SignedHeaders=host;x-amz-date, Signature="+strings.Repeat("0", 64))
		if _, _, err := a.AuthenticateHeaders(r); err == nil {
			t.Fatal("an unknown access key was authenticated")
		}
	}
	if n := len(sink.lines(`"message":"authentication failed`)); n != defaultDenialLogBurst {
		t.Fatalf("1,000 failed authentications of one client wrote %d lines, want %d", n, defaultDenialLogBurst)
	}

	// With a short window: every denial is in a line or counted in one.
	a, sink = loggedAuthz(t, 300*time.Millisecond)
	for range 1000 {
		a.Authorize(ctx, addTagsInput(3, "x", "192.0.2.20"))
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		logged := len(sink.lines(`"message":"authz decision"`))
		suppressed := 0
		for _, l := range sink.lines(`more authz denials like this`) {
			var m struct {
				Suppressed int    `json:"suppressed"`
				Principal  string `json:"principal"`
				SourceIP   string `json:"source_ip"`
				By         string `json:"by"`
				LastAction string `json:"last_action"`
			}
			json.Unmarshal([]byte(l), &m)
			if m.Principal != "anonymous" || m.SourceIP != "192.0.2.20" || m.By != "implicit-deny" || m.LastAction != "sagemaker:AddTags" {
				t.Fatalf("the summary does not name the client, reason and action: %s", l)
			}
			suppressed += m.Suppressed
		}
		if logged+suppressed == 1000 {
			if logged > 1000/2 {
				t.Errorf("%d of 1,000 denials logged in full", logged)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("after the window: %d denials logged and %d told as suppressed, want 1,000 together", logged, suppressed)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
