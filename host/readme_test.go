package host

import (
	"os"
	"strings"
	"testing"
)

// TestREADMEListsEveryOperation: the documentation's list of what mce
// answers (docs/api.md) names every control-plane operation of the op table
// and the runtime's, so an operation added to the code is added to the list.
func TestREADMEListsEveryOperation(t *testing.T) {
	b, err := os.ReadFile("../docs/api.md")
	if err != nil {
		t.Fatal(err)
	}
	section, ok := strings.CutPrefix(string(b), "# What mce answers, refuses and adds\n")
	if !ok {
		t.Fatal(`docs/api.md does not start with "# What mce answers, refuses and adds"`)
	}
	section, _, _ = strings.Cut(section, "\n## ")
	names := []string{"InvokeEndpoint", "InvokeEndpointWithResponseStream", "InvokeEndpointAsync"}
	for name := range operations {
		names = append(names, name)
	}
	for _, name := range names {
		if !strings.Contains(section, "`"+name+"`") {
			t.Errorf("docs/api.md, on what mce answers, does not name %s", name)
		}
	}
}
