package authz

import (
	"context"
	"embed"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"

	"github.com/open-policy-agent/opa/v1/ast"
	"github.com/open-policy-agent/opa/v1/rego"
	"github.com/open-policy-agent/opa/v1/storage"
	"github.com/open-policy-agent/opa/v1/storage/inmem"
	"github.com/open-policy-agent/opa/v1/topdown/cache"
)

// embeddedRego holds the IAM evaluator, the decision and the explanation,
// written in Rego (their tests are rego/*_test.rego, run by rego_test.go).
//
//go:embed rego/iam.rego rego/authz.rego rego/explain.rego
var embeddedRego embed.FS

const (
	queryDecision       = "data.mce.iam.matched"
	queryDecisionCustom = "data.mce.authz.decision_custom"
	queryExplain        = "data.mce.explain.statements"
	// CustomPackage is the package (or package prefix) of user Rego modules.
	CustomPackage = "mce.custom"

	maxRegoFiles     = 512
	maxRegoFileBytes = 1 << 20
)

// compiled is the prepared evaluator for one generation of the policies.
type compiled struct {
	compiler *ast.Compiler
	store    storage.Store
	vcache   cache.InterQueryValueCache
	decision rego.PreparedEvalQuery

	setOf      map[string]string   // principal ARN → data.mce.sets key
	setStmts   map[string][]*stmt  // data.mce.sets key → its statements in order
	setKeys    map[string][]string // data.mce.sets key → condition keys its statements read
	cache      *decisionCache      // nil: no caching (custom Rego, or disabled)
	numKeys    []string            // lower-cased condition keys used with Numeric operators
	dateKeys   []string            // … with Date operators
	statements int
	custom     int // custom Rego modules
	// resourceTags: some statement names aws:ResourceTag/… or
	// sagemaker:ResourceTag/….
	resourceTags bool

	explainOnce sync.Once
	explain     rego.PreparedEvalQuery
	explainErr  error
}

const (
	setAnonymous = "anonymous"
	setDefault   = "default"
)

// setFor picks the policy set of a principal.
func (c *compiled) setFor(p Principal) string {
	if p.Anonymous {
		return setAnonymous
	}
	if s, ok := c.setOf[p.ARN]; ok {
		return s
	}
	return setDefault
}

// compile turns the loaded policies and the custom Rego modules into a
// prepared query.
func compile(ctx context.Context, l *loaded, custom map[string]*ast.Module, cacheSize int) (*compiled, error) {
	c := &compiled{setOf: map[string]string{}, setStmts: map[string][]*stmt{}, setKeys: map[string][]string{}, custom: len(custom)}

	flatten := func(docs ...[]*policyDoc) []*stmt {
		var out []*stmt
		for _, list := range docs {
			for _, d := range appendUnique(nil, list...) {
				out = append(out, d.stmts...)
			}
		}
		return out
	}
	c.setStmts[setAnonymous] = flatten(l.anonymous)
	c.setStmts[setDefault] = flatten(l.everyone)
	arns := make([]string, 0, len(l.byARN))
	for arn := range l.byARN {
		arns = append(arns, arn)
	}
	sort.Strings(arns)
	for i, arn := range arns {
		key := fmt.Sprintf("p%d", i)
		c.setOf[arn] = key
		c.setStmts[key] = flatten(l.byARN[arn], l.everyone)
	}

	num, date := map[string]bool{}, map[string]bool{}
	patterns := 0
	sets := make(map[string]any, len(c.setStmts))
	seen := map[*stmt]bool{}
	for key, list := range c.setStmts {
		sets[key] = setData(list)
		c.setKeys[key] = conditionKeys(list)
		for _, s := range list {
			patterns += len(s.actions) + len(s.resources)
			if !seen[s] {
				seen[s] = true
				c.statements++
			}
			for _, cd := range s.conds {
				patterns += len(cd.values)
				if strings.HasPrefix(cd.lkey, "aws:resourcetag/") || strings.HasPrefix(cd.lkey, "sagemaker:resourcetag/") {
					c.resourceTags = true
				}
				switch cd.spec.src {
				case "n":
					num[cd.lkey] = true
				case "d":
					date[cd.lkey] = true
				}
			}
		}
	}
	c.numKeys, c.dateKeys = sortedKeys(num), sortedKeys(date)

	modules, err := embeddedModules()
	if err != nil {
		return nil, err
	}
	for name, m := range custom {
		modules[name] = m
	}
	compiler := ast.NewCompiler().WithCapabilities(capabilities())
	if compiler.Compile(modules); compiler.Failed() {
		return nil, regoErrors(compiler.Errors)
	}
	c.compiler = compiler
	c.store = inmem.NewFromObjectWithOpts(map[string]any{"mce": map[string]any{"sets": sets}},
		inmem.OptReturnASTValuesOnRead(true))

	// glob.match keeps compiled patterns in this cache (OPA's own fallback
	// cache holds 100 patterns for the whole process).
	cfg, err := cache.ParseCachingConfig(nil)
	if err != nil {
		return nil, err
	}
	n := max(1000, 2*patterns)
	cfg.InterQueryBuiltinValueCache.MaxNumEntries = &n
	c.vcache = cache.NewInterQueryValueCache(ctx, cfg)

	q := queryDecision
	if c.custom > 0 {
		q = queryDecisionCustom
	}
	c.decision, err = rego.New(
		rego.Query(q),
		rego.Compiler(compiler),
		rego.Store(c.store),
		rego.InterQueryBuiltinValueCache(c.vcache),
	).PrepareForEval(ctx)
	if err != nil {
		return nil, fmt.Errorf("authz: preparing the decision query: %w", err)
	}
	// Custom Rego may read any part of the input, so its decisions are not
	// cached.
	if cacheSize > 0 && c.custom == 0 {
		c.cache = newDecisionCache(cacheSize)
	}
	return c, nil
}

// explainQuery prepares the explanation query once per generation.
func (c *compiled) explainQuery(ctx context.Context) (rego.PreparedEvalQuery, error) {
	c.explainOnce.Do(func() {
		c.explain, c.explainErr = rego.New(
			rego.Query(queryExplain),
			rego.Compiler(c.compiler),
			rego.Store(c.store),
			rego.InterQueryBuiltinValueCache(c.vcache),
		).PrepareForEval(ctx)
	})
	return c.explain, c.explainErr
}

// data is the statement as data.mce.sets holds it (see rego/iam.rego).
func (s *stmt) data() map[string]any {
	simple := !s.notRes && len(s.conds) == 0 && slices.Contains(s.resources, "*")
	m := map[string]any{"id": s.id, "deny": s.deny, "simple": simple, "c": s.condData()}
	addPatterns(m, "a", s.actions, true, s.notAction) // actions match case-insensitively
	addPatterns(m, "r", s.resources, false, s.notRes)
	return m
}

// exactActions returns the lower-cased actions of a statement whose Action
// names only exact actions (no wildcard, not NotAction), for the index.
func (s *stmt) exactActions() ([]string, bool) {
	if s.notAction {
		return nil, false
	}
	out := make([]string, 0, len(s.actions))
	for _, a := range s.actions {
		if strings.ContainsAny(a, "*?") {
			return nil, false
		}
		out = append(out, strings.ToLower(a))
	}
	return out, true
}

// addPatterns sets m[p+"a"] (any), m[p+"e"] (exact names as an object),
// m[p+"p"] (prefixes), m[p+"g"] (globs) and m["n"+p] (negated element).
func addPatterns(m map[string]any, p string, pats []string, lower, negated bool) {
	anyv := false
	exact := map[string]any{}
	prefixes, globs := []any{}, []any{}
	for _, x := range pats {
		g := globPattern(x, lower)
		switch g["k"] {
		case "a":
			anyv = true
		case "e":
			exact[g["s"].(string)] = true
		case "p":
			prefixes = append(prefixes, g["s"])
		case "g":
			globs = append(globs, g["s"])
		}
	}
	m[p+"a"], m[p+"e"], m[p+"p"], m[p+"g"], m["n"+p] = anyv, exact, prefixes, globs, negated
}

func (s *stmt) condData() []any {
	cs := make([]any, len(s.conds))
	for i, c := range s.conds {
		mode := "pos"
		switch {
		case c.set == "any" && c.ifExists:
			mode = "anyie"
		case c.set != "":
			mode = c.set
		case c.spec.t == "null":
			mode = "null"
		case c.spec.neg:
			mode = "neg"
		case c.ifExists:
			mode = "posie"
		}
		tests := make([]any, len(c.norm))
		for j, v := range c.norm {
			t := c.spec.t
			if g, ok := v.(map[string]any); ok { // a StringLike pattern
				t, v = map[string]string{"a": "any", "e": "eq", "p": "prefix", "g": "glob"}[g["k"].(string)], g["s"]
			}
			tests[j] = []any{t, v}
		}
		cs[i] = map[string]any{"k": c.lkey, "m": mode, "n": c.spec.neg, "src": c.spec.src, "v": tests}
	}
	return cs
}

// setData is one principal's statements as data.mce.sets holds them: all
// (in order), exact (indexed by exact action) and other.
func setData(list []*stmt) map[string]any {
	all := make([]any, 0, len(list))
	exact := map[string]any{}
	other := []any{}
	for _, s := range list {
		d := s.data()
		all = append(all, d)
		if acts, ok := s.exactActions(); ok {
			seen := map[string]bool{}
			for _, a := range acts {
				if seen[a] {
					continue
				}
				seen[a] = true
				l, _ := exact[a].([]any)
				exact[a] = append(l, d)
			}
			continue
		}
		other = append(other, d)
	}
	return map[string]any{"all": all, "exact": exact, "other": other}
}

func embeddedModules() (map[string]*ast.Module, error) {
	out := map[string]*ast.Module{}
	entries, err := embeddedRego.ReadDir("rego")
	if err != nil {
		return nil, err
	}
	for _, e := range entries {
		name := "rego/" + e.Name()
		src, err := embeddedRego.ReadFile(name)
		if err != nil {
			return nil, err
		}
		m, err := ast.ParseModuleWithOpts("authz/"+name, string(src), ast.ParserOptions{RegoVersion: ast.RegoV1})
		if err != nil {
			return nil, fmt.Errorf("authz: embedded %s: %w", name, err)
		}
		out["authz/"+name] = m
	}
	return out, nil
}

// capabilities are OPA's, less the built-ins that reach the network: a
// decision on the request path must not wait on another host.
func capabilities() *ast.Capabilities {
	caps := ast.CapabilitiesForThisVersion()
	kept := caps.Builtins[:0]
	for _, b := range caps.Builtins {
		switch b.Name {
		case "http.send", "net.lookup_ip_addr":
			continue
		}
		kept = append(kept, b)
	}
	caps.Builtins = kept
	return caps
}

// regoErrors formats compiler/parser errors as FILE:LINE: message lines.
func regoErrors(errs ast.Errors) error {
	var b strings.Builder
	for i, e := range errs {
		if i > 0 {
			b.WriteByte('\n')
		}
		if e.Location != nil {
			fmt.Fprintf(&b, "%s:%d: %s", e.Location.File, e.Location.Row, e.Message)
		} else {
			b.WriteString(e.Message)
		}
	}
	return errors.New(b.String())
}

// regoFiles lists the .rego files under paths (files or directories,
// recursively); tests selects _test.rego files too.
func regoFiles(paths []string, tests bool) ([]string, error) {
	var out []string
	add := func(p string) error {
		if !strings.HasSuffix(p, ".rego") || (!tests && strings.HasSuffix(p, "_test.rego")) {
			return nil
		}
		if len(out) == maxRegoFiles {
			return fmt.Errorf("more than %d Rego files", maxRegoFiles)
		}
		out = append(out, p)
		return nil
	}
	for _, root := range paths {
		fi, err := os.Stat(root)
		if err != nil {
			return nil, err
		}
		if !fi.IsDir() {
			if !strings.HasSuffix(root, ".rego") {
				return nil, fmt.Errorf("%s: not a .rego file", root)
			}
			if err := add(root); err != nil {
				return nil, err
			}
			continue
		}
		err = filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			if d.IsDir() {
				if p != root && strings.HasPrefix(d.Name(), ".") {
					return filepath.SkipDir
				}
				return nil
			}
			return add(p)
		})
		if err != nil {
			return nil, err
		}
	}
	sort.Strings(out)
	return out, nil
}

// loadCustomRego parses the user's modules and checks their contract:
// package mce.custom (or below it); in package mce.custom itself, deny is a
// set of messages (deny contains msg if …) and allow a boolean.
func loadCustomRego(rd *readLog, paths []string, tests bool) (map[string]*ast.Module, []string, error) {
	files, err := regoFiles(paths, tests)
	if err != nil {
		return nil, nil, fmt.Errorf("rego: %w", err)
	}
	mods := make(map[string]*ast.Module, len(files))
	for _, f := range files {
		src, err := rd.read(f, maxRegoFileBytes)
		if err != nil {
			return nil, nil, fmt.Errorf("rego: %w", err)
		}
		m, err := ast.ParseModuleWithOpts(f, string(src), ast.ParserOptions{RegoVersion: ast.RegoV1})
		if err != nil {
			var errs ast.Errors
			if errors.As(err, &errs) {
				return nil, nil, regoErrors(errs)
			}
			return nil, nil, fmt.Errorf("%s: %w", f, err)
		}
		if err := checkCustomModule(f, m, tests); err != nil {
			return nil, nil, err
		}
		mods[f] = m
	}
	return mods, files, nil
}

func checkCustomModule(file string, m *ast.Module, tests bool) error {
	pkg := strings.TrimPrefix(m.Package.Path.String(), "data.")
	if pkg != CustomPackage && !strings.HasPrefix(pkg, CustomPackage+".") {
		if tests && strings.HasSuffix(file, "_test.rego") {
			return nil // tests may live in their own packages
		}
		return fmt.Errorf("%s:%d: package %s: custom Rego must be in package %s (or a package below it)",
			file, m.Package.Location.Row, pkg, CustomPackage)
	}
	if pkg != CustomPackage {
		return nil
	}
	for _, r := range m.Rules {
		ref := r.Head.Ref()
		if len(ref) == 0 {
			continue
		}
		name := ref[0].Value.String()
		switch name {
		case "deny":
			if len(ref) != 1 || r.Head.RuleKind() != ast.MultiValue {
				return fmt.Errorf("%s:%d: mce.custom.deny must be a set of messages: deny contains msg if { … }", file, r.Location.Row)
			}
		case "allow":
			if len(ref) != 1 || r.Head.RuleKind() != ast.SingleValue {
				return fmt.Errorf("%s:%d: mce.custom.allow must be a boolean rule: allow if { … }", file, r.Location.Row)
			}
		}
	}
	return nil
}

func sortedKeys(m map[string]bool) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
