package layering

import (
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

const module = "github.com/mce-run/mce"

// goList runs `go list` in the module's root with args and returns its
// output's lines.
func goList(t *testing.T, args ...string) []string {
	t.Helper()
	gobin, err := exec.LookPath("go")
	if err != nil {
		gobin = filepath.Join(runtime.GOROOT(), "bin", "go")
	}
	cmd := exec.Command(gobin, append([]string{"list"}, args...)...)
	cmd.Dir = "../.."
	out, err := cmd.Output()
	if err != nil {
		msg := ""
		if ee, ok := err.(*exec.ExitError); ok {
			msg = string(ee.Stderr)
		}
		t.Fatalf("go list %s: %v\n%s", strings.Join(args, " "), err, msg)
	}
	return strings.Fields(string(out))
}

// forbiddenForFront says why a package may not be linked by host, pipeline,
// authz or the shared root of containers; "" when it may.
func forbiddenForFront(pkg string) string {
	switch {
	case pkg == "github.com/docker/go-units":
		return "" // byte sizes in words; no engine in it
	case strings.HasPrefix(pkg, "github.com/moby/"), strings.HasPrefix(pkg, "github.com/docker/"):
		return "a Docker engine client"
	case strings.HasPrefix(pkg, "k8s.io/client-go"), strings.HasPrefix(pkg, "k8s.io/api/"):
		return "a Kubernetes client"
	case pkg == module+"/containers/docker", strings.HasPrefix(pkg, module+"/containers/docker/"),
		pkg == module+"/containers/kubernetes", strings.HasPrefix(pkg, module+"/containers/kubernetes/"):
		return "an engine package"
	}
	return ""
}

// TestFrontLinksNoEngine: host knows engines only through containers.Engine,
// and pipeline and authz know none at all, so none of them (nor the contract
// they share with the engines) links an engine's client or package.
func TestFrontLinksNoEngine(t *testing.T) {
	for _, root := range []string{"./host", "./pipeline", "./authz", "./containers"} {
		for _, dep := range goList(t, "-deps", root) {
			if why := forbiddenForFront(dep); why != "" {
				t.Errorf("%s links %s (%s); reach engines through containers.Engine instead", root, dep, why)
			}
		}
	}
}

// TestEnginesDoNotImportHost: the engines implement containers.Engine
// without importing host (their tests may build a host around an engine).
func TestEnginesDoNotImportHost(t *testing.T) {
	deps := goList(t, "-deps", "./containers/docker/...", "./containers/kubernetes/...")
	for _, dep := range deps {
		if dep == module+"/host" {
			t.Errorf("an engine package links %s/host; implement containers.Engine instead", module)
		}
	}
	// The check must see the engines at all.
	seen := map[string]bool{}
	for _, dep := range deps {
		seen[dep] = true
	}
	for _, pkg := range []string{module + "/containers/docker", module + "/containers/kubernetes"} {
		if !seen[pkg] {
			t.Errorf("go list did not list %s", pkg)
		}
	}
}

// TestForbidden checks the rule itself on names it must refuse and allow.
func TestForbidden(t *testing.T) {
	for pkg, refused := range map[string]bool{
		"github.com/moby/moby/client":                    true,
		"github.com/docker/go-connections/nat":           true,
		"k8s.io/client-go/kubernetes":                    true,
		module + "/containers/docker":                    true,
		module + "/containers/kubernetes":                true,
		"github.com/docker/go-units":                     false,
		module + "/containers/mme":                       false,
		module + "/containers":                           false,
		"github.com/prometheus/client_golang/prometheus": false,
	} {
		if got := forbiddenForFront(pkg) != ""; got != refused {
			t.Errorf("forbiddenForFront(%q) refuses: %v, want %v", pkg, got, refused)
		}
	}
}
