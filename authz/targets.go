package authz

import (
	"fmt"
	"sort"
	"strings"
)

// Targets is what the embedding program authorizes: for each IAM action
// (its case does not matter), the patterns of the resource ARNs it
// authorizes that action on. In a pattern * stands for a run of
// characters other than ':' and '/' (a name, a region, an account) and **
// for any run; the pattern "*" alone stands for the resource "*" itself
// (the List operations, which name no resource).
//
// With Config.Targets set, a statement of an attached policy whose Action
// and Resource can never name together an action and a resource the
// program authorizes gets a warning (Authorizer.Warnings): it can never
// apply, whatever its Effect (a Deny of sagemaker:InvokeEndpoint on
// inference-component ARNs, where invocations are authorized on the
// endpoint's ARN, denies nothing). Statements with NotAction or
// NotResource are not judged.
type Targets map[string][]string

// ResourceNone is the pattern of the resource "*" (List operations).
const ResourceNone = "*"

// unreachable returns a warning for each statement of docs that t says can
// never apply; nil when t is nil.
func unreachable(docs []*policyDoc, t Targets) []string {
	if t == nil {
		return nil
	}
	acts := make([]string, 0, len(t))
	lower := make(map[string][]string, len(t))
	for a, pats := range t {
		la := strings.ToLower(a)
		if _, ok := lower[la]; !ok {
			acts = append(acts, a)
		}
		lower[la] = append(lower[la], pats...)
	}
	sort.Strings(acts)
	memo := map[[2]string]bool{}
	meets := func(stmtRes, pat string) bool {
		k := [2]string{stmtRes, pat}
		v, ok := memo[k]
		if !ok {
			if pat == ResourceNone {
				v = globMatch(stmtRes, "*")
			} else {
				v = globsMeet(stmtRes, pat)
			}
			memo[k] = v
		}
		return v
	}
	var out []string
	for _, d := range docs {
		for _, s := range d.stmts {
			if s.notAction || s.notRes {
				continue
			}
			var named []string // actions mce authorizes that the statement's Action names
			reached := false
			for _, a := range acts {
				la := strings.ToLower(a)
				if !anyGlob(s.actions, la, true) {
					continue
				}
				named = append(named, a)
				for _, p := range lower[la] {
					for _, r := range s.resources {
						if meets(r, p) {
							reached = true
						}
					}
				}
			}
			if reached {
				continue
			}
			effect := "Allow"
			if s.deny {
				effect = "Deny"
			}
			why := "its Action names no action mce authorizes"
			if len(named) > 0 {
				var parts []string
				for i, a := range named {
					if i == 3 {
						parts = append(parts, fmt.Sprintf("and %d more", len(named)-3))
						break
					}
					parts = append(parts, a+" on "+strings.Join(lower[strings.ToLower(a)], " or "))
				}
				why = "mce authorizes " + strings.Join(parts, "; ") + ", and its Resource matches none of them"
			}
			out = append(out, (&lineError{s.file, s.line, fmt.Sprintf("policy %q: statement %s (%s) can never apply: %s",
				d.name, s.id, effect, why)}).Error())
		}
	}
	return out
}

// anyGlob reports whether one of the patterns matches name (lower-cased
// first when fold).
func anyGlob(patterns []string, name string, fold bool) bool {
	for _, p := range patterns {
		if fold {
			p = strings.ToLower(p)
		}
		if globMatch(p, name) {
			return true
		}
	}
	return false
}

// globMatch reports whether the IAM pattern p (* any run, ? one
// character) matches s.
func globMatch(p, s string) bool {
	px, sx := 0, 0
	star, mark := -1, 0
	for sx < len(s) {
		switch {
		case px < len(p) && (p[px] == '?' || p[px] == s[sx]):
			px++
			sx++
		case px < len(p) && p[px] == '*':
			star, mark = px, sx
			px++
		case star >= 0:
			px = star + 1
			mark++
			sx = mark
		default:
			return false
		}
	}
	for px < len(p) && p[px] == '*' {
		px++
	}
	return px == len(p)
}

// globsMeet reports whether some resource matches both the statement's
// pattern p (as mce matches a Resource: * any run of characters, ? one
// character) and the target pattern q (* a run of characters other than
// ':' and '/', as in a name, region or account; ** any run).
func globsMeet(p, q string) bool {
	const (
		lit = iota
		seg // *: within one ARN segment
		any // **
	)
	type tok struct {
		kind int
		c    byte
	}
	var qt []tok
	for i := 0; i < len(q); i++ {
		switch {
		case q[i] == '*' && i+1 < len(q) && q[i+1] == '*':
			qt = append(qt, tok{kind: any})
			i++
		case q[i] == '*':
			qt = append(qt, tok{kind: seg})
		default:
			qt = append(qt, tok{c: q[i]})
		}
	}
	// f[i][j]: p[i:] and qt[j:] match a common string; filled from the ends.
	w := len(qt) + 1
	f := make([]bool, (len(p)+1)*w)
	at := func(i, j int) bool { return f[i*w+j] }
	for i := len(p); i >= 0; i-- {
		for j := len(qt); j >= 0; j-- {
			var v bool
			switch {
			case i == len(p) && j == len(qt):
				v = true
			case i < len(p) && p[i] == '*':
				// The star matches nothing, or also what qt[j] matches.
				v = at(i+1, j) || (j < len(qt) && at(i, j+1))
			case j < len(qt) && qt[j].kind != lit:
				// The target's star matches nothing, or also p[i] (for
				// a segment's, a character other than ':' and '/').
				takes := i < len(p) && (qt[j].kind == any || p[i] == '?' || (p[i] != ':' && p[i] != '/'))
				v = at(i, j+1) || (takes && at(i+1, j))
			case i < len(p) && j < len(qt):
				v = (p[i] == '?' || p[i] == qt[j].c) && at(i+1, j+1)
			}
			f[i*w+j] = v
		}
	}
	return f[0]
}
