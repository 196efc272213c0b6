// Package sts answers the one AWS STS call SDKs make before they deploy:
// GetCallerIdentity, for the caller mce authenticated — the principal of
// its access key in the credentials file, or, without a credentials file,
// a fixed local identity (a session of the role authz.LocalRoleName of the
// host's account). The SageMaker Python SDK's get_execution_role(), v3's
// role resolution and `aws sts get-caller-identity` read it.
//
// It speaks the query protocol (awsQuery, Version 2011-06-15), the only
// one STS's clients use: a form POSTed to / and XML answers, errors in
// STS's shape. Everything else of STS (AssumeRole, GetSessionToken, …)
// answers InvalidAction saying mce does not serve it: minting credentials
// would need a credential store mce does not have.
//
// It owns the wire and the answer; it must not touch authentication
// (host verifies the signature, scoped to service "sts", and passes the
// caller) or routing (host reads the form once and hands it over by its
// Version).
package sts

import (
	"net/http"
	"slices"

	"github.com/mce-run/mce/authz"
	"github.com/mce-run/mce/internal/awsquery"
)

const (
	// APIVersion is the Version of STS's query-protocol forms.
	APIVersion = "2011-06-15"
	// Namespace is the XML namespace of STS's answers.
	Namespace = "https://sts.amazonaws.com/doc/2011-06-15/"
)

// operations are STS's, from its API model: all but GetCallerIdentity are
// refused as not served.
var operations = []string{"AssumeRole", "AssumeRoleWithSAML", "AssumeRoleWithWebIdentity", "AssumeRoot",
	"DecodeAuthorizationMessage", "GetAccessKeyInfo", "GetCallerIdentity", "GetDelegatedAccessToken",
	"GetFederationToken", "GetSessionToken", "GetWebIdentityToken"}

// Options configure a Service.
type Options struct {
	// Partition and Account are those of the host: the local identity's.
	Partition string // default "aws"
	Account   string
}

// Service answers STS calls.
type Service struct{ o Options }

// New makes a Service.
func New(o Options) *Service {
	if o.Partition == "" {
		o.Partition = "aws"
	}
	return &Service{o: o}
}

// Caller is who made the call, as host authenticated it.
type Caller struct {
	// Local is set when mce verifies no signatures (no credentials file):
	// the caller is the local identity.
	Local bool
	// Principal is the authenticated principal otherwise; an anonymous one
	// (an unsigned call) has no identity to answer.
	Principal authz.Principal
}

// LocalIdentity is the ARN of the local identity of partition and account.
func LocalIdentity(partition, account string) string {
	return "arn:" + partition + ":sts::" + account + ":assumed-role/" + authz.LocalRoleName + "/" + authz.LocalSessionName
}

// Serve answers the call form holds (its Version is APIVersion) for c.
func (s *Service) Serve(w http.ResponseWriter, form *awsquery.Form, c Caller, requestID string) {
	op := form.Action()
	switch {
	case op == "GetCallerIdentity":
	case slices.Contains(operations, op):
		awsquery.WriteError(w, http.StatusBadRequest, Namespace, awsquery.Sender, "InvalidAction",
			"mce does not serve STS's "+op+": it answers GetCallerIdentity only, for the caller it authenticated.", requestID)
		return
	default:
		awsquery.WriteError(w, http.StatusBadRequest, Namespace, awsquery.Sender, "InvalidAction",
			"Could not find operation "+awsquery.Quoted(op)+" for version "+APIVersion+".", requestID)
		return
	}
	arn := c.Principal.ARN
	switch {
	case c.Local:
		arn = LocalIdentity(s.o.Partition, s.o.Account)
	case c.Principal.Anonymous || arn == "":
		awsquery.WriteError(w, http.StatusForbidden, Namespace, awsquery.Sender, "MissingAuthenticationToken",
			"Request is missing Authentication Token: sign it with the access key of a principal of mce's credentials file.", requestID)
		return
	}
	x := awsquery.NewResponse(op, Namespace, requestID)
	x.Text("UserId", authz.UniqueID(arn))
	x.Text("Account", authz.AccountOf(arn))
	x.Text("Arn", arn)
	x.Send(w)
}
