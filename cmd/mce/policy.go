package main

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/mce-run/mce/authz"
	"github.com/mce-run/mce/host"
	"github.com/spf13/cobra"
)

// newPolicyCmd is `mce policy`: test custom Rego, evaluate and explain a
// decision, check policy files.
func newPolicyCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "policy",
		Short: "Test, evaluate and check authorization policies (IAM documents and Rego)",
		Long: `policy works with the files mce serve authorizes requests with: a credentials
file (access keys → principals and their IAM policies), a policies file
(named IAM policies and who has them) and custom Rego modules (package
mce.custom). See the authz package documentation and examples/authz.`,
	}
	cmd.AddCommand(newPolicyTestCmd(), newPolicyEvalCmd(), newPolicyCheckCmd())
	return cmd
}

// policyFiles are the flags that name policy files.
type policyFiles struct {
	credentials string
	policies    string
	rego        []string
	region      string
}

func (f *policyFiles) register(cmd *cobra.Command) {
	fl := cmd.Flags()
	fl.StringVar(&f.credentials, "credentials", "", "credentials file (YAML or JSON)")
	fl.StringVar(&f.policies, "policies", "", "policies file (YAML or JSON)")
	fl.StringArrayVar(&f.rego, "rego", nil, "custom Rego file or directory (repeatable; *_test.rego files are skipped)")
	fl.StringVar(&f.region, "region", "us-east-1", "region of the host (for resource ARNs built with --endpoint)")
}

func (f *policyFiles) config() authz.Config {
	return authz.Config{CredentialsFile: f.credentials, PoliciesFile: f.policies, RegoPaths: f.rego, Region: f.region}
}

func newPolicyTestCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "test [PATH...]",
		Short: "Run the Rego tests (test_* rules in *_test.rego) of custom policies",
		Long: `test runs the Rego tests found in the given files and directories (default: the
current directory) with OPA's test runner and prints PASS or FAIL for each.
Custom modules must be in package mce.custom; tests may be in any package.
The embedded IAM evaluator (data.mce.iam, data.mce.authz) is loaded too.
The exit status is 1 when a test fails or errs, or when no test is found.`,
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(args) == 0 {
				args = []string{"."}
			}
			sum, err := authz.RunRegoTests(cmd.Context(), args, cmd.OutOrStdout())
			if err != nil {
				return err
			}
			if !sum.OK() {
				return &exitError{code: 1}
			}
			return nil
		},
	}
}

type evalFlags struct {
	files       policyFiles
	principal   string
	accessKeyID string
	anonymous   bool
	action      string
	resource    string
	endpoint    string
	account     string
	context     []string
	sourceIP    string
	at          string
	jsonOut     bool
	failOnDeny  bool
}

func newPolicyEvalCmd() *cobra.Command {
	var f evalFlags
	cmd := &cobra.Command{
		Use:   "eval",
		Short: "Decide one request and explain why",
		Long: `eval loads the policy files as mce serve does, decides whether the principal may
perform the action on the resource, and prints the decision, the statement or
rule that decided it, SageMaker's AccessDenied message, and how every IAM
statement of the principal evaluated.

  mce policy eval --credentials examples/authz/credentials.yaml --policies examples/authz/policies.yaml \
      --principal arn:aws:iam::123456789012:user/alice --action sagemaker:InvokeEndpoint --endpoint my-mce \
      --context sagemaker:TargetContainerHostname=customIps-1

The exit status is 0 whatever the decision, unless --fail-on-deny.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return policyEval(cmd, f)
		},
	}
	f.files.register(cmd)
	fl := cmd.Flags()
	fl.StringVar(&f.principal, "principal", "", "principal ARN (arn:aws:iam::ACCOUNT:user/NAME)")
	fl.StringVar(&f.accessKeyID, "access-key-id", "", "principal of this access key in the credentials file")
	fl.BoolVar(&f.anonymous, "anonymous", false, "an unsigned request")
	fl.StringVar(&f.action, "action", authz.ActionInvokeEndpoint, "IAM action")
	fl.StringVar(&f.resource, "resource", "", "resource ARN")
	fl.StringVar(&f.endpoint, "endpoint", "", "endpoint name: the resource is its ARN in --region and --account")
	fl.StringVar(&f.account, "account", "123456789012", "account of --endpoint")
	fl.StringArrayVar(&f.context, "context", nil, "condition key=value (repeatable), e.g. sagemaker:TargetModel=a/m.tar.gz, aws:ResourceTag/env=prod; aws:TagKeys=K once per tag key")
	fl.StringVar(&f.sourceIP, "source-ip", "", "aws:SourceIp of the request")
	fl.StringVar(&f.at, "time", "", "request time, RFC 3339 (default now)")
	fl.BoolVar(&f.jsonOut, "json", false, "print the explanation as JSON")
	fl.BoolVar(&f.failOnDeny, "fail-on-deny", false, "exit with status 3 when the request is denied")
	return cmd
}

func policyEval(cmd *cobra.Command, f evalFlags) error {
	ctx := cmd.Context()
	a, err := authz.Load(ctx, f.files.config())
	if err != nil {
		return err
	}
	in := authz.Input{Action: f.action, Resource: f.resource, SourceIP: f.sourceIP, Context: map[string]string{}}
	switch n := countTrue(f.principal != "", f.accessKeyID != "", f.anonymous); {
	case n != 1:
		return fmt.Errorf("give exactly one of --principal, --access-key-id and --anonymous")
	case f.principal != "":
		in.Principal = authz.PrincipalFromARN(f.principal)
	case f.accessKeyID != "":
		p, ok := a.LookupAccessKey(f.accessKeyID)
		if !ok {
			return fmt.Errorf("--access-key-id %s: not in the credentials file", f.accessKeyID)
		}
		in.Principal = p
	default:
		in.Principal = authz.Principal{Anonymous: true}
	}
	switch {
	case f.resource != "" && f.endpoint != "":
		return fmt.Errorf("give --resource or --endpoint, not both")
	case f.endpoint != "":
		in.Resource = authz.EndpointARN(f.files.region, f.account, f.endpoint)
	case f.resource == "":
		return fmt.Errorf("--resource or --endpoint is required")
	}
	for _, kv := range f.context {
		k, v, ok := strings.Cut(kv, "=")
		if !ok || k == "" {
			return fmt.Errorf("--context %q: want key=value", kv)
		}
		if strings.EqualFold(k, authz.KeyTagKeys) { // multi-valued: each --context adds a value
			if in.MultiContext == nil {
				in.MultiContext = map[string][]string{}
			}
			in.MultiContext[authz.KeyTagKeys] = append(in.MultiContext[authz.KeyTagKeys], v)
			continue
		}
		in.Context[k] = v
	}
	if f.at != "" {
		t, err := time.Parse(time.RFC3339, f.at)
		if err != nil {
			return fmt.Errorf("--time: %w", err)
		}
		in.Time = t
	}
	ex, err := a.Explain(ctx, in)
	if err != nil {
		return err
	}
	out := cmd.OutOrStdout()
	if f.jsonOut {
		enc := json.NewEncoder(out)
		enc.SetIndent("", "  ")
		if err := enc.Encode(ex); err != nil {
			return err
		}
	} else {
		if !a.Enabled() {
			fmt.Fprintln(out, "no policies are configured: mce allows every request (development mode)")
		}
		if err := ex.WriteText(newTermWriter(out)); err != nil {
			return err
		}
	}
	if f.failOnDeny && !ex.Decision.Allowed {
		return &exitError{code: 3}
	}
	return nil
}

func newPolicyCheckCmd() *cobra.Command {
	var files policyFiles
	var account string
	var strict bool
	cmd := &cobra.Command{
		Use:   "check",
		Short: "Load and compile policy files, reporting the first problem with its FILE:LINE",
		Long: `check loads and compiles the policy files as mce serve does and reports the first
problem with its FILE:LINE. It also warns about each statement that can never
apply: its Action and Resource name no action mce authorizes on a resource it
authorizes that action on (a Deny of sagemaker:InvokeEndpoint on
inference-component ARNs denies nothing: invocations are authorized on the
endpoint's ARN). docs/security.md lists what mce authorizes on which ARN.
The ARNs are judged for any region and account, unless --region or --account
is given. With --strict, a warning makes the exit status 1.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg := files.config()
			region := ""
			if cmd.Flags().Changed("region") {
				region = files.region
			}
			cfg.Targets = host.AuthzTargets(region, account)
			a, err := authz.Load(cmd.Context(), cfg)
			if err != nil {
				return err
			}
			if err := writeCheck(cmd.OutOrStdout(), a); err != nil {
				return err
			}
			if strict && len(a.Warnings()) > 0 {
				return &exitError{code: 1, msg: fmt.Sprintf("%d statement(s) can never apply (--strict)", len(a.Warnings()))}
			}
			return nil
		},
	}
	files.register(cmd)
	cmd.Flags().StringVar(&account, "account", "", "account of the host the policies are for (default: any)")
	cmd.Flags().BoolVar(&strict, "strict", false, "exit with status 1 when a statement can never apply")
	return cmd
}

func writeCheck(w io.Writer, a *authz.Authorizer) error {
	tw := newTermWriter(w)
	for _, warn := range a.Warnings() {
		if _, err := fmt.Fprintln(tw, "warning: "+warn); err != nil {
			return err
		}
	}
	if !a.Enabled() {
		_, err := fmt.Fprintln(w, "ok: no policies configured (mce would allow every request)")
		return err
	}
	msg := "ok: policies load and compile"
	if n := len(a.Warnings()); n > 0 {
		msg += fmt.Sprintf(" (%d statement(s) can never apply)", n)
	}
	_, err := fmt.Fprintln(w, msg)
	return err
}

func countTrue(bs ...bool) int {
	n := 0
	for _, b := range bs {
		if b {
			n++
		}
	}
	return n
}
