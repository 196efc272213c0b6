package host

import (
	"os"
	"strings"
	"testing"
)

// TestREADMEListsEveryOperation: the README's list of what mce answers
// names every control-plane operation of the op table and the runtime's, so
// an operation added to the code is added to the list.
func TestREADMEListsEveryOperation(t *testing.T) {
	b, err := os.ReadFile("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	_, section, ok := strings.Cut(string(b), "\n## What mce answers, refuses and adds\n")
	if !ok {
		t.Fatal(`README.md has no section "## What mce answers, refuses and adds"`)
	}
	section, _, _ = strings.Cut(section, "\n## ")
	names := []string{"InvokeEndpoint", "InvokeEndpointWithResponseStream", "InvokeEndpointAsync"}
	for name := range operations {
		names = append(names, name)
	}
	for _, name := range names {
		if !strings.Contains(section, "`"+name+"`") {
			t.Errorf("README's section on what mce answers does not name %s", name)
		}
	}
}
