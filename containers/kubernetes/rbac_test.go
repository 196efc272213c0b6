package kubernetes

import (
	"bytes"
	"flag"
	"fmt"
	"os"
	"sort"
	"strings"
	"sync"
	"testing"

	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/client-go/kubernetes/scheme"
	k8stesting "k8s.io/client-go/testing"
)

// calls records every API call the engine made in this package's tests
// (test fixtures aside), as "group/resource[/subresource] verb".
var calls = struct {
	sync.Mutex
	seen map[string]bool
}{seen: map[string]bool{}}

func record(a k8stesting.Action) {
	r := a.GetResource()
	key := r.Group + "/" + r.Resource
	if a.GetSubresource() != "" {
		key += "/" + a.GetSubresource()
	}
	calls.Lock()
	calls.seen[key+" "+a.GetVerb()] = true
	calls.Unlock()
}

// TestMain checks, after every test ran, that the Role of
// examples/kubernetes/mce.yaml (with its optional ClusterRole) allows each
// call the engine made and grants nothing it never makes.
func TestMain(m *testing.M) {
	code := m.Run()
	// Only a full run makes every call; -run picks some tests.
	if code == 0 && flag.Lookup("test.run").Value.String() == "" {
		if err := checkRole(); err != nil {
			fmt.Fprintln(os.Stderr, "RBAC:", err)
			code = 1
		}
	}
	os.Exit(code)
}

// testOnly are calls only the tests make: pods and events they create or
// delete standing in for the cluster's controllers, and reads of results.
var testOnly = map[string]bool{
	"/pods create": true, "/pods delete": true, "/pods list": false, "/events create": true, "/nodes create": true,
	"/configmaps create": false, "/configmaps list": false, "/configmaps get": false,
	"apps/deployments get": false, "apps/deployments list": false,
}

// unseenByFake are calls the engine makes that the fake clientset answers
// without its reactors (none now).
var unseenByFake = map[string]bool{}

func checkRole() error {
	b, err := os.ReadFile("../../examples/kubernetes/mce.yaml")
	if err != nil {
		return err
	}
	var role *rbacv1.Role
	var rules []rbacv1.PolicyRule
	for doc := range bytes.SplitSeq(b, []byte("\n---\n")) {
		obj, _, err := scheme.Codecs.UniversalDeserializer().Decode(doc, nil, nil)
		if err != nil {
			return fmt.Errorf("mce.yaml: %w", err)
		}
		if r, ok := obj.(*rbacv1.Role); ok {
			role = r
		}
		if r, ok := obj.(*rbacv1.ClusterRole); ok {
			rules = append(rules, r.Rules...)
		}
	}
	if role == nil {
		return fmt.Errorf("mce.yaml has no Role")
	}
	granted := map[string]bool{}
	for _, rule := range append(rules, role.Rules...) {
		for _, g := range rule.APIGroups {
			for _, res := range rule.Resources {
				for _, v := range rule.Verbs {
					granted[g+"/"+res+" "+v] = true
				}
			}
		}
	}
	calls.Lock()
	defer calls.Unlock()
	var missing, unused []string
	for c := range calls.seen {
		if !granted[c] && !testOnly[c] {
			missing = append(missing, c)
		}
	}
	for g := range granted {
		if !calls.seen[g] && !unseenByFake[g] {
			unused = append(unused, g)
		}
	}
	sort.Strings(missing)
	sort.Strings(unused)
	if len(missing) > 0 || len(unused) > 0 {
		return fmt.Errorf("the Role lacks %s and grants %s that the engine never uses", strings.Join(missing, ", "), strings.Join(unused, ", "))
	}
	return nil
}
