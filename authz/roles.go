package authz

import (
	"context"
	"crypto/sha256"
	"encoding/base32"
	"fmt"
	"sort"
	"strings"
)

// IAM roles. mce has no role store: a role is known from the files, by its
// role ARN (arn:PARTITION:iam::ACCOUNT:role[/PATH/]NAME, an Arn of the
// credentials file or a principal of the policies file's Attach) or by an
// assumed-role session of it (arn:PARTITION:sts::ACCOUNT:assumed-role/NAME/
// SESSION, the Arn of temporary credentials, as SageMaker notebooks and
// Studio present themselves). As in IAM, a role's permissions belong to the
// role: every session of it has the role's policies, which are everything
// the files attach to the role ARN or list under a credential of one of its
// sessions. aws:PrincipalArn of a session is the role's ARN, as IAM sets it.

// Role is one IAM role the files name.
type Role struct {
	ARN       string // arn:aws:iam::123456789012:role/service-role/Name
	Name      string
	Path      string // "/" or "/service-role/"
	Account   string
	Partition string
}

// roleKey names a role regardless of the case of its name (IAM role names
// are unique without regard to case within an account).
func roleKey(partition, account, name string) string {
	return partition + ":" + account + ":" + strings.ToLower(name)
}

// ParseRoleARN reads a role ARN. ok is false for anything else.
func ParseRoleARN(arn string) (Role, bool) {
	parts := strings.SplitN(arn, ":", 6)
	if len(parts) != 6 || parts[0] != "arn" || parts[1] == "" || parts[2] != "iam" || parts[3] != "" || parts[4] == "" {
		return Role{}, false
	}
	res, ok := strings.CutPrefix(parts[5], "role/")
	if !ok || res == "" || strings.HasSuffix(res, "/") {
		return Role{}, false
	}
	path, name := "/", res
	if i := strings.LastIndexByte(res, '/'); i >= 0 {
		path, name = "/"+res[:i+1], res[i+1:]
	}
	return Role{ARN: arn, Name: name, Path: path, Account: parts[4], Partition: parts[1]}, true
}

// ParseAssumedRoleARN reads an assumed-role session ARN
// (arn:aws:sts::123456789012:assumed-role/NAME/SESSION): the role it is a
// session of (its ARN without a path: a session's ARN does not carry one)
// and the session name.
func ParseAssumedRoleARN(arn string) (role Role, session string, ok bool) {
	parts := strings.SplitN(arn, ":", 6)
	if len(parts) != 6 || parts[0] != "arn" || parts[1] == "" || parts[2] != "sts" || parts[3] != "" || parts[4] == "" {
		return Role{}, "", false
	}
	res, ok := strings.CutPrefix(parts[5], "assumed-role/")
	if !ok {
		return Role{}, "", false
	}
	name, session, ok := strings.Cut(res, "/")
	if !ok || name == "" || session == "" || strings.Contains(session, "/") {
		return Role{}, "", false
	}
	return Role{ARN: "arn:" + parts[1] + ":iam::" + parts[4] + ":role/" + name, Name: name, Path: "/", Account: parts[4], Partition: parts[1]}, session, true
}

// resolveRoles finds the roles the files name and gives each role ARN and
// each of its sessions the role's policies. Two role ARNs of one name (two
// paths) are an error: IAM has one role of a name in an account.
func (l *loaded) resolveRoles() error {
	l.roles = map[string]Role{}
	l.roleOf = map[string]string{}
	arns := make([]string, 0, len(l.byARN))
	for arn := range l.byARN {
		arns = append(arns, arn)
	}
	sort.Strings(arns)
	members := map[string][]string{} // role key → every ARN of the role and its sessions
	for _, arn := range arns {
		if r, ok := ParseRoleARN(arn); ok {
			k := roleKey(r.Partition, r.Account, r.Name)
			if old, dup := l.roles[k]; dup && old.ARN != arn {
				return fmt.Errorf("role %q is named by two ARNs, %q and %q: IAM has one role of a name in an account", r.Name, old.ARN, arn)
			}
			l.roles[k] = r
			members[k] = append(members[k], arn)
		}
	}
	for _, arn := range arns {
		if r, _, ok := ParseAssumedRoleARN(arn); ok {
			k := roleKey(r.Partition, r.Account, r.Name)
			if _, known := l.roles[k]; !known {
				l.roles[k] = r
				members[k] = append(members[k], r.ARN)
			}
			members[k] = append(members[k], arn)
		}
	}
	for k, list := range members {
		var docs []*policyDoc
		for _, arn := range list {
			docs = appendUnique(docs, l.byARN[arn]...)
		}
		for _, arn := range list {
			l.byARN[arn] = docs
			l.roleOf[arn] = l.roles[k].ARN
		}
	}
	return nil
}

// Role is the role of that name in account, as the files name it.
func (a *Authorizer) Role(partition, account, name string) (Role, bool) {
	r, ok := a.st.Load().roles[roleKey(partition, account, name)]
	return r, ok
}

// Roles are every role the files name, by ARN.
func (a *Authorizer) Roles() []Role {
	st := a.st.Load()
	out := make([]Role, 0, len(st.roles))
	for _, r := range st.roles {
		out = append(out, r)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ARN < out[j].ARN })
	return out
}

// KnownPrincipal says whether the files name arn: an Arn of the
// credentials file, a principal of Attach, a role or a session of one.
func (a *Authorizer) KnownPrincipal(arn string) bool {
	_, ok := a.st.Load().byARN[arn]
	return ok
}

// Simulate decides in as Authorize does — the same policies, custom Rego
// and condition keys — without logging it as a decision taken or caching
// it: IAM's SimulatePrincipalPolicy answered with mce's own authorizer.
func (a *Authorizer) Simulate(ctx context.Context, in Input) (Decision, error) {
	st := a.st.Load()
	if !st.enabled {
		return Decision{Allowed: true, By: "authz-disabled"}, nil
	}
	req, err := a.request(st, in)
	if err != nil {
		return Decision{}, err
	}
	return a.evaluate(ctx, st, req)
}

// ConditionKeys are the condition keys (lower-cased) the statements of p's
// policies name that a request must bring — those the authorizer sets on
// every decision itself (the principal's, the time) left out: what
// SimulatePrincipalPolicy reports as missing when it is not given them.
func (a *Authorizer) ConditionKeys(p Principal) []string {
	st := a.st.Load()
	if !st.enabled {
		return nil
	}
	var out []string
	for _, k := range st.setKeys[st.setFor(p)] {
		switch k {
		case "aws:username", "aws:principalarn", "aws:principalaccount", "aws:currenttime", "aws:epochtime":
		default:
			out = append(out, k)
		}
	}
	return out
}

// The identity of callers when no credentials file is configured (mce
// verifies nothing and every caller is anonymous): STS answers that they
// are a session of this role of the host's account, so that code that
// looks for its execution role (the SageMaker SDKs' get_execution_role)
// finds one. IAM answers the role.
const (
	LocalRoleName    = "mce-local"
	LocalSessionName = "mce"
)

// UniqueID is the IAM unique ID of the principal an ARN names, as IAM
// shapes them (a four-letter prefix, then 17 of A–Z and 2–7): AIDA… for a
// user, AROA… for a role, and for a role's session the role's ID, ':' and
// the session name. mce derives it from the ARN, so it is the same on
// every start. Other ARNs (an account's root) have the account's ID.
func UniqueID(arn string) string {
	if r, session, ok := ParseAssumedRoleARN(arn); ok {
		return hashID("AROA", roleKey(r.Partition, r.Account, r.Name)) + ":" + session
	}
	if r, ok := ParseRoleARN(arn); ok {
		return hashID("AROA", roleKey(r.Partition, r.Account, r.Name))
	}
	if usernameFromARN(arn) != "" {
		return hashID("AIDA", arn)
	}
	return accountFromARN(arn)
}

func hashID(prefix, s string) string {
	sum := sha256.Sum256([]byte(s))
	return prefix + base32.StdEncoding.EncodeToString(sum[:])[:17]
}

// AccountOf is the account field of an ARN ("" when it has none).
func AccountOf(arn string) string { return accountFromARN(arn) }
