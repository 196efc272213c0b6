package main

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/mce-run/mce/internal/testenv"
)

// runCLI runs one mce command line and returns what it printed.
func runCLI(ctx context.Context, args ...string) (string, error) {
	root := newRootCmd()
	var out bytes.Buffer
	root.SetOut(&out)
	root.SetErr(&out)
	root.SetArgs(args)
	err := root.ExecuteContext(ctx)
	return out.String(), err
}

// TestEndpointCommands drives mce endpoints, describe and delete against a
// serving mce.
func TestEndpointCommands(t *testing.T) {
	cli := testenv.Docker(t)
	testenv.Image(t, "probe")
	listen := freePort(t)
	f := serveFlagsFor(t, listen, endpointFile(t, ""))
	ctx, url := serveInService(t, cli, f)

	out, err := runCLI(ctx, "endpoints", "--endpoint-url", url)
	if err != nil || !strings.Contains(out, "ep") || !strings.Contains(out, "InService") {
		t.Errorf("mce endpoints: %v\n%s", err, out)
	}
	out, err = runCLI(ctx, "describe", "ep", "--endpoint-url", url)
	if err != nil || !strings.Contains(out, `"EndpointStatus": "InService"`) || strings.Contains(out, "ResultMetadata") {
		t.Errorf("mce describe: %v\n%s", err, out)
	}
	if strings.Contains(out, "null") || strings.Contains(out, `: ""`) {
		t.Errorf("mce describe prints unset fields as null or \"\":\n%s", out)
	}
	// Text on the command line goes as text/plain, @file by extension, with no --content-type.
	out, err = runCLI(ctx, "invoke", "ep", "--endpoint-url", url, "--custom-attributes", "info", "what a lovely day")
	if err != nil || !strings.Contains(out, `"content_type":"text/plain"`) {
		t.Errorf("mce invoke TEXT: %v\n%s", err, out)
	}
	csv := filepath.Join(t.TempDir(), "case.csv")
	os.WriteFile(csv, []byte("1,2,3\n"), 0o644)
	out, err = runCLI(ctx, "invoke", "ep", "--endpoint-url", url, "--custom-attributes", "info", "@"+csv)
	if err != nil || !strings.Contains(out, `"content_type":"text/csv"`) {
		t.Errorf("mce invoke @file.csv: %v\n%s", err, out)
	}
	out, err = runCLI(ctx, "invoke", "ep", "--endpoint-url", url, "--content-type", "application/json", "@"+csv)
	if err != nil || !strings.Contains(out, "1,2,3") {
		t.Errorf("mce invoke --content-type: %v\n%s", err, out)
	}
	out, err = runCLI(ctx, "delete", "ep", "--endpoint-url", url)
	if err != nil || !strings.Contains(out, "deleted ep") {
		t.Errorf("mce delete: %v\n%s", err, out)
	}
	_, err = runCLI(ctx, "describe", "ep", "--endpoint-url", url)
	var ee *exitError
	if !errors.As(err, &ee) || !strings.Contains(ee.msg, "ValidationException") || !strings.Contains(ee.msg, "Could not find endpoint") {
		t.Errorf("describe after delete: %v", err)
	}
}
