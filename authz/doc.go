// Package authz owns identity and decisions for the mce host: it verifies
// AWS Signature Version 4 on incoming requests (Authenticate → Principal)
// and decides whether that principal may perform an IAM action on a
// resource (Authorize → Decision), with IAM identity-based policy documents
// evaluated by embedded Rego (OPA) and optional custom Rego modules. It
// touches no HTTP response, no Docker and no endpoint state: the host maps
// *AuthError and denied decisions to SageMaker error shapes.
//
// # Requests
//
// Runtime calls are authorized as sagemaker:InvokeEndpoint (…Async,
// …WithResponseStream) on EndpointARN(region, account, name) — the name
// lower-cased, as SageMaker does — with the condition keys of InvokeContext
// (sagemaker:TargetModel, sagemaker:TargetVariant,
// sagemaker:TargetContainerHostname). Control-plane calls are authorized as
// ControlPlaneAction(X-Amz-Target) on the ARN of the named resource (and,
// for the operations that name an existing resource besides their own, on
// that one too, with its tags; the host's AuthzTargets lists them). mce adds
// aws:username, aws:PrincipalArn, aws:PrincipalAccount, aws:SourceIp,
// aws:CurrentTime and aws:EpochTime. The host adds the tags of the resource
// the ARN names (model, endpoint configuration or endpoint, InvokeEndpoint
// included) as aws:ResourceTag/<key> and sagemaker:ResourceTag/<key>, and
// the tags a request carries (CreateX with Tags, AddTags) as
// aws:RequestTag/<key>, with their keys (and DeleteTags' TagKeys) in the
// multi-valued aws:TagKeys. A policy naming any other condition key is
// refused at load (IAM would treat a key that is never set as absent, so a
// Deny on it would never apply).
//
// # Credentials file (YAML or JSON)
//
//	Credentials:
//	  - AccessKeyId: AKIAALICE0000EXAMPLE
//	    SecretAccessKey: alice-secret-key
//	    SessionToken: ""                         # optional; when set, X-Amz-Security-Token must equal it
//	    Arn: arn:aws:iam::123456789012:user/alice
//	    UserName: alice                          # optional; default: last segment of a :user/ ARN
//	    Policies:                                # IAM identity policies of this principal
//	      - policies/invoke-common.json          # a JSON file, relative to this file …
//	      - invoke-special                       # … or the name of a policy in the policies file
//	      - Name: no-special                     # … or inline: {Name, Document}
//	        Document:                            #     (Document may also be JSON text)
//	          Version: "2012-10-17"
//	          Statement:
//	            - Effect: Deny
//	              Action: sagemaker:InvokeEndpoint
//	              Resource: "*"
//	              Condition:
//	                StringLike: {sagemaker:TargetContainerHostname: "special*"}
//	Anonymous:                                   # optional: policies of unsigned requests
//	  Policies: [policies/public-read.json]
//
// Several access keys may share an ARN; the principal then has the union of
// their policies. Secrets are never logged.
//
// # Policies file (YAML or JSON, optional)
//
//	Policies:                                    # named IAM documents: a file path or inline
//	  invoke-common: policies/invoke-common.json
//	  invoke-special: {Version: "2012-10-17", Statement: […]}
//	Attach:                                      # who has them
//	  "arn:aws:iam::123456789012:user/bob": [invoke-common]
//	  "*": [invoke-common]                       # every authenticated principal
//	  anonymous: []                              # unsigned requests
//
// # IAM evaluation
//
// Documents are validated strictly at load (unknown elements, bad types,
// unknown operators and duplicate keys are errors naming FILE:LINE and the
// statement). Supported: Version, Id, Statement (object or list), Sid,
// Effect, Action/NotAction (case-insensitive, * and ? wildcards),
// Resource/NotResource (case-sensitive ARN globs, * and ?), Condition with
// String{Equals,NotEquals,EqualsIgnoreCase,NotEqualsIgnoreCase,Like,NotLike},
// Numeric*, Date*, Bool, IpAddress/NotIpAddress, Arn{Equals,Like,NotEquals,NotLike}
// (matched like the String forms), every …IfExists form, and Null. Several
// values of one key OR together (NOR for negated operators); several keys
// and operators AND. A key the request lacks makes an operator false,
// except negated operators and …IfExists (true) and Null. Condition key
// names are case-insensitive (the tag key of aws:ResourceTag/<key> too),
// values case-sensitive. The multi-valued aws:TagKeys takes the set
// operators ForAnyValue: (some value passes; absent: false) and
// ForAllValues: (every value passes; absent: true) with the String and Arn
// operators, or Null; single-valued keys take the plain operators only.
// Explicit Deny beats Allow; no Allow is an implicit deny. Not supported
// (load-time errors): condition keys mce never sets, policy variables
// (${…}), Principal/NotPrincipal (identity policies have none). With
// Config.Targets (what the host authorizes on which resources), a
// statement whose Action and Resource can never name both is reported
// (Warnings, logged at each load): it can never apply.
//
// # Custom Rego
//
// Modules given in Config.RegoPaths must be in package mce.custom (helpers
// may use packages below it, e.g. mce.custom.lib); *_test.rego files are
// skipped at load and run by RunRegoTests (mce policy test). The input is:
//
//	input.principal   {"arn", "access_key_id", "username", "anonymous"}
//	input.action      "sagemaker:InvokeEndpoint"
//	input.resource    "arn:aws:sagemaker:us-east-1:123456789012:endpoint/ep"
//	input.context     condition keys, LOWER-CASED, → string values
//	                  (e.g. input.context["sagemaker:targetmodel"]);
//	                  multi-valued keys (aws:tagkeys) → arrays of strings
//	input.source_ip   "127.0.0.1" or ""
//	input.time        RFC 3339
//	input.iam         the IAM result: {"allowed", "explicit_deny",
//	                  "allow_by": [statement ids], "deny_by": [statement ids]}
//	input.mce         internal; do not use
//
// and two rules decide, both optional:
//
//	deny contains msg if { … }   # a set of strings: any message denies (explicit
//	                             # deny), whatever IAM says
//	allow if { … }               # boolean: allows what IAM does not allow, unless
//	                             # IAM or deny explicitly denies it
//
// So the final decision is: explicit deny if an IAM Deny statement applies
// or deny is not empty; otherwise allow if an IAM Allow statement applies
// or allow is true; otherwise implicit deny. Custom Rego alone (no IAM
// documents) is enough to decide. http.send and net.lookup_ip_addr are not
// available: a decision must not wait on the network.
//
// # Evaluation and cost
//
// The IAM rules are Rego (rego/iam.rego, embedded); the documents become
// data (data.mce.sets, one entry per principal, statements indexed by exact
// action) and the query is prepared once per policy generation. With no
// custom Rego the query is data.mce.iam.matched and the Go side applies
// "explicit deny beats allow" exactly as data.mce.iam.allowed does (a test
// holds them equal); with custom Rego it is data.mce.authz.decision_custom.
// An evaluation costs roughly 20 µs plus 10–20 µs per statement that can
// apply to the action (BenchmarkAuthorize), so decisions are cached per
// policy generation (Config.DecisionCache) under a key made of everything
// the principal's statements can read; a cached decision costs about 1 µs.
// Decisions that involve custom Rego are never cached.
//
// # Modes
//
// With no policies at all (no statements, no custom Rego) Enabled is false
// and Authorize allows everything. With no credentials file Authenticate
// verifies nothing and every caller is anonymous. Reload (and Watch, which
// polls the files every second) replaces the policies atomically; a bad
// file leaves the previous generation in force. A reload never switches
// policies off: a file that becomes empty or unreadable, a credentials file
// left with no access keys, or files that configure no policy any more
// keep the previous generation (ErrReloadRefused); only a restart can start
// without policies, and mce serve then checks its listener again. A reload
// applies only files that held still while read: it reads them, waits
// Config.ReloadSettle and reads them again, and starts over if one changed
// (a write in progress). Files other than regular files (FIFOs, devices)
// are refused without blocking. Rewrite a file by renaming a new one over
// it.
package authz
