package layering

import (
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
)

const module = "github.com/mce-run/mce"

// graph is every package of the module with the packages it links
// (go list -deps, tests left out).
type graph map[string][]string

// moduleGraph lists the module's packages and what each links.
func moduleGraph(t *testing.T) graph {
	t.Helper()
	gobin, err := exec.LookPath("go")
	if err != nil {
		gobin = filepath.Join(runtime.GOROOT(), "bin", "go")
	}
	cmd := exec.Command(gobin, "list", "-f", `{{.ImportPath}} {{join .Deps " "}}`, "./...")
	cmd.Dir = "../.."
	out, err := cmd.Output()
	if err != nil {
		msg := ""
		if ee, ok := err.(*exec.ExitError); ok {
			msg = string(ee.Stderr)
		}
		t.Fatalf("go list: %v\n%s", err, msg)
	}
	g := graph{}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		f := strings.Fields(line)
		if len(f) > 0 {
			g[f[0]] = f[1:]
		}
	}
	return g
}

// under reports whether pkg is root or one of its sub-packages.
func under(pkg, root string) bool { return pkg == root || strings.HasPrefix(pkg, root+"/") }

var (
	docker     = module + "/containers/docker"
	kubernetes = module + "/containers/kubernetes"
	engines    = []string{docker, kubernetes}
)

// engineOf is the engine pkg belongs to, "" when none.
func engineOf(pkg string) string {
	for _, e := range engines {
		if under(pkg, e) {
			return e
		}
	}
	return ""
}

// isDockerClient: a Docker engine client (go-units, byte sizes in words, is
// not one).
func isDockerClient(pkg string) bool {
	return (strings.HasPrefix(pkg, "github.com/moby/") || strings.HasPrefix(pkg, "github.com/docker/")) &&
		pkg != "github.com/docker/go-units"
}

// rule is one arrow the layout forbids: pkg may not link dep; why says why
// ("" when it may).
type rule struct {
	name string
	why  func(pkg, dep string) string
}

// rules are the layout's forbidden arrows (docs/layout.md).
var rules = []rule{
	{"the front links no engine", func(pkg, dep string) string {
		// host, pipeline and authz know engines only through the contract
		// in containers, which links none either.
		front := under(pkg, module+"/host") || under(pkg, module+"/pipeline") || under(pkg, module+"/authz") || pkg == module+"/containers"
		switch {
		case !front:
			return ""
		case isDockerClient(dep):
			return "a Docker engine client; reach engines through containers.Engine"
		case strings.HasPrefix(dep, "k8s.io/"):
			return "a Kubernetes package; reach engines through containers.Engine"
		case engineOf(dep) != "":
			return "an engine package; reach engines through containers.Engine"
		}
		return ""
	}},
	{"nothing under containers imports host", func(pkg, dep string) string {
		if under(pkg, module+"/containers") && under(dep, module+"/host") {
			return "a host package; the seam's vocabulary lives in containers"
		}
		return ""
	}},
	{"an engine imports no other engine", func(pkg, dep string) string {
		if e := engineOf(pkg); e != "" && engineOf(dep) != "" && engineOf(dep) != e {
			return "another engine; what engines share belongs in containers"
		}
		return ""
	}},
	{"the Kubernetes engine links no Docker client", func(pkg, dep string) string {
		if under(pkg, kubernetes) && isDockerClient(dep) {
			return "a Docker engine client; Docker's types stay in containers/docker"
		}
		return ""
	}},
}

// violations lists every forbidden arrow of g.
func violations(g graph) []string {
	var out []string
	for pkg, deps := range g {
		if !under(pkg, module) {
			continue
		}
		for _, dep := range deps {
			for _, r := range rules {
				if why := r.why(pkg, dep); why != "" {
					out = append(out, r.name+": "+pkg+" links "+dep+" ("+why+")")
				}
			}
		}
	}
	slices.Sort(out)
	return out
}

// TestLayout: no package of the module links what the layout forbids.
func TestLayout(t *testing.T) {
	g := moduleGraph(t)
	for _, v := range violations(g) {
		t.Error(v)
	}
	// The check must see what it judges.
	for _, pkg := range []string{module + "/host", module + "/pipeline", module + "/authz", module + "/containers", docker, kubernetes} {
		if _, ok := g[pkg]; !ok {
			t.Errorf("go list did not list %s", pkg)
		}
	}
}

// TestRulesRefuseBadImports shows each rule failing on a bad import (and
// allowing the arrows the layout has).
func TestRulesRefuseBadImports(t *testing.T) {
	refused := []struct{ pkg, dep, rule string }{
		{module + "/host", "github.com/moby/moby/client", "the front links no engine"},
		{module + "/host/components", docker, "the front links no engine"},
		{module + "/pipeline", "k8s.io/apimachinery/pkg/types", "the front links no engine"},
		{module + "/pipeline/httpc", "k8s.io/client-go/kubernetes", "the front links no engine"},
		{module + "/authz", "github.com/docker/docker/client", "the front links no engine"},
		{module + "/containers", kubernetes, "the front links no engine"},
		{module + "/containers/docker", module + "/host/spec", "nothing under containers imports host"},
		{module + "/containers/mme", module + "/host", "nothing under containers imports host"},
		{docker, kubernetes + "/internal", "an engine imports no other engine"},
		{kubernetes + "/sub", docker, "an engine imports no other engine"},
		{kubernetes, "github.com/moby/moby/api/types/container", "the Kubernetes engine links no Docker client"},
		{kubernetes, "github.com/docker/docker/api/types", "the Kubernetes engine links no Docker client"},
	}
	for _, c := range refused {
		got := violations(graph{c.pkg: {c.dep}})
		if !slices.ContainsFunc(got, func(v string) bool { return strings.HasPrefix(v, c.rule+": ") }) {
			t.Errorf("%s linking %s: violations %q, want one of rule %q", c.pkg, c.dep, got, c.rule)
		}
	}
	allowed := []struct{ pkg, dep string }{
		{module + "/host", module + "/containers"},
		{module + "/host", "github.com/docker/go-units"},
		{module + "/host", "github.com/prometheus/client_golang/prometheus"},
		{module + "/containers", module + "/containers/mme"},
		{docker, "github.com/moby/moby/client"},
		{docker, module + "/containers/gpu"},
		{kubernetes, "k8s.io/client-go/kubernetes"},
		{kubernetes, module + "/containers/artifact"},
		{module + "/cmd/mce", docker},
		{module + "/cmd/mce", module + "/host"},
		{module + "/containers/check", docker},
	}
	for _, c := range allowed {
		if got := violations(graph{c.pkg: {c.dep}}); len(got) > 0 {
			t.Errorf("%s linking %s refused: %q", c.pkg, c.dep, got)
		}
	}
}
