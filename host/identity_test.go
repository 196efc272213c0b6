package host

import (
	"context"
	"errors"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/iam"
	iamtypes "github.com/aws/aws-sdk-go-v2/service/iam/types"
	"github.com/aws/aws-sdk-go-v2/service/sagemaker"
	smtypes "github.com/aws/aws-sdk-go-v2/service/sagemaker/types"
	"github.com/aws/aws-sdk-go-v2/service/sagemakerruntime"
	"github.com/aws/aws-sdk-go-v2/service/sts"
	"github.com/aws/smithy-go"
	"github.com/rs/zerolog"
	"go.yaml.in/yaml/v3"

	"github.com/mce-run/mce/authz"
	"github.com/mce-run/mce/internal/sdkhttp"
)

func (h *harness) sts(creds aws.CredentialsProvider) *sts.Client {
	return sts.New(sts.Options{Region: "us-east-1", BaseEndpoint: aws.String(h.http.URL),
		Credentials: creds, HTTPClient: &sdkhttp.Client{Next: h.http.Client()}})
}

func (h *harness) iam(creds aws.CredentialsProvider) *iam.Client {
	return iam.New(iam.Options{Region: "us-east-1", BaseEndpoint: aws.String(h.http.URL),
		Credentials: creds, HTTPClient: &sdkhttp.Client{Next: h.http.Client()}})
}

func (h *harness) sagemaker(creds aws.CredentialsProvider) *sagemaker.Client {
	return sagemaker.New(sagemaker.Options{Region: "us-east-1", BaseEndpoint: aws.String(h.http.URL),
		Credentials: creds, HTTPClient: &sdkhttp.Client{Next: h.http.Client()}})
}

// identityFiles writes a credentials file with an IAM user, a notebook's
// assumed-role session whose role has a path and policies attached in the
// policies file, and a user who may not simulate.
func identityFiles(t *testing.T) authz.Config {
	t.Helper()
	dir := t.TempDir()
	cred := filepath.Join(dir, "credentials.yaml")
	pol := filepath.Join(dir, "policies.yaml")
	write := func(p, s string) {
		if err := os.WriteFile(p, []byte(s), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write(cred, `
Credentials:
  - {AccessKeyId: AKIAALICE0000EXAMPLE, SecretAccessKey: alice-secret, Arn: "arn:aws:iam::123456789012:user/team/alice",
     Policies: [{Name: alice, Document: {Statement: [
       {Sid: Read, Effect: Allow, Action: ["sagemaker:Describe*", "iam:GetRole", "iam:SimulatePrincipalPolicy"], Resource: "*"},
       {Sid: NoSpecial, Effect: Deny, Action: "sagemaker:InvokeEndpoint", Resource: "*", Condition: {StringLike: {sagemaker:TargetContainerHostname: "special*"}}}]}}]}
  - {AccessKeyId: ASIANOTEBOOK0EXAMPLE, SecretAccessKey: notebook-secret, SessionToken: notebook-token,
     Arn: "arn:aws:sts::123456789012:assumed-role/SageMakerExecution/studio-user",
     Policies: [{Name: session-listed, Document: {Statement: {Sid: Invoke, Effect: Allow, Action: "sagemaker:InvokeEndpoint", Resource: "*"}}}]}
  - {AccessKeyId: AKIANOBODY000EXAMPLE, SecretAccessKey: nobody-secret, Arn: "arn:aws:iam::123456789012:user/nobody"}
`)
	write(pol, `
Policies:
  execution:
    Statement:
      - {Sid: Serve, Effect: Allow, Action: ["sagemaker:*", "ecr:GetAuthorizationToken", "iam:GetRole", "iam:SimulatePrincipalPolicy"], Resource: "*"}
      - {Sid: OwnRoleOnly, Effect: Deny, Action: "sagemaker:DeleteEndpoint", Resource: "*", Condition: {StringNotEquals: {aws:PrincipalArn: "arn:aws:iam::123456789012:role/service-role/SageMakerExecution"}}}
Attach:
  "arn:aws:iam::123456789012:role/service-role/SageMakerExecution": [execution]
`)
	return authz.Config{CredentialsFile: cred, PoliciesFile: pol, Region: "us-east-1", Logger: zerolog.Nop()}
}

func errCode(err error) string {
	var ae smithy.APIError
	if errors.As(err, &ae) {
		return ae.ErrorCode()
	}
	return ""
}

// TestIdentityAnswersTheCaller: STS's GetCallerIdentity and IAM's GetRole
// answer, through aws-sdk-go-v2's own clients, for the principal of the
// access key that signed — an IAM user, or a notebook's assumed-role session
// whose role (with its path) IAM returns, trusted by SageMaker — and what
// the files do not name is not found.
func TestIdentityAnswersTheCaller(t *testing.T) {
	a, err := authz.Load(context.Background(), identityFiles(t))
	if err != nil {
		t.Fatal(err)
	}
	h := newHarness(t, Config{Authz: a})
	ctx := context.Background()
	alice := credentials.NewStaticCredentialsProvider("AKIAALICE0000EXAMPLE", "alice-secret", "")
	notebook := credentials.NewStaticCredentialsProvider("ASIANOTEBOOK0EXAMPLE", "notebook-secret", "notebook-token")

	id, err := h.sts(alice).GetCallerIdentity(ctx, &sts.GetCallerIdentityInput{})
	if err != nil {
		t.Fatal(err)
	}
	if aws.ToString(id.Arn) != "arn:aws:iam::123456789012:user/team/alice" || aws.ToString(id.Account) != "123456789012" ||
		!strings.HasPrefix(aws.ToString(id.UserId), "AIDA") || len(aws.ToString(id.UserId)) != 21 {
		t.Errorf("alice: %s %s %s", aws.ToString(id.Arn), aws.ToString(id.Account), aws.ToString(id.UserId))
	}
	id, err = h.sts(notebook).GetCallerIdentity(ctx, &sts.GetCallerIdentityInput{})
	if err != nil {
		t.Fatal(err)
	}
	if aws.ToString(id.Arn) != "arn:aws:sts::123456789012:assumed-role/SageMakerExecution/studio-user" ||
		!strings.HasPrefix(aws.ToString(id.UserId), "AROA") || !strings.HasSuffix(aws.ToString(id.UserId), ":studio-user") {
		t.Errorf("notebook: %s %s", aws.ToString(id.Arn), aws.ToString(id.UserId))
	}
	if _, err := h.sts(aws.AnonymousCredentials{}).GetCallerIdentity(ctx, &sts.GetCallerIdentityInput{}); errCode(err) != "MissingAuthenticationToken" {
		t.Errorf("unsigned GetCallerIdentity: %v, want MissingAuthenticationToken", err)
	}
	wrong := credentials.NewStaticCredentialsProvider("AKIAALICE0000EXAMPLE", "not-the-secret", "")
	if _, err := h.sts(wrong).GetCallerIdentity(ctx, &sts.GetCallerIdentityInput{}); errCode(err) != "SignatureDoesNotMatch" {
		t.Errorf("bad signature: %v, want SignatureDoesNotMatch", err)
	}

	// A form is signed for the service of its Version: STS's signed for
	// iam, and CloudWatch's signed for sts, are refused.
	for _, c := range []struct{ service, form, want string }{
		{"iam", "Action=GetCallerIdentity&Version=2011-06-15", "SignatureDoesNotMatch"},
		{"sts", "Action=ListMetrics&Version=2010-08-01", "SignatureDoesNotMatch"},
		{"monitoring", "Action=GetRole&Version=2010-05-08&RoleName=SageMakerExecution", "SignatureDoesNotMatch"},
	} {
		status, body := signedForm(t, h, c.service, c.form, "AKIAALICE0000EXAMPLE", "alice-secret")
		if status != 403 || !strings.Contains(body, "<Code>"+c.want+"</Code>") {
			t.Errorf("%s signed for %s: %d %s, want 403 %s", c.form, c.service, status, body, c.want)
		}
	}

	// The SDK's get_execution_role: the session's role name, then GetRole
	// for its path-qualified ARN and trust policy.
	role, err := h.iam(notebook).GetRole(ctx, &iam.GetRoleInput{RoleName: aws.String("SageMakerExecution")})
	if err != nil {
		t.Fatal(err)
	}
	r := role.Role
	if aws.ToString(r.Arn) != "arn:aws:iam::123456789012:role/service-role/SageMakerExecution" || aws.ToString(r.Path) != "/service-role/" ||
		!strings.HasPrefix(aws.ToString(r.RoleId), "AROA") || r.CreateDate == nil {
		t.Errorf("GetRole: %+v", r)
	}
	trust, err := url.QueryUnescape(aws.ToString(r.AssumeRolePolicyDocument))
	if err != nil || !strings.Contains(trust, `"Service":"sagemaker.amazonaws.com"`) || !strings.Contains(trust, `"sts:AssumeRole"`) {
		t.Errorf("trust policy %q: %v", trust, err)
	}
	// Role names are case-insensitive in IAM.
	if _, err := h.iam(alice).GetRole(ctx, &iam.GetRoleInput{RoleName: aws.String("sagemakerexecution")}); err != nil {
		t.Errorf("GetRole in another case: %v", err)
	}
	var nse *iamtypes.NoSuchEntityException
	if _, err := h.iam(alice).GetRole(ctx, &iam.GetRoleInput{RoleName: aws.String("Admin")}); !errors.As(err, &nse) {
		t.Errorf("GetRole of a role no file names: %v, want NoSuchEntity", err)
	}
	if _, err := h.iam(alice).GetRole(ctx, &iam.GetRoleInput{RoleName: aws.String("bad/name")}); errCode(err) != "ValidationError" {
		t.Errorf("GetRole with a bad name: %v, want ValidationError", err)
	}
	nobody := credentials.NewStaticCredentialsProvider("AKIANOBODY000EXAMPLE", "nobody-secret", "")
	if _, err := h.iam(nobody).GetRole(ctx, &iam.GetRoleInput{RoleName: aws.String("SageMakerExecution")}); errCode(err) != "AccessDenied" {
		t.Errorf("GetRole without iam:GetRole: %v, want AccessDenied", err)
	}
	// The role's policies are its sessions': the notebook may delete an
	// endpoint (allowed to the role, and the Deny's aws:PrincipalArn is the
	// role's ARN, not the session's), and v3's check of a serving role —
	// ecr:GetAuthorizationToken simulated on the role — is allowed.
	_, err = h.sagemaker(notebook).DeleteEndpoint(ctx, &sagemaker.DeleteEndpointInput{EndpointName: aws.String("nothere")})
	if code := errCode(err); code == "AccessDeniedException" || code == "" {
		t.Errorf("the notebook's DeleteEndpoint: %v, want allowed (not found)", err)
	}
	sim, err := h.iam(notebook).SimulatePrincipalPolicy(ctx, &iam.SimulatePrincipalPolicyInput{PolicySourceArn: r.Arn,
		ActionNames: []string{"ecr:GetAuthorizationToken", "sagemaker:DeleteEndpoint", "s3:GetObject"}})
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]iamtypes.PolicyEvaluationDecisionType{}
	for _, res := range sim.EvaluationResults {
		got[aws.ToString(res.EvalActionName)] = res.EvalDecision
	}
	if got["ecr:GetAuthorizationToken"] != "allowed" || got["sagemaker:DeleteEndpoint"] != "allowed" || got["s3:GetObject"] != "implicitDeny" {
		t.Errorf("simulated on the role: %v", got)
	}
	// The role's policies name aws:PrincipalArn, which mce sets itself:
	// nothing is missing. Alice's name sagemaker:TargetContainerHostname,
	// which a simulation without it lacks.
	if missing := sim.EvaluationResults[0].MissingContextValues; len(missing) != 0 {
		t.Errorf("simulated on the role: missing %v, want none (mce sets aws:PrincipalArn)", missing)
	}
	bare, err := h.iam(notebook).SimulatePrincipalPolicy(ctx, &iam.SimulatePrincipalPolicyInput{PolicySourceArn: aws.String("arn:aws:iam::123456789012:user/team/alice"),
		ActionNames: []string{"sagemaker:InvokeEndpoint"}})
	if err != nil {
		t.Fatal(err)
	}
	if missing := bare.EvaluationResults[0].MissingContextValues; len(missing) != 1 || missing[0] != "sagemaker:targetcontainerhostname" {
		t.Errorf("alice without context: missing %v, want [sagemaker:targetcontainerhostname]", missing)
	}
	sim, err = h.iam(notebook).SimulatePrincipalPolicy(ctx, &iam.SimulatePrincipalPolicyInput{PolicySourceArn: aws.String("arn:aws:iam::123456789012:user/team/alice"),
		ActionNames:    []string{"sagemaker:InvokeEndpoint"},
		ContextEntries: []iamtypes.ContextEntry{{ContextKeyName: aws.String("sagemaker:TargetContainerHostname"), ContextKeyValues: []string{"special1"}, ContextKeyType: iamtypes.ContextKeyTypeEnumString}}})
	if err != nil {
		t.Fatal(err)
	}
	if res := sim.EvaluationResults[0]; res.EvalDecision != "explicitDeny" || len(res.MatchedStatements) == 0 || !strings.Contains(aws.ToString(res.MatchedStatements[0].SourcePolicyId), "NoSpecial") {
		t.Errorf("alice invoking special1: %s %+v, want explicitDeny by NoSpecial", res.EvalDecision, res.MatchedStatements)
	}
	if _, err := h.iam(notebook).SimulatePrincipalPolicy(ctx, &iam.SimulatePrincipalPolicyInput{PolicySourceArn: aws.String("arn:aws:iam::123456789012:user/mallory"),
		ActionNames: []string{"sagemaker:InvokeEndpoint"}}); !errors.As(err, &nse) {
		t.Errorf("simulating a user no file names: %v, want NoSuchEntity", err)
	}
	if _, err := h.iam(nobody).SimulatePrincipalPolicy(ctx, &iam.SimulatePrincipalPolicyInput{PolicySourceArn: r.Arn,
		ActionNames: []string{"sagemaker:InvokeEndpoint"}}); errCode(err) != "AccessDenied" {
		t.Errorf("simulating without iam:SimulatePrincipalPolicy: %v, want AccessDenied", err)
	}
	// Everything else of IAM and STS is refused, saying so.
	_, err = h.iam(alice).CreateRole(ctx, &iam.CreateRoleInput{RoleName: aws.String("x"), AssumeRolePolicyDocument: aws.String("{}")})
	if errCode(err) != "InvalidAction" || !strings.Contains(err.Error(), "mce does not serve IAM's") {
		t.Errorf("CreateRole: %v, want InvalidAction saying mce does not serve it", err)
	}
	_, err = h.sts(alice).AssumeRole(ctx, &sts.AssumeRoleInput{RoleArn: r.Arn, RoleSessionName: aws.String("s")})
	if errCode(err) != "InvalidAction" || !strings.Contains(err.Error(), "mce does not serve STS's AssumeRole") {
		t.Errorf("AssumeRole: %v, want InvalidAction saying mce does not serve it", err)
	}
}

// TestIdentityLocal: without policies mce verifies nothing, and STS answers
// the fixed local identity, a session of the role mce-local of the host's
// account, which GetRole returns; any role of the account answers too, and
// SimulatePrincipalPolicy allows everything — as mce then decides.
func TestIdentityLocal(t *testing.T) {
	h := newHarness(t, Config{Account: "111122223333"})
	ctx := context.Background()
	creds := credentials.NewStaticCredentialsProvider("AKIAANYTHING", "anything", "")
	id, err := h.sts(creds).GetCallerIdentity(ctx, &sts.GetCallerIdentityInput{})
	if err != nil {
		t.Fatal(err)
	}
	if aws.ToString(id.Arn) != "arn:aws:sts::111122223333:assumed-role/mce-local/mce" || aws.ToString(id.Account) != "111122223333" {
		t.Errorf("local identity %s %s", aws.ToString(id.Arn), aws.ToString(id.Account))
	}
	for _, name := range []string{"mce-local", "AnyRole"} {
		role, err := h.iam(creds).GetRole(ctx, &iam.GetRoleInput{RoleName: aws.String(name)})
		if err != nil {
			t.Fatal(err)
		}
		if aws.ToString(role.Role.Arn) != "arn:aws:iam::111122223333:role/"+name {
			t.Errorf("GetRole %s: %s", name, aws.ToString(role.Role.Arn))
		}
	}
	sim, err := h.iam(creds).SimulatePrincipalPolicy(ctx, &iam.SimulatePrincipalPolicyInput{
		PolicySourceArn: aws.String("arn:aws:iam::111122223333:role/mce-local"), ActionNames: []string{"ecr:GetAuthorizationToken", "sagemaker:CreateModel"}})
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range sim.EvaluationResults {
		if r.EvalDecision != iamtypes.PolicyEvaluationDecisionTypeAllowed {
			t.Errorf("%s: %s, want allowed (nothing is checked)", aws.ToString(r.EvalActionName), r.EvalDecision)
		}
	}
}

// TestSimulateAgreesWithAuthorizer is the promise of SimulatePrincipalPolicy:
// over the policy fixtures (examples/authz, authz/testdata and the files of
// identityFiles), for every principal they name, many actions, resources
// and condition keys, the EvalDecision that aws-sdk-go-v2's IAM client gets
// from mce is what the authorizer decides for the same request; and a real
// control-plane call signed by that principal is refused exactly when the
// simulation says it is not allowed.
func TestSimulateAgreesWithAuthorizer(t *testing.T) {
	fixtures := map[string]authz.Config{
		"examples/authz": {CredentialsFile: "../examples/authz/credentials.yaml", PoliciesFile: "../examples/authz/policies.yaml", Region: "us-east-1", Logger: zerolog.Nop()},
		"authz/testdata": {CredentialsFile: "../authz/testdata/credentials.yaml", PoliciesFile: "../authz/testdata/policies.yaml", Region: "us-east-1", Logger: zerolog.Nop()},
		"identity":       identityFiles(t),
	}
	actions := []string{"sagemaker:InvokeEndpoint", "sagemaker:CreateModel", "sagemaker:DescribeEndpoint", "sagemaker:DeleteEndpoint",
		"sagemaker:ListEndpoints", "sagemaker:UpdateEndpoint", "cloudwatch:GetMetricData", "ecr:GetAuthorizationToken", "iam:GetRole"}
	resources := []string{"*", "arn:aws:sagemaker:us-east-1:123456789012:endpoint/my-mce", "arn:aws:sagemaker:us-east-1:123456789012:endpoint/my-mme",
		"arn:aws:sagemaker:us-east-1:123456789012:model/m"}
	contexts := []map[string]string{
		{},
		{"sagemaker:TargetContainerHostname": "customIps1"},
		{"sagemaker:TargetContainerHostname": "special7"},
		{"sagemaker:TargetModel": "company_a/model.tar.gz"},
		{"sagemaker:TargetModel": "company_b/model.tar.gz"},
		{"aws:SourceIp": "10.1.2.3"},
	}
	ctx := context.Background()
	compared, denied := 0, 0
	for name, cfg := range fixtures {
		cfg, auditor := withAuditor(t, cfg)
		a, err := authz.Load(ctx, cfg)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		h := newHarness(t, Config{Authz: a})
		keys := accessKeys(t, cfg.CredentialsFile)
		var principals []string
		for _, k := range keys {
			principals = append(principals, k.arn)
		}
		for _, r := range a.Roles() {
			principals = append(principals, r.ARN)
		}
		caller := h.iam(credentials.NewStaticCredentialsProvider(auditor.id, auditor.secret, ""))
		for _, p := range principals {
			for _, c := range contexts {
				in := &iam.SimulatePrincipalPolicyInput{PolicySourceArn: aws.String(p), ActionNames: actions, ResourceArns: resources, MaxItems: aws.Int32(7)}
				for k, v := range c {
					in.ContextEntries = append(in.ContextEntries, iamtypes.ContextEntry{ContextKeyName: aws.String(k),
						ContextKeyValues: []string{v}, ContextKeyType: iamtypes.ContextKeyTypeEnumString})
				}
				var results []iamtypes.EvaluationResult
				pages := iam.NewSimulatePrincipalPolicyPaginator(caller, in)
				for pages.HasMorePages() {
					page, err := pages.NextPage(ctx)
					if err != nil {
						t.Fatalf("%s: simulate %s: %v", name, p, err)
					}
					results = append(results, page.EvaluationResults...)
				}
				if len(results) != len(actions)*len(resources) {
					t.Fatalf("%s: %d results over the pages, want %d", name, len(results), len(actions)*len(resources))
				}
				for _, res := range results {
					ai := authz.Input{Principal: authz.PrincipalFromARN(p), Action: aws.ToString(res.EvalActionName), Resource: aws.ToString(res.EvalResourceName),
						Context: c, SourceIP: c["aws:SourceIp"]}
					d, err := a.Authorize(ctx, ai)
					if err != nil {
						t.Fatal(err)
					}
					want := "implicitDeny"
					if d.Allowed {
						want = "allowed"
					} else if d.ExplicitDeny {
						want = "explicitDeny"
					}
					if string(res.EvalDecision) != want {
						t.Errorf("%s: %s %s on %s with %v: simulated %s, the authorizer decides %s", name, p, ai.Action, ai.Resource, c, res.EvalDecision, want)
					}
					compared++
					if !d.Allowed {
						denied++
					}
				}
			}
		}
		// Real calls, signed by each access key from loopback: DescribeEndpoint
		// of an endpoint that does not exist is refused as AccessDenied
		// exactly when the simulation denies it, else not found.
		for _, k := range keys {
			sim, err := caller.SimulatePrincipalPolicy(ctx, &iam.SimulatePrincipalPolicyInput{PolicySourceArn: aws.String(k.arn),
				ActionNames: []string{"sagemaker:DescribeEndpoint"}, ResourceArns: []string{"arn:aws:sagemaker:us-east-1:123456789012:endpoint/nothere"},
				ContextEntries: []iamtypes.ContextEntry{{ContextKeyName: aws.String("aws:SourceIp"), ContextKeyValues: []string{"127.0.0.1"}, ContextKeyType: iamtypes.ContextKeyTypeEnumIp}}})
			if err != nil {
				t.Fatal(err)
			}
			_, err = h.sagemaker(credentials.NewStaticCredentialsProvider(k.id, k.secret, k.token)).DescribeEndpoint(ctx, &sagemaker.DescribeEndpointInput{EndpointName: aws.String("nothere")})
			got := errCode(err)
			if allowed := sim.EvaluationResults[0].EvalDecision == iamtypes.PolicyEvaluationDecisionTypeAllowed; allowed == (got == "AccessDeniedException") {
				t.Errorf("%s: %s DescribeEndpoint: simulated %s, the call answered %v", name, k.arn, sim.EvaluationResults[0].EvalDecision, err)
			}
		}
	}
	if compared < 1000 || denied == 0 || denied == compared {
		t.Fatalf("compared %d decisions, %d denied: the fixtures must give both answers", compared, denied)
	}
	t.Logf("%d simulated decisions agree with the authorizer (%d denied)", compared, denied)
}

type testKey struct{ id, secret, token, arn string }

// accessKeys reads a credentials file's keys (the test's own reading).
func accessKeys(t *testing.T, path string) []testKey {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var f struct {
		Credentials []struct {
			AccessKeyID     string `yaml:"AccessKeyId"`
			SecretAccessKey string `yaml:"SecretAccessKey"`
			SessionToken    string `yaml:"SessionToken"`
			Arn             string `yaml:"Arn"`
		} `yaml:"Credentials"`
	}
	if err := yaml.Unmarshal(b, &f); err != nil {
		t.Fatal(err)
	}
	var out []testKey
	for _, c := range f.Credentials {
		out = append(out, testKey{c.AccessKeyID, c.SecretAccessKey, c.SessionToken, c.Arn})
	}
	return out
}

// withAuditor copies a fixture's folder and adds an access key that may
// call iam:SimulatePrincipalPolicy, the caller of the simulations (no
// fixture's principal may); it changes nothing for the others.
func withAuditor(t *testing.T, cfg authz.Config) (authz.Config, *testKey) {
	t.Helper()
	dir := t.TempDir()
	if err := os.CopyFS(dir, os.DirFS(filepath.Dir(cfg.CredentialsFile))); err != nil {
		t.Fatal(err)
	}
	cred := filepath.Join(dir, filepath.Base(cfg.CredentialsFile))
	b, err := os.ReadFile(cred)
	if err != nil {
		t.Fatal(err)
	}
	const auditor = "  - {AccessKeyId: AKIAAUDITOR00EXAMPLE, SecretAccessKey: auditor-secret, Arn: \"arn:aws:iam::123456789012:user/auditor\",\n" +
		"     Policies: [{Name: audit, Document: {Statement: {Effect: Allow, Action: \"iam:SimulatePrincipalPolicy\", Resource: \"*\"}}}]}\n"
	s := strings.Replace(string(b), "\nCredentials:\n", "\nCredentials:\n"+auditor, 1)
	if s == string(b) {
		t.Fatalf("%s: no Credentials: line", cfg.CredentialsFile)
	}
	if err := os.WriteFile(cred, []byte(s), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg.CredentialsFile = cred
	if cfg.PoliciesFile != "" {
		cfg.PoliciesFile = filepath.Join(dir, filepath.Base(cfg.PoliciesFile))
	}
	return cfg, &testKey{"AKIAAUDITOR00EXAMPLE", "auditor-secret", "", "arn:aws:iam::123456789012:user/auditor"}
}

// TestReplaySDKv3 replays, with aws-sdk-go-v2, the requests the SageMaker
// Python SDK v3 (3.20) sends when ModelBuilder or sagemaker-core deploys
// without a role given — resolve_and_validate_role(role_type "serving"):
// GetCallerIdentity, GetRole of the caller's role, SimulatePrincipalPolicy of
// that role with the serving role's smoke-test actions (paginated), GetRole
// for the trust policy — then its resources flow (CreateModel, DescribeModel,
// CreateEndpointConfig, DescribeEndpointConfig, CreateEndpoint,
// DescribeEndpoint until InService, InvokeEndpoint, the deletes), signed by a
// notebook's session of examples/authz. e2e/test_identity.py replays the same
// with boto3 and the aws CLI.
func TestReplaySDKv3(t *testing.T) {
	ctx := context.Background()
	cfg, _ := withAuditor(t, authz.Config{CredentialsFile: "../examples/authz/credentials.yaml", PoliciesFile: "../examples/authz/policies.yaml",
		Region: "us-east-1", Logger: zerolog.Nop()})
	a, err := authz.Load(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	h, _ := newICHarnessWith(t, nil, Config{Authz: a})
	notebook := credentials.NewStaticCredentialsProvider("ASIANOTEBOOK0EXAMPLE", "notebook-example-secret-key-0000000000", "notebook-example-session-token")
	id, err := h.sts(notebook).GetCallerIdentity(ctx, &sts.GetCallerIdentityInput{})
	if err != nil {
		t.Fatal(err)
	}
	caller := aws.ToString(id.Arn)
	if !strings.Contains(caller, ":assumed-role/") {
		t.Fatalf("caller %s is no role's session", caller)
	}
	roleName := strings.Split(strings.SplitN(caller, ":assumed-role/", 2)[1], "/")[0]
	iamc := h.iam(notebook)
	role, err := iamc.GetRole(ctx, &iam.GetRoleInput{RoleName: aws.String(roleName)})
	if err != nil {
		t.Fatal(err)
	}
	roleArn := aws.ToString(role.Role.Arn)
	if roleArn != "arn:aws:iam::123456789012:role/service-role/SageMakerExecution" {
		t.Fatalf("resolved role %s", roleArn)
	}
	pages := iam.NewSimulatePrincipalPolicyPaginator(iamc, &iam.SimulatePrincipalPolicyInput{PolicySourceArn: aws.String(roleArn),
		ActionNames: []string{"ecr:GetAuthorizationToken"}})
	for pages.HasMorePages() {
		page, err := pages.NextPage(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range page.EvaluationResults {
			if r.EvalDecision != iamtypes.PolicyEvaluationDecisionTypeAllowed {
				t.Fatalf("%s on the role: %s (v3 would raise RoleValidationError)", aws.ToString(r.EvalActionName), r.EvalDecision)
			}
		}
	}
	trust, err := iamc.GetRole(ctx, &iam.GetRoleInput{RoleName: aws.String(roleArn[strings.LastIndex(roleArn, "/")+1:])})
	if err != nil {
		t.Fatal(err)
	}
	doc, _ := url.QueryUnescape(aws.ToString(trust.Role.AssumeRolePolicyDocument))
	if !strings.Contains(doc, "sagemaker.amazonaws.com") {
		t.Fatalf("trust policy %s does not let SageMaker assume the role", doc)
	}

	sm := h.sagemaker(notebook)
	if _, err := sm.CreateModel(ctx, &sagemaker.CreateModelInput{ModelName: aws.String("v3-model"), ExecutionRoleArn: aws.String(roleArn),
		PrimaryContainer: &smtypes.ContainerDefinition{Image: aws.String("-m")}}); err != nil {
		t.Fatal(err)
	}
	if d, err := sm.DescribeModel(ctx, &sagemaker.DescribeModelInput{ModelName: aws.String("v3-model")}); err != nil || aws.ToString(d.ExecutionRoleArn) != roleArn {
		t.Fatalf("DescribeModel: %v", err)
	}
	if _, err := sm.CreateEndpointConfig(ctx, &sagemaker.CreateEndpointConfigInput{EndpointConfigName: aws.String("v3-config"),
		ProductionVariants: []smtypes.ProductionVariant{{VariantName: aws.String("AllTraffic"), ModelName: aws.String("v3-model"),
			InitialInstanceCount: aws.Int32(1), InstanceType: smtypes.ProductionVariantInstanceTypeMlM5Large}}}); err != nil {
		t.Fatal(err)
	}
	if _, err := sm.DescribeEndpointConfig(ctx, &sagemaker.DescribeEndpointConfigInput{EndpointConfigName: aws.String("v3-config")}); err != nil {
		t.Fatal(err)
	}
	if _, err := sm.CreateEndpoint(ctx, &sagemaker.CreateEndpointInput{EndpointName: aws.String("v3-endpoint"), EndpointConfigName: aws.String("v3-config")}); err != nil {
		t.Fatal(err)
	}
	waitStatus(t, sm, "v3-endpoint", smtypes.EndpointStatusInService)
	rt := sagemakerruntime.New(sagemakerruntime.Options{Region: "us-east-1", BaseEndpoint: aws.String(h.http.URL),
		Credentials: notebook, HTTPClient: &sdkhttp.Client{Next: h.http.Client()}})
	if _, err := rt.InvokeEndpoint(ctx, &sagemakerruntime.InvokeEndpointInput{EndpointName: aws.String("v3-endpoint"),
		Body: []byte("x"), ContentType: aws.String("text/plain")}); err != nil {
		t.Fatal(err)
	}
	if _, err := sm.DeleteEndpoint(ctx, &sagemaker.DeleteEndpointInput{EndpointName: aws.String("v3-endpoint")}); err != nil {
		t.Fatal(err)
	}
	if _, err := sm.DeleteEndpointConfig(ctx, &sagemaker.DeleteEndpointConfigInput{EndpointConfigName: aws.String("v3-config")}); err != nil {
		t.Fatal(err)
	}
	if _, err := sm.DeleteModel(ctx, &sagemaker.DeleteModelInput{ModelName: aws.String("v3-model")}); err != nil {
		t.Fatal(err)
	}
}

// signedForm posts a query-protocol form signed with SigV4 for service.
func signedForm(t *testing.T, h *harness, service, form, key, secret string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, h.http.URL+"/", strings.NewReader(form))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded; charset=utf-8")
	resp, b := h.signedDo(t, req, []byte(form), service, key, secret)
	return resp.StatusCode, string(b)
}
