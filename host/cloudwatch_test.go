package host

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/cloudwatchlogs"
	"github.com/rs/zerolog"

	"github.com/mce-run/mce/authz"
)

func (h *harness) logsAs(key, secret string) *cloudwatchlogs.Client {
	return cloudwatchlogs.New(cloudwatchlogs.Options{Region: "us-east-1", BaseEndpoint: aws.String(h.http.URL),
		Credentials: credentials.NewStaticCredentialsProvider(key, secret, ""), HTTPClient: h.http.Client()})
}

// TestLogsAuthorizeCanonicalName: a Deny on my-mce's log group applies
// however the call spells the endpoint's name. The ARN used to be built
// from the name as typed while the endpoint was found case-insensitively,
// so MY-MCE read my-mce's logs.
func TestLogsAuthorizeCanonicalName(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "creds.yaml"), []byte(`
Credentials:
  - AccessKeyId: AKIAREADER00EXAMPLE
    SecretAccessKey: reader-secret
    Arn: arn:aws:iam::123456789012:user/reader
    Policies:
      - Statement:
          - {Effect: Allow, Action: "logs:*", Resource: "*"}
          - Effect: Deny
            Action: "logs:*"
            Resource: ["arn:aws:logs:us-east-1:123456789012:log-group:/aws/sagemaker/Endpoints/my-mce:*",
                       "arn:aws:logs:us-east-1:123456789012:log-group:/aws/sagemaker/Endpoints/my-mce:log-stream:*"]
`), 0o600); err != nil {
		t.Fatal(err)
	}
	a, err := authz.Load(context.Background(), authz.Config{CredentialsFile: filepath.Join(dir, "creds.yaml"), Region: "us-east-1", Logger: zerolog.Nop()})
	if err != nil {
		t.Fatal(err)
	}
	h := newHarness(t, Config{Authz: a})
	for _, name := range []string{"my-mce", "other"} {
		if err := h.deploy(plan(name, "Serial", map[string][]string{"AllTraffic": {"c:A"}})); err != nil {
			t.Fatal(err)
		}
		h.backend.container(name+"/AllTraffic/c").print(time.Now().Add(-time.Minute), name+" says hello")
	}
	ctx := context.Background()

	get := func(name string) (int, string) {
		r, _ := http.NewRequest(http.MethodGet, h.http.URL+"/mce/endpoints/"+name+"/logs", nil)
		resp, b := h.signedDo(t, r, nil, "sagemaker", "AKIAREADER00EXAMPLE", "reader-secret")
		return resp.StatusCode, string(b)
	}
	cw := h.logsAs("AKIAREADER00EXAMPLE", "reader-secret")
	for _, name := range []string{"my-mce", "MY-MCE", "My-Mce"} {
		if status, body := get(name); status != http.StatusForbidden {
			t.Errorf("GET /mce/endpoints/%s/logs: %d %s; want 403", name, status, body)
		}
		group := aws.String("/aws/sagemaker/Endpoints/" + name)
		if out, err := cw.FilterLogEvents(ctx, &cloudwatchlogs.FilterLogEventsInput{LogGroupName: group}); !isAccessDenied(err) {
			t.Errorf("FilterLogEvents %s: %+v %v; want AccessDeniedException", name, out, err)
		}
		if out, err := cw.GetLogEvents(ctx, &cloudwatchlogs.GetLogEventsInput{LogGroupName: group, LogStreamName: aws.String("AllTraffic/0/c")}); !isAccessDenied(err) {
			t.Errorf("GetLogEvents %s: %+v %v; want AccessDeniedException", name, out, err)
		}
		if out, err := cw.DescribeLogStreams(ctx, &cloudwatchlogs.DescribeLogStreamsInput{LogGroupName: group}); !isAccessDenied(err) {
			t.Errorf("DescribeLogStreams %s: %+v %v; want AccessDeniedException", name, out, err)
		}
	}
	// The other endpoint's logs stay readable, whatever the case.
	if status, body := get("OTHER"); status != http.StatusOK {
		t.Errorf("GET /mce/endpoints/OTHER/logs: %d %s", status, body)
	}
	out, err := cw.FilterLogEvents(ctx, &cloudwatchlogs.FilterLogEventsInput{LogGroupName: aws.String("/aws/sagemaker/Endpoints/Other")})
	if err != nil || len(out.Events) != 1 || *out.Events[0].Message != "other says hello" {
		t.Fatalf("FilterLogEvents Other: %+v %v", out, err)
	}
}

// TestFilterLogEventsPaging pages as CloudWatch Logs does: every page that
// returns events carries a nextToken (more may come: the group is live),
// and the page that finds nothing after the token carries none. The
// SageMaker SDK's log follower prints only pages with a nextToken, so it
// printed nothing when the one page of events came without one.
func TestFilterLogEventsPaging(t *testing.T) {
	h := newHarness(t, Config{})
	if err := h.deploy(plan("ep", "Serial", map[string][]string{"AllTraffic": {"a:A", "b:B"}})); err != nil {
		t.Fatal(err)
	}
	base := time.Now().Add(-time.Hour).Truncate(time.Millisecond)
	var want []string
	for i := range 25 {
		c := "ep/AllTraffic/a"
		if i%2 == 1 {
			c = "ep/AllTraffic/b"
		}
		msg := fmt.Sprintf("line %02d", i)
		h.backend.container(c).print(base.Add(time.Duration(i)*time.Millisecond), msg)
		want = append(want, msg)
	}
	cw := h.logsAs("AKIAANY0000EXAMPLE", "any")
	ctx := context.Background()
	group := aws.String("/aws/sagemaker/Endpoints/ep")

	// One call: everything there is, with a token to come back with; that
	// token then gives an empty page without a token.
	out, err := cw.FilterLogEvents(ctx, &cloudwatchlogs.FilterLogEventsInput{LogGroupName: group})
	if err != nil || len(out.Events) != 25 {
		t.Fatalf("FilterLogEvents: %d events, %v", len(out.Events), err)
	}
	if out.NextToken == nil {
		t.Fatal("a page with events came without nextToken")
	}
	end, err := cw.FilterLogEvents(ctx, &cloudwatchlogs.FilterLogEventsInput{LogGroupName: group, NextToken: out.NextToken})
	if err != nil || len(end.Events) != 0 || end.NextToken != nil {
		t.Fatalf("after the last event: %d events, token %v, %v; want none and no token", len(end.Events), end.NextToken, err)
	}
	// The token of the last page with events resumes after it when new
	// events come (what a follower does).
	h.backend.container("ep/AllTraffic/b").print(base.Add(30*time.Millisecond), "late")
	more, err := cw.FilterLogEvents(ctx, &cloudwatchlogs.FilterLogEventsInput{LogGroupName: group, NextToken: out.NextToken})
	if err != nil || len(more.Events) != 1 || *more.Events[0].Message != "late" || more.NextToken == nil {
		t.Fatalf("following: %+v %v", more, err)
	}
	want = append(want, "late")

	// The SDK's paginator, 10 at a time: every event once, in order.
	var got []string
	pages := 0
	p := cloudwatchlogs.NewFilterLogEventsPaginator(cw, &cloudwatchlogs.FilterLogEventsInput{LogGroupName: group, Limit: aws.Int32(10)})
	for p.HasMorePages() {
		page, err := p.NextPage(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if pages++; pages > 10 {
			t.Fatal("the paginator does not end")
		}
		if len(page.Events) > 10 {
			t.Fatalf("page of %d events with limit 10", len(page.Events))
		}
		if len(page.Events) > 0 && page.NextToken == nil {
			t.Fatalf("page %d: %d events and no nextToken", pages, len(page.Events))
		}
		for _, ev := range page.Events {
			got = append(got, *ev.Message)
		}
	}
	if fmt.Sprint(got) != fmt.Sprint(want) || pages != 4 {
		t.Fatalf("paginated %d pages: %q\nwant 4 pages: %q", pages, got, want)
	}

	// startTime and endTime bound the events (endTime excluded here as
	// mce reads [start, end)); the window's end ends the paging.
	win, err := cw.FilterLogEvents(ctx, &cloudwatchlogs.FilterLogEventsInput{LogGroupName: group,
		StartTime: aws.Int64(base.Add(5 * time.Millisecond).UnixMilli()), EndTime: aws.Int64(base.Add(8 * time.Millisecond).UnixMilli())})
	if err != nil || len(win.Events) != 3 || *win.Events[0].Message != "line 05" || win.NextToken == nil {
		t.Fatalf("window: %+v %v", win, err)
	}
	if end, err := cw.FilterLogEvents(ctx, &cloudwatchlogs.FilterLogEventsInput{LogGroupName: group, NextToken: win.NextToken,
		StartTime: aws.Int64(base.Add(5 * time.Millisecond).UnixMilli()), EndTime: aws.Int64(base.Add(8 * time.Millisecond).UnixMilli())}); err != nil || len(end.Events) != 0 || end.NextToken != nil {
		t.Fatalf("window's end: %+v %v", end, err)
	}
}
