package authz

import (
	"context"
	"fmt"
	"io"
	"sort"
	"time"

	"github.com/open-policy-agent/opa/v1/ast"
	"github.com/open-policy-agent/opa/v1/storage/inmem"
	"github.com/open-policy-agent/opa/v1/tester"
)

// TestSummary counts the outcomes of RunRegoTests.
type TestSummary struct {
	Passed, Failed, Errored, Skipped int
}

// OK reports whether tests ran and none failed.
func (s TestSummary) OK() bool {
	return s.Failed == 0 && s.Errored == 0 && s.Passed > 0
}

// RunRegoTests runs the Rego tests (test_* rules, usually in *_test.rego
// files) found under paths with OPA's test runner, printing one line per
// test to w: "PASS name (duration)", "FAIL name (file:line)", "ERROR name: why".
// The embedded IAM modules are loaded too, so tests may query
// data.mce.iam and data.mce.authz (supplying data.mce.sets with `with`).
func RunRegoTests(ctx context.Context, paths []string, w io.Writer) (TestSummary, error) {
	custom, _, err := loadCustomRego(nil, paths, true)
	if err != nil {
		return TestSummary{}, err
	}
	sum, err := runRegoTests(ctx, custom, w)
	if err == nil && sum.Passed+sum.Failed+sum.Errored == 0 {
		err = fmt.Errorf("no Rego tests found under %v", paths)
	}
	return sum, err
}

// runRegoTests runs the tests in mods, with the embedded modules loaded.
func runRegoTests(ctx context.Context, extra map[string]*ast.Module, w io.Writer) (TestSummary, error) {
	var sum TestSummary
	mods, err := embeddedModules()
	if err != nil {
		return sum, err
	}
	for k, m := range extra {
		mods[k] = m
	}
	compiler := ast.NewCompiler().WithCapabilities(capabilities())
	ch, err := tester.NewRunner().
		SetCompiler(compiler).
		SetStore(inmem.New()).
		SetModules(mods).
		CapturePrintOutput(true).
		SetTimeout(30*time.Second).
		RunTests(ctx, nil)
	if err != nil {
		if errs, ok := err.(ast.Errors); ok {
			return sum, regoErrors(errs)
		}
		return sum, err
	}
	var results []*tester.Result
	for r := range ch {
		results = append(results, r)
	}
	sort.Slice(results, func(i, j int) bool {
		if results[i].Package != results[j].Package {
			return results[i].Package < results[j].Package
		}
		return results[i].Name < results[j].Name
	})
	for _, r := range results {
		name := r.Package + "." + r.Name
		loc := ""
		if r.Location != nil {
			loc = fmt.Sprintf("%s:%d", r.Location.File, r.Location.Row)
		}
		switch {
		case r.Skip:
			sum.Skipped++
			fmt.Fprintf(w, "SKIP  %s\n", name)
		case r.Error != nil:
			sum.Errored++
			fmt.Fprintf(w, "ERROR %s (%s): %v\n", name, loc, r.Error)
		case r.Fail:
			sum.Failed++
			fmt.Fprintf(w, "FAIL  %s (%s, %s)\n", name, loc, r.Duration.Round(time.Microsecond))
		default:
			sum.Passed++
			fmt.Fprintf(w, "PASS  %s (%s)\n", name, r.Duration.Round(time.Microsecond))
		}
		if len(r.Output) > 0 && (r.Fail || r.Error != nil) {
			fmt.Fprintf(w, "      output: %s\n", r.Output)
		}
	}
	fmt.Fprintf(w, "%d passed, %d failed, %d errors, %d skipped\n", sum.Passed, sum.Failed, sum.Errored, sum.Skipped)
	return sum, nil
}
