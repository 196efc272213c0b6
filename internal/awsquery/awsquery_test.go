package awsquery

import (
	"errors"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

func TestParseReadsMembersListsAndMaps(t *testing.T) {
	body := "Action=GetMetricStatistics&Version=2010-08-01&Namespace=AWS%2FSageMaker" +
		"&Dimensions.member.2.Name=VariantName&Dimensions.member.2.Value=v+2" +
		"&Dimensions.member.1.Name=EndpointName&Dimensions.member.1.Value=ep" +
		"&Statistics.member.1=Sum&Statistics.member.10=Average&Period=60&Flag=TRUE" +
		"&StartTime=2026-11-28T10%3A00%3A00Z&EndTime=2026-11-28T10%3A05%3A00.5%2B01%3A00" +
		"&Q.member.1.M.Dimensions.member.3.Name=x&Tags.entry.1.key=k&Tags.entry.1.value=v"
	f, err := Parse([]byte(body), Limits{})
	if err != nil {
		t.Fatal(err)
	}
	if f.Action() != "GetMetricStatistics" || f.Version() != "2010-08-01" {
		t.Errorf("Action %q Version %q", f.Action(), f.Version())
	}
	if ns, _ := f.String("Namespace"); ns != "AWS/SageMaker" {
		t.Errorf("Namespace %q", ns)
	}
	if got, want := f.Members("Dimensions"), []string{"Dimensions.member.1", "Dimensions.member.2"}; !slices.Equal(got, want) {
		t.Errorf("Members(Dimensions) = %v, want %v", got, want)
	}
	if v, _ := f.String("Dimensions.member.2.Value"); v != "v 2" {
		t.Errorf("a '+' is a space: %q", v)
	}
	if got, want := f.Members("Statistics"), []string{"Statistics.member.1", "Statistics.member.10"}; !slices.Equal(got, want) {
		t.Errorf("Members(Statistics) = %v, want %v (numeric order)", got, want)
	}
	if got := f.Members("Q.member.1.M.Dimensions"); !slices.Equal(got, []string{"Q.member.1.M.Dimensions.member.3"}) {
		t.Errorf("nested list: %v", got)
	}
	if got := f.Members("Q"); !slices.Equal(got, []string{"Q.member.1"}) {
		t.Errorf("outer list: %v", got)
	}
	if got := f.Entries("Tags"); !slices.Equal(got, []string{"Tags.entry.1"}) {
		t.Errorf("Entries: %v", got)
	}
	if !f.Has("Q.member.1.M") || f.Has("Q.member.2") {
		t.Error("Has sees members below a name, and only those")
	}
	if p, ok, err := f.Int("Period"); p != 60 || !ok || err != nil {
		t.Errorf("Int: %d %v %v", p, ok, err)
	}
	if b, ok, err := f.Bool("Flag"); !b || !ok || err != nil {
		t.Errorf("Bool: %v %v %v", b, ok, err)
	}
	st, _, _ := f.Time("StartTime")
	if !st.Equal(time.Date(2026, 11, 28, 10, 0, 0, 0, time.UTC)) {
		t.Errorf("StartTime %v", st)
	}
	et, _, _ := f.Time("EndTime")
	if !et.Equal(time.Date(2026, 11, 28, 9, 5, 0, 5e8, time.UTC)) {
		t.Errorf("EndTime %v (an offset is honoured)", et)
	}
	if _, ok, _ := f.Int("Missing"); ok {
		t.Error("an absent member is not ok")
	}
	if _, _, err := f.Int("Namespace"); err == nil {
		t.Error("a non-number Int is an error")
	}
}

func TestParseRefusesHostileForms(t *testing.T) {
	for name, body := range map[string]string{
		"duplicate":       "A=1&A=2",
		"bad escape":      "A=%zz",
		"bad name escape": "%zz=1",
		"index zero":      "L.member.0=x",
		"index too large": "L.member.10001=x",
		"index too long":  "L.member.12345678901234567890=x",
		"name too long":   strings.Repeat("n", 600) + "=1",
		"too many":        manyParams(10001),
	} {
		_, err := Parse([]byte(body), Limits{})
		if !errors.Is(err, ErrMalformed) {
			t.Errorf("%s: err %v, want ErrMalformed", name, err)
		}
	}
	if _, err := Parse([]byte("&&A=1&&"), Limits{}); err != nil {
		t.Errorf("empty pairs are skipped: %v", err)
	}
}

func manyParams(n int) string {
	var b strings.Builder
	for i := range n {
		b.WriteString("p" + strconv.Itoa(i) + "=1&")
	}
	return b.String()
}

func TestWriterAndErrorDocument(t *testing.T) {
	x := NewResponse("ListMetrics", "http://monitoring.amazonaws.com/doc/2010-08-01/", "rid-1")
	x.Start("Metrics")
	x.Start("member")
	x.Text("MetricName", `a<b&"c"`)
	x.Float("V", 0.1)
	x.Time("T", time.Date(2026, 1, 2, 3, 4, 5, 6e6, time.FixedZone("x", 3600)))
	rec := httptest.NewRecorder()
	x.Send(rec)
	got := rec.Body.String()
	want := `<?xml version="1.0" encoding="UTF-8"?><ListMetricsResponse xmlns="http://monitoring.amazonaws.com/doc/2010-08-01/">` +
		`<ListMetricsResult><Metrics><member><MetricName>a&lt;b&amp;&#34;c&#34;</MetricName><V>0.1</V><T>2026-01-02T02:04:05.006Z</T>` +
		`</member></Metrics></ListMetricsResult><ResponseMetadata><RequestId>rid-1</RequestId></ResponseMetadata></ListMetricsResponse>`
	if got != want {
		t.Errorf("got  %s\nwant %s", got, want)
	}
	if rec.Header().Get("Content-Type") != ContentType || rec.Code != 200 {
		t.Errorf("headers %v code %d", rec.Header(), rec.Code)
	}
	rec = httptest.NewRecorder()
	WriteError(rec, 400, "ns", Sender, "InvalidParameterValue", "bad <value>", "rid-2")
	want = `<?xml version="1.0" encoding="UTF-8"?><ErrorResponse xmlns="ns"><Error><Type>Sender</Type><Code>InvalidParameterValue</Code>` +
		`<Message>bad &lt;value&gt;</Message></Error><RequestId>rid-2</RequestId></ErrorResponse>`
	if rec.Code != 400 || rec.Body.String() != want {
		t.Errorf("error %d %s", rec.Code, rec.Body.String())
	}
}

// FuzzParse: any body is parsed or refused with ErrMalformed, never a
// panic, and a parsed form answers every reader.
func FuzzParse(f *testing.F) {
	for _, s := range []string{
		"Action=ListMetrics&Version=2010-08-01",
		"A.member.1.B.member.2.C=x&A.member.1.B.member.1.C=y",
		"M.entry.1.key=a&M.entry.1.value=b",
		"%", "=", "a.member.=1", "a.member.1x=1", "a.entry.99999=1", ".member.1=1", "x=%ff%fe",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		form, err := Parse(body, Limits{MaxParams: 200, MaxIndex: 500})
		if err != nil {
			if !errors.Is(err, ErrMalformed) {
				t.Fatalf("error %v is not ErrMalformed", err)
			}
			return
		}
		for name := range form.values {
			form.Members(name)
			form.Entries(name)
			form.Has(name)
			form.Int(name)
			form.Bool(name)
			form.Time(name)
		}
		for _, idx := range form.members {
			if len(idx) > 500 {
				t.Fatalf("a list of %d members past MaxIndex", len(idx))
			}
		}
	})
}
