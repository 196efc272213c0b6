package authz

import "strings"

// PrefixProbes helps authorize a request on every resource that starts
// with prefix — an S3 folder or multi-model prefix mce will read object by
// object, which it must authorize before it reads (or lists) anything. IAM
// decides per object; authorizing the literal resource prefix+"*" alone
// would miss a Deny of one object inside the prefix, and an Allow with a
// NotResource that excludes one. So for every Resource and NotResource
// pattern of p's statements that names some resource under prefix,
// PrefixProbes returns one such resource (prefix followed by the
// pattern's remainder, * as nothing and ? as "x"), without duplicates: the
// caller is allowed the prefix when it is allowed prefix+"*" and every
// probe. The probes stand for the objects the statements single out;
// custom Rego rules are not looked into (they see prefix+"*").
func (a *Authorizer) PrefixProbes(p Principal, prefix string) []string {
	st := a.st.Load()
	if !st.enabled {
		return nil
	}
	var out []string
	seen := map[string]bool{}
	for _, s := range st.setStmts[st.setFor(p)] {
		for _, pat := range s.resources {
			if probe, ok := probeUnder(pat, prefix); ok && !seen[probe] {
				seen[probe] = true
				out = append(out, probe)
			}
		}
	}
	return out
}

// probeUnder returns a string that starts with prefix and that the IAM
// wildcard pattern g (* any run, ? one character) matches, if there is one.
func probeUnder(g, prefix string) (string, bool) {
	failed := map[[2]int]bool{}
	// tail(i, j): with g[:i] matched against prefix[:j], the rest of a probe.
	var tail func(i, j int) (string, bool)
	tail = func(i, j int) (string, bool) {
		if j == len(prefix) { // the prefix is matched: complete g's remainder
			var b strings.Builder
			for k := i; k < len(g); k++ {
				switch g[k] {
				case '*':
				case '?':
					b.WriteByte('x')
				default:
					b.WriteByte(g[k])
				}
			}
			return b.String(), true
		}
		if i == len(g) || failed[[2]int{i, j}] {
			return "", false
		}
		var (
			s  string
			ok bool
		)
		switch g[i] {
		case '*': // matches nothing more, or one more character of the prefix
			if s, ok = tail(i+1, j); !ok {
				s, ok = tail(i, j+1)
			}
		case '?':
			s, ok = tail(i+1, j+1)
		default:
			if g[i] == prefix[j] {
				s, ok = tail(i+1, j+1)
			}
		}
		if !ok {
			failed[[2]int{i, j}] = true
		}
		return s, ok
	}
	s, ok := tail(0, 0)
	return prefix + s, ok
}
