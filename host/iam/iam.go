// Package iam answers the two IAM calls SDKs make before they deploy, with
// mce's own identities and authorizer, and nothing else of IAM:
//
//   - GetRole: the roles mce's files name (authz: a role ARN, or an
//     assumed-role session of one), the roles models name as their
//     ExecutionRoleArn, and — without policies in force, when mce checks
//     nothing — any role of the host's account. A role's trust policy lets
//     SageMaker assume it: that is what mce's roles are for.
//   - SimulatePrincipalPolicy: each action on each resource decided by
//     authz.Authorizer.Simulate for the principal the ARN names — the same
//     policies, custom Rego and condition keys mce's requests are decided
//     with, so the answer agrees with what mce would decide.
//
// Both only read: they grant nothing and change nothing. Every other IAM
// operation answers InvalidAction saying mce does not serve it.
//
// It speaks the query protocol (Version 2010-05-08), the only one IAM's
// clients use. It must not touch authentication (host verifies the
// signature, scoped to service "iam") or the decision on the caller
// (host's callback, Serve's authorize).
package iam

import (
	"context"
	"encoding/base64"
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/mce-run/mce/authz"
	"github.com/mce-run/mce/internal/awsquery"
)

const (
	// APIVersion is the Version of IAM's query-protocol forms.
	APIVersion = "2010-05-08"
	// Namespace is the XML namespace of IAM's answers.
	Namespace = "https://iam.amazonaws.com/doc/2010-05-08/"
)

// Limits of SimulatePrincipalPolicy (IAM documents none on the lists; these
// bound the work of one call).
const (
	maxActions     = 1000
	maxResources   = 1000
	maxContext     = 100
	defaultPage    = 100
	maxPage        = 1000
	maxNameLen     = 128
	maxResourceLen = 2048
)

// Options configure a Service.
type Options struct {
	// Authorizer decides; nil, or one with no policies, allows everything
	// (as mce's requests are then decided).
	Authorizer *authz.Authorizer
	// Partition and Account are the host's.
	Partition string // default "aws"
	Account   string
	// ExecutionRoles lists the role ARNs the host's models name. Optional.
	ExecutionRoles func() []string
	// Started is when the host started: the CreateDate of its roles.
	Started time.Time
}

// Service answers IAM calls.
type Service struct{ o Options }

// New makes a Service.
func New(o Options) *Service {
	if o.Partition == "" {
		o.Partition = "aws"
	}
	if o.Started.IsZero() {
		o.Started = time.Now()
	}
	return &Service{o: o}
}

// Authorize decides whether the caller may perform action on resource
// (host's decision; nil: go ahead, else the denial's message).
type Authorize func(ctx context.Context, action, resource string) error

// apiError is an IAM error answer.
type apiError struct {
	status        int
	code, message string
}

func invalidInput(msg string) *apiError { return &apiError{http.StatusBadRequest, "InvalidInput", msg} }

// Serve answers the call form holds (its Version is APIVersion) for the
// caller, whose account GetRole looks in ("" for the host's).
func (s *Service) Serve(w http.ResponseWriter, r *http.Request, form *awsquery.Form, caller authz.Principal, authorize Authorize, requestID string) {
	var x *awsquery.Writer
	var e *apiError
	switch op := form.Action(); op {
	case "GetRole":
		x, e = s.getRole(r.Context(), form, caller, authorize, requestID)
	case "SimulatePrincipalPolicy":
		x, e = s.simulate(r.Context(), form, authorize, requestID)
	default:
		e = &apiError{http.StatusBadRequest, "InvalidAction", "mce does not serve IAM's " + awsquery.Quoted(op) +
			": it answers GetRole and SimulatePrincipalPolicy only, from its own credentials and policies files."}
	}
	if e != nil {
		awsquery.WriteError(w, e.status, Namespace, awsquery.Sender, e.code, e.message, requestID)
		return
	}
	x.Send(w)
}

// enabled says whether policies are in force.
func (s *Service) enabled() bool { return s.o.Authorizer != nil && s.o.Authorizer.Enabled() }

var roleNamePattern = regexp.MustCompile(`^[\w+=,.@-]{1,64}$`)

func (s *Service) getRole(ctx context.Context, form *awsquery.Form, caller authz.Principal, authorize Authorize, requestID string) (*awsquery.Writer, *apiError) {
	name, _ := form.String("RoleName")
	if !roleNamePattern.MatchString(name) {
		return nil, &apiError{http.StatusBadRequest, "ValidationError", "1 validation error detected: Value " + awsquery.Quoted(name) +
			" at 'roleName' failed to satisfy constraint: Member must satisfy regular expression pattern: [\\w+=,.@-]+ and have length between 1 and 64"}
	}
	account := authz.AccountOf(caller.ARN)
	if account == "" {
		account = s.o.Account
	}
	role, found := s.role(account, name)
	if err := authorize(ctx, "iam:GetRole", role.ARN); err != nil {
		return nil, &apiError{http.StatusForbidden, "AccessDenied", err.Error()}
	}
	if !found {
		return nil, &apiError{http.StatusNotFound, "NoSuchEntity", "The role with name " + name + " cannot be found."}
	}
	x := awsquery.NewResponse("GetRole", Namespace, requestID)
	x.Start("Role")
	x.Text("Path", role.Path)
	x.Text("RoleName", role.Name)
	x.Text("RoleId", authz.UniqueID(role.ARN))
	x.Text("Arn", role.ARN)
	x.Time("CreateDate", s.o.Started)
	x.Text("AssumeRolePolicyDocument", trustPolicy)
	x.Text("Description", "A role of mce's: SageMaker may assume it; its permissions are the policies mce's files give it.")
	x.Text("MaxSessionDuration", "3600")
	x.Start("RoleLastUsed")
	x.End()
	x.End()
	return x, nil
}

// trustPolicy is every mce role's trust policy, URL-encoded as IAM answers
// it: SageMaker may assume the role.
var trustPolicy = url.QueryEscape(`{"Version":"2012-10-17","Statement":[{"Effect":"Allow","Principal":{"Service":"sagemaker.amazonaws.com"},"Action":"sts:AssumeRole"}]}`)

// role finds the role named name in account; when it is not found, role
// still has the ARN it would have (the resource of GetRole's decision).
func (s *Service) role(account, name string) (authz.Role, bool) {
	guess, _ := authz.ParseRoleARN("arn:" + s.o.Partition + ":iam::" + account + ":role/" + name)
	if s.o.Authorizer != nil {
		if r, ok := s.o.Authorizer.Role(s.o.Partition, account, name); ok {
			return r, true
		}
	}
	if s.o.ExecutionRoles != nil {
		for _, a := range s.o.ExecutionRoles() {
			if r, ok := authz.ParseRoleARN(a); ok && r.Partition == s.o.Partition && r.Account == account && strings.EqualFold(r.Name, name) {
				return r, true
			}
		}
	}
	// With no policies in force mce checks nothing: any role of the
	// account answers, the local identity's (authz.LocalRoleName) among
	// them, as mce would take any of them as an ExecutionRoleArn.
	return guess, !s.enabled()
}

// known says whether arn names a principal SimulatePrincipalPolicy can
// simulate; else the NoSuchEntity message.
func (s *Service) known(arn string) (string, bool) {
	if !s.enabled() {
		if _, ok := authz.ParseRoleARN(arn); ok {
			return "", true
		}
		if strings.Contains(arn, ":user/") {
			return "", true
		}
	} else if s.o.Authorizer.KnownPrincipal(arn) {
		return "", true
	}
	if r, ok := authz.ParseRoleARN(arn); ok {
		if s.o.ExecutionRoles != nil && slices.Contains(s.o.ExecutionRoles(), arn) {
			return "", true
		}
		return "The role with name " + r.Name + " cannot be found.", false
	}
	if i := strings.Index(arn, ":user/"); i >= 0 && strings.Contains(arn, ":iam::") {
		name := arn[i+len(":user/"):]
		if j := strings.LastIndexByte(name, '/'); j >= 0 {
			name = name[j+1:]
		}
		return "The user with name " + name + " cannot be found.", false
	}
	if strings.Contains(arn, ":group/") {
		return "mce has no IAM groups: simulate a user or a role of its credentials and policies files.", false
	}
	return "PolicySourceArn " + awsquery.Quoted(arn) + " names no user or role of mce's credentials and policies files.", false
}

func (s *Service) simulate(ctx context.Context, form *awsquery.Form, authorize Authorize, requestID string) (*awsquery.Writer, *apiError) {
	source, _ := form.String("PolicySourceArn")
	if len(source) < 20 || len(source) > maxResourceLen {
		return nil, &apiError{http.StatusBadRequest, "ValidationError", "1 validation error detected: Value " + awsquery.Quoted(source) +
			" at 'policySourceArn' failed to satisfy constraint: Member must have length between 20 and 2048"}
	}
	for _, m := range []string{"PolicyInputList", "PermissionsBoundaryPolicyInputList", "ResourcePolicy", "ResourceOwner", "CallerArn"} {
		if form.Has(m) {
			return nil, invalidInput("mce does not simulate " + m + ": it decides with the policies its files give the principal, as its requests are decided.")
		}
	}
	actions := form.Strings("ActionNames")
	if len(actions) == 0 {
		return nil, &apiError{http.StatusBadRequest, "ValidationError", "1 validation error detected: Value null at 'actionNames' failed to satisfy constraint: Member must not be null"}
	}
	resources := form.Strings("ResourceArns")
	if len(resources) == 0 {
		resources = []string{"*"}
	}
	if len(actions) > maxActions || len(resources) > maxResources {
		return nil, invalidInput("mce simulates at most " + strconv.Itoa(maxActions) + " ActionNames on at most " + strconv.Itoa(maxResources) + " ResourceArns in one call.")
	}
	for _, a := range actions {
		if svc, name, ok := strings.Cut(a, ":"); !ok || svc == "" || name == "" || len(a) > maxNameLen {
			return nil, invalidInput("Actions must be in the form service:action, and " + awsquery.Quoted(a) + " is not.")
		}
	}
	for _, res := range resources {
		if res == "" || len(res) > maxResourceLen {
			return nil, invalidInput("Each of ResourceArns must be 1 to 2048 characters.")
		}
	}
	keys, e := contextEntries(form)
	if e != nil {
		return nil, e
	}
	page := defaultPage
	if n, ok, err := form.Int("MaxItems"); err != nil || (ok && (n < 1 || n > maxPage)) {
		return nil, &apiError{http.StatusBadRequest, "ValidationError", "1 validation error detected: Value at 'maxItems' failed to satisfy constraint: Member must have value between 1 and 1000"}
	} else if ok {
		page = int(n)
	}
	total := len(actions) * len(resources)
	start := 0
	if m, ok := form.String("Marker"); ok {
		b, err := base64.RawURLEncoding.DecodeString(m)
		n, err2 := strconv.Atoi(strings.TrimPrefix(string(b), "mce-simulate:"))
		if err != nil || err2 != nil || !strings.HasPrefix(string(b), "mce-simulate:") || n <= 0 || n >= total {
			return nil, invalidInput("Invalid Marker: give the Marker of the previous answer of the same simulation.")
		}
		start = n
	}
	if err := authorize(ctx, "iam:SimulatePrincipalPolicy", source); err != nil {
		return nil, &apiError{http.StatusForbidden, "AccessDenied", err.Error()}
	}
	if msg, ok := s.known(source); !ok {
		return nil, &apiError{http.StatusNotFound, "NoSuchEntity", msg}
	}
	p := authz.PrincipalFromARN(source)
	var missing []string
	if s.enabled() {
		for _, k := range s.o.Authorizer.ConditionKeys(p) {
			if !keys.has(k) {
				missing = append(missing, k)
			}
		}
	}
	end := min(start+page, total)
	x := awsquery.NewResponse("SimulatePrincipalPolicy", Namespace, requestID)
	x.Start("EvaluationResults")
	for i := start; i < end; i++ {
		action, resource := actions[i/len(resources)], resources[i%len(resources)]
		in := authz.Input{Principal: p, Action: action, Resource: resource, Context: keys.single, MultiContext: keys.multi, Time: keys.time}
		d := authz.Decision{Allowed: true}
		if s.o.Authorizer != nil {
			var err error
			if d, err = s.o.Authorizer.Simulate(ctx, in); err != nil {
				return nil, &apiError{http.StatusInternalServerError, "PolicyEvaluation", "mce could not evaluate the policies: " + err.Error()}
			}
		}
		x.Start("member")
		x.Text("EvalActionName", action)
		x.Text("EvalResourceName", resource)
		x.Text("EvalDecision", decision(d))
		x.Start("MatchedStatements")
		for _, st := range d.Statements {
			x.Start("member")
			x.Text("SourcePolicyId", st)
			x.Text("SourcePolicyType", sourceType(source))
			x.End()
		}
		x.End()
		x.Start("MissingContextValues")
		for _, k := range missing {
			x.Text("member", k)
		}
		x.End()
		x.End()
	}
	x.End()
	x.Text("IsTruncated", strconv.FormatBool(end < total))
	if end < total {
		x.Text("Marker", base64.RawURLEncoding.EncodeToString([]byte("mce-simulate:"+strconv.Itoa(end))))
	}
	return x, nil
}

// decision is IAM's EvalDecision of d.
func decision(d authz.Decision) string {
	switch {
	case d.Allowed:
		return "allowed"
	case d.ExplicitDeny:
		return "explicitDeny"
	}
	return "implicitDeny"
}

func sourceType(arn string) string {
	if strings.Contains(arn, ":user/") {
		return "user"
	}
	return "role"
}

// simKeys are the condition keys a simulation is given.
type simKeys struct {
	single map[string]string
	multi  map[string][]string
	time   time.Time
}

func (k simKeys) has(lkey string) bool {
	for n := range k.single {
		if strings.EqualFold(n, lkey) {
			return true
		}
	}
	for n := range k.multi {
		if strings.EqualFold(n, lkey) {
			return true
		}
	}
	return false
}

// contextEntries reads ContextEntries: a list type (…List) is
// multi-valued, any other takes one value.
func contextEntries(form *awsquery.Form) (simKeys, *apiError) {
	k := simKeys{single: map[string]string{}, multi: map[string][]string{}}
	entries := form.Members("ContextEntries")
	if len(entries) > maxContext {
		return k, invalidInput("mce takes at most " + strconv.Itoa(maxContext) + " ContextEntries.")
	}
	for _, m := range entries {
		name, _ := form.String(m + ".ContextKeyName")
		typ, _ := form.String(m + ".ContextKeyType")
		vals := form.Strings(m + ".ContextKeyValues")
		if name == "" || len(name) > 256 || len(vals) == 0 {
			return k, invalidInput("Each of ContextEntries needs a ContextKeyName of at most 256 characters and ContextKeyValues.")
		}
		if !slices.Contains(contextTypes, typ) {
			return k, invalidInput("ContextKeyType " + awsquery.Quoted(typ) + " is not one of " + strings.Join(contextTypes, ", ") + ".")
		}
		if strings.HasSuffix(typ, "List") {
			k.multi[name] = append(k.multi[name], vals...)
			continue
		}
		if len(vals) != 1 {
			return k, invalidInput("ContextKeyType " + typ + " takes one value; " + awsquery.Quoted(name) + " has " + strconv.Itoa(len(vals)) + ".")
		}
		if strings.EqualFold(name, "aws:CurrentTime") {
			if t, err := awsquery.ParseTime(vals[0]); err == nil {
				k.time = t
			}
		}
		k.single[name] = vals[0]
	}
	return k, nil
}

var contextTypes = []string{"string", "stringList", "numeric", "numericList", "boolean", "booleanList", "ip", "ipList", "binary", "binaryList", "date", "dateList"}
