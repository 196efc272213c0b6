package applicationautoscaling

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
)

// TestWire: what a client that is not an SDK may send — a body that is not
// the operation's JSON, an operation the model does not have, a body over
// the limit — is answered in the protocol's error shape.
func TestWire(t *testing.T) {
	f := open(t, "", newClock(t0), newFake(map[string]int{}))
	post := func(op string, body []byte) (int, map[string]string) {
		t.Helper()
		r, _ := http.NewRequest(http.MethodPost, f.url+"/", bytes.NewReader(body))
		r.Header.Set("Content-Type", contentType)
		r.Header.Set("X-Amz-Target", op)
		resp, err := http.DefaultClient.Do(r)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		var m map[string]string
		if err := json.Unmarshal(b, &m); err != nil {
			t.Fatalf("%s answered %q", op, b)
		}
		if resp.Header.Get("X-Amzn-ErrorType") != m["__type"] || resp.Header.Get("Content-Type") != contentType {
			t.Errorf("%s: headers %v", op, resp.Header)
		}
		return resp.StatusCode, m
	}
	for _, c := range []struct {
		op, body string
		status   int
		code     string
		msg      string
	}{
		{"AnyScaleFrontendService.DescribeScalableTargets", `{"ServiceNamespace":5}`, 400, codeSerialization, "the member ServiceNamespace cannot be a JSON number"},
		{"AnyScaleFrontendService.DescribeScalableTargets", `{`, 400, codeSerialization, "it does not parse"},
		{"AnyScaleFrontendService.PutScheduledAction", `{"StartTime":-5}`, 400, codeSerialization, "a timestamp is out of range"},
		{"AnyScaleFrontendService.Nope", `{}`, 400, codeUnknownOperation, `mce does not serve the operation "AnyScaleFrontendService.Nope"`},
		{"AnyScaleFrontendService.DescribeScalableTargets", `{}`, 400, CodeValidation, "Value null at 'serviceNamespace'"},
		{"AnyScaleFrontendService.DescribeScalableTargets", `{"ServiceNamespace":"sagemaker","` + strings.Repeat("x", 2<<20) + `":1}`, 413, codeSerialization, "larger than mce accepts"},
	} {
		st, m := post(c.op, []byte(c.body))
		if st != c.status || m["__type"] != c.code || !strings.Contains(m["message"], c.msg) {
			t.Errorf("%s %.40q: %d %v\nwant %d %s %q", c.op, c.body, st, m, c.status, c.code, c.msg)
		}
	}
}
