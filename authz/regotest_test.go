package authz

import (
	"os"

	"context"
	"github.com/open-policy-agent/opa/v1/ast"
	"strings"
	"testing"
)

// TestRunRegoTests runs the sample custom module's _test.rego.
func TestRunRegoTests(t *testing.T) {
	var out strings.Builder
	sum, err := RunRegoTests(context.Background(), []string{"testdata/rego"}, &out)
	if err != nil {
		t.Fatal(err)
	}
	if !sum.OK() || sum.Passed != 5 {
		t.Fatalf("summary %+v\n%s", sum, out.String())
	}
	if !strings.Contains(out.String(), "PASS  data.mce.custom_test.test_frozen_endpoint_denied") {
		t.Fatalf("output:\n%s", out.String())
	}
}

func TestRunRegoTestsFailure(t *testing.T) {
	var out strings.Builder
	sum, err := RunRegoTests(context.Background(), []string{"testdata/rego-failing"}, &out)
	if err != nil {
		t.Fatal(err)
	}
	if sum.OK() || sum.Failed != 1 || sum.Passed != 1 {
		t.Fatalf("summary %+v\n%s", sum, out.String())
	}
	if !strings.Contains(out.String(), "FAIL  data.mce.custom.failing_test.test_fails (testdata/rego-failing/failing_test.rego:5") {
		t.Fatalf("output:\n%s", out.String())
	}
}

// TestEmbeddedRego runs rego/*_test.rego, the unit tests of the embedded
// IAM evaluator itself.
func TestEmbeddedRego(t *testing.T) {
	var out strings.Builder
	sum, err := runEmbeddedRegoTests(context.Background(), "rego/iam_test.rego", &out)
	if err != nil {
		t.Fatal(err)
	}
	if !sum.OK() {
		t.Fatalf("summary %+v\n%s", sum, out.String())
	}
	t.Log("\n" + out.String())
}

func runEmbeddedRegoTests(ctx context.Context, file string, w *strings.Builder) (TestSummary, error) {
	src, err := os.ReadFile(file)
	if err != nil {
		return TestSummary{}, err
	}
	m, err := ast.ParseModuleWithOpts(file, string(src), ast.ParserOptions{RegoVersion: ast.RegoV1})
	if err != nil {
		return TestSummary{}, err
	}
	return runRegoTests(ctx, map[string]*ast.Module{file: m}, w)
}
