package authz

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestPolicyValidation(t *testing.T) {
	cases := []struct {
		name string
		doc  string
		want string // substring of the error, which starts FILE:LINE
	}{
		{"syntax", "{\n \"Version\": \"2012-10-17\"\n \"Statement\": []\n}", "p.json:3: invalid JSON"},
		{"truncated", "{\n \"Version\": \"2012-10-17\",\n", "p.json:3: invalid JSON"},
		{"trailing data", `{"Version": "2012-10-17", "Statement": {"Effect": "Allow", "Action": "*", "Resource": "*"}} {}`, "unexpected data after"},
		{"not an object", `[]`, "must be a JSON object"},
		{"no statement", `{"Version": "2012-10-17"}`, "Statement is required"},
		{"empty statement", `{"Statement": []}`, "Statement is empty"},
		{"bad version", `{"Version": "2020-01-01", "Statement": {"Effect": "Allow", "Action": "*", "Resource": "*"}}`, "Version must be"},
		{"unknown element", `{"Version": "2012-10-17", "Statements": []}`, `unknown policy element "Statements"`},
		{"duplicate key", "{\"Version\": \"2012-10-17\",\n\"Version\": \"2012-10-17\"}", `p.json:2: duplicate key "Version"`},
		{"bad effect", "{\"Statement\": [\n{\"Effect\": \"allow\", \"Action\": \"*\", \"Resource\": \"*\"}]}", `p.json:2: policy "p": statement 1: Effect must be`},
		{"no effect", `{"Statement": {"Action": "*", "Resource": "*"}}`, "Effect is required"},
		{"no resource", `{"Statement": {"Effect": "Allow", "Action": "*"}}`, "Resource or NotResource is required"},
		{"both actions", `{"Statement": {"Effect": "Allow", "Action": "*", "NotAction": "*", "Resource": "*"}}`, "either Action or NotAction"},
		{"principal", `{"Statement": {"Effect": "Allow", "Principal": "*", "Action": "*", "Resource": "*"}}`, "Principal is not allowed in an identity-based policy"},
		{"unknown statement element", `{"Statement": {"Sid": "X", "Effect": "Allow", "Actions": "*", "Resource": "*"}}`, `statement 1 (Sid "X"): unknown statement element "Actions"`},
		{"bad action", `{"Statement": {"Effect": "Allow", "Action": "InvokeEndpoint", "Resource": "*"}}`, `Action "InvokeEndpoint"`},
		{"bad resource", `{"Statement": {"Effect": "Allow", "Action": "*", "Resource": "endpoint/x"}}`, `want "*" or an ARN`},
		{"action not string", `{"Statement": {"Effect": "Allow", "Action": [1], "Resource": "*"}}`, "want strings"},
		{"duplicate sid", `{"Statement": [{"Sid": "A", "Effect": "Allow", "Action": "*", "Resource": "*"}, {"Sid": "A", "Effect": "Deny", "Action": "*", "Resource": "*"}]}`, `duplicate Sid "A"`},
		{"unknown operator", "{\"Statement\": {\"Sid\": \"S1\", \"Effect\": \"Allow\", \"Action\": \"*\", \"Resource\": \"*\",\n \"Condition\": {\n  \"StringLikee\": {\"sagemaker:TargetModel\": \"a\"}}}}", `p.json:3: policy "p": statement 1 (Sid "S1"): unknown condition operator "StringLikee"`},
		{"ForAnyValue numeric", `{"Statement": {"Effect": "Allow", "Action": "*", "Resource": "*", "Condition": {"ForAnyValue:NumericLessThan": {"aws:TagKeys": "1"}}}}`, "to the String and Arn operators only"},
		{"ForAllValues Null", `{"Statement": {"Effect": "Allow", "Action": "*", "Resource": "*", "Condition": {"ForAllValues:Null": {"aws:TagKeys": "true"}}}}`, "to the String and Arn operators only"},
		{"ForAnyValue unknown", `{"Statement": {"Effect": "Allow", "Action": "*", "Resource": "*", "Condition": {"ForAnyValue:StringLikeX": {"aws:TagKeys": "a"}}}}`, "unknown condition operator"},
		{"NullIfExists", `{"Statement": {"Effect": "Allow", "Action": "*", "Resource": "*", "Condition": {"NullIfExists": {"a:b": "true"}}}}`, "Null has no IfExists form"},
		{"Null value", `{"Statement": {"Effect": "Allow", "Action": "*", "Resource": "*", "Condition": {"Null": {"a:b": "yes"}}}}`, "Null takes true or false"},
		{"bad ip", `{"Statement": {"Effect": "Allow", "Action": "*", "Resource": "*", "Condition": {"IpAddress": {"aws:SourceIp": "10.0.0.0/33"}}}}`, "IPv4 or IPv6"},
		{"bad date", `{"Statement": {"Effect": "Allow", "Action": "*", "Resource": "*", "Condition": {"DateLessThan": {"aws:CurrentTime": "tomorrow"}}}}`, "ISO 8601"},
		{"bad number", `{"Statement": {"Effect": "Allow", "Action": "*", "Resource": "*", "Condition": {"NumericLessThan": {"a:b": "x"}}}}`, "want a number"},
		{"bad bool", `{"Statement": {"Effect": "Allow", "Action": "*", "Resource": "*", "Condition": {"Bool": {"a:b": "yes"}}}}`, "Bool takes true or false"},
		{"bad key", `{"Statement": {"Effect": "Allow", "Action": "*", "Resource": "*", "Condition": {"StringEquals": {"TargetModel": "x"}}}}`, `condition key "TargetModel"`},
		{"empty operator", `{"Statement": {"Effect": "Allow", "Action": "*", "Resource": "*", "Condition": {"StringEquals": {}}}}`, "want an object of condition keys"},
		{"object value", `{"Statement": {"Effect": "Allow", "Action": "*", "Resource": "*", "Condition": {"StringEquals": {"a:b": {"c": 1}}}}}`, "want a string, number or boolean"},
		{"policy variable", `{"Statement": {"Effect": "Allow", "Action": "*", "Resource": "arn:aws:sagemaker:*:*:endpoint/${aws:username}"}}`, "policy variables"},
		{"too deep", `{"Statement": ` + strings.Repeat("[", 20) + strings.Repeat("]", 20) + `}`, "nested deeper"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := parsePolicyJSON("p", "p.json", []byte(c.doc))
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("got %v, want an error containing %q", err, c.want)
			}
			if !strings.HasPrefix(err.Error(), "p.json:") {
				t.Fatalf("error does not name the file: %v", err)
			}
		})
	}
}

func TestPolicyAccepted(t *testing.T) {
	for _, doc := range []string{
		`{"Statement": {"Effect": "Allow", "Action": "*", "Resource": "*"}}`,
		`{"Version": "2008-10-17", "Id": "x", "Statement": [{"Effect": "Deny", "NotAction": ["sagemaker:Delete*"], "NotResource": ["arn:aws:sagemaker:*:*:endpoint/x"]}]}`,
		`{"Version": "2012-10-17", "Statement": {"Effect": "Allow", "Action": "*", "Resource": "*", "Condition": {"StringEquals": {"a:b": [1, true, "x"]}, "NumericLessThanEquals": {"n:m": 3.5}, "DateLessThanIfExists": {"aws:CurrentTime": "2030-01-01T00:00:00.5+01:00"}}}}`,
	} {
		if _, err := parsePolicyJSON("p", "p.json", []byte(doc)); err != nil {
			t.Errorf("%s: %v", doc, err)
		}
	}
}

// TestLoadErrors checks that Load names the file and line of what is wrong
// in the credentials file, the policies file and Rego modules.
func TestLoadErrors(t *testing.T) {
	write := func(t *testing.T, dir, name, content string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	cases := []struct {
		name  string
		files map[string]string
		cfg   func(dir string) Config
		want  string
	}{
		{"policy file referenced by credentials", map[string]string{
			"creds.yaml": "Credentials:\n  - AccessKeyId: A\n    SecretAccessKey: s\n    Arn: arn:aws:iam::1:user/a\n    Policies: [bad.json]\n",
			"bad.json":   "{\"Statement\": {\"Effect\": \"Allow\", \"Action\": \"*\", \"Resource\": \"*\",\n\"Condition\": {\"StringLikeX\": {\"a:b\": \"c\"}}}}",
		}, func(d string) Config { return Config{CredentialsFile: filepath.Join(d, "creds.yaml")} }, `bad.json:2: policy "bad.json": statement 1: unknown condition operator "StringLikeX"`},
		{"inline YAML document", map[string]string{
			"creds.yaml": "Credentials:\n  - AccessKeyId: A\n    SecretAccessKey: s\n    Arn: arn:aws:iam::1:user/a\n    Policies:\n      - Name: x\n        Document:\n          Statement:\n            Effect: Allow\n            Action: '*'\n            Resourcex: '*'\n",
		}, func(d string) Config { return Config{CredentialsFile: filepath.Join(d, "creds.yaml")} }, `creds.yaml:11: policy "x": statement 1: unknown statement element "Resourcex"`},
		{"unknown credentials field", map[string]string{
			"creds.yaml": "Credentials:\n  - AccessKeyId: A\n    Secret: s\n",
		}, func(d string) Config { return Config{CredentialsFile: filepath.Join(d, "creds.yaml")} }, "field Secret not found"},
		{"missing ARN", map[string]string{
			"creds.yaml": "Credentials:\n  - AccessKeyId: A\n    SecretAccessKey: s\n",
		}, func(d string) Config { return Config{CredentialsFile: filepath.Join(d, "creds.yaml")} }, "creds.yaml:2: credential 1: Arn is required"},
		{"duplicate key id", map[string]string{
			"creds.yaml": "Credentials:\n  - {AccessKeyId: A, SecretAccessKey: s, Arn: 'arn:aws:iam::1:user/a'}\n  - {AccessKeyId: A, SecretAccessKey: t, Arn: 'arn:aws:iam::1:user/b'}\n",
		}, func(d string) Config { return Config{CredentialsFile: filepath.Join(d, "creds.yaml")} }, `creds.yaml:3: credential 2: AccessKeyId "A" appears twice`},
		{"attach unknown policy", map[string]string{
			"pol.yaml": "Policies: {}\nAttach:\n  '*': [nope]\n",
		}, func(d string) Config { return Config{PoliciesFile: filepath.Join(d, "pol.yaml")} }, `no policy named "nope"`},
		{"missing policy file", map[string]string{
			"pol.yaml": "Policies:\n  a: missing.json\n",
		}, func(d string) Config { return Config{PoliciesFile: filepath.Join(d, "pol.yaml")} }, "missing.json: no such file"},
		{"condition key mce never sets", map[string]string{
			"pol.yaml": "Policies:\n  p: p.json\nAttach:\n  '*': [p]\n",
			"p.json":   "{\"Statement\": {\"Effect\": \"Deny\", \"Action\": \"*\", \"Resource\": \"*\",\n\"Condition\": {\"StringEquals\":\n {\"aws:PrincipalTag/team\": \"x\"}}}}",
		}, func(d string) Config { return Config{PoliciesFile: filepath.Join(d, "pol.yaml")} }, `p.json:3: policy "p": statement p:statement[1]: condition key "aws:PrincipalTag/team": mce cannot evaluate it`},
		{"condition key mce never sets, inline in credentials", map[string]string{
			"creds.yaml": "Credentials:\n  - AccessKeyId: A\n    SecretAccessKey: s\n    Arn: arn:aws:iam::1:user/a\n    Policies:\n      - Name: x\n        Document:\n          Statement:\n            Effect: Deny\n            Action: '*'\n            Resource: '*'\n            Condition: {Bool: {aws:SecureTransport: 'false'}}\n",
		}, func(d string) Config { return Config{CredentialsFile: filepath.Join(d, "creds.yaml")} }, `creds.yaml:12: policy "x": statement x:statement[1]: condition key "aws:SecureTransport": mce cannot evaluate it`},
		{"a tag prefix without a tag key", map[string]string{
			"creds.yaml": "Credentials:\n  - AccessKeyId: A\n    SecretAccessKey: s\n    Arn: arn:aws:iam::1:user/a\n    Policies:\n      - {Statement: {Effect: Deny, Action: '*', Resource: '*', Condition: {StringEquals: {'aws:ResourceTag/': x}}}}\n",
		}, func(d string) Config { return Config{CredentialsFile: filepath.Join(d, "creds.yaml")} }, `condition key "aws:ResourceTag/": mce cannot evaluate it`},
		{"plain operator on aws:TagKeys", map[string]string{
			"creds.yaml": "Credentials:\n  - AccessKeyId: A\n    SecretAccessKey: s\n    Arn: arn:aws:iam::1:user/a\n    Policies:\n      - {Statement: {Effect: Deny, Action: '*', Resource: '*', Condition: {StringEquals: {'aws:TagKeys': x}}}}\n",
		}, func(d string) Config { return Config{CredentialsFile: filepath.Join(d, "creds.yaml")} }, `condition key "aws:TagKeys" is multi-valued: use ForAnyValue:StringEquals or ForAllValues:StringEquals`},
		{"set operator on a single-valued key", map[string]string{
			"creds.yaml": "Credentials:\n  - AccessKeyId: A\n    SecretAccessKey: s\n    Arn: arn:aws:iam::1:user/a\n    Policies:\n      - {Statement: {Effect: Deny, Action: '*', Resource: '*', Condition: {'ForAnyValue:StringEquals': {'aws:ResourceTag/env': x}}}}\n",
		}, func(d string) Config { return Config{CredentialsFile: filepath.Join(d, "creds.yaml")} }, `condition key "aws:ResourceTag/env" is single-valued: use the plain operator, not ForAnyValue:StringEquals`},
		{"rego syntax", map[string]string{
			"r/bad.rego": "package mce.custom\n\ndeny contains msg if {\n  msg := \n}\n",
		}, func(d string) Config { return Config{RegoPaths: []string{filepath.Join(d, "r")}} }, "bad.rego:5: unexpected } token"},
		{"rego compile", map[string]string{
			"r/bad.rego": "package mce.custom\n\nallow if {\n  undefined_function(1)\n}\n",
		}, func(d string) Config { return Config{RegoPaths: []string{filepath.Join(d, "r")}} }, "bad.rego:4: undefined function undefined_function"},
		{"rego package", map[string]string{
			"r/p.rego": "package mce.iam\n\nallowed := true\n",
		}, func(d string) Config { return Config{RegoPaths: []string{filepath.Join(d, "r")}} }, "p.rego:1: package mce.iam: custom Rego must be in package mce.custom"},
		{"rego deny shape", map[string]string{
			"r/p.rego": "package mce.custom\n\ndeny if true\n",
		}, func(d string) Config { return Config{RegoPaths: []string{filepath.Join(d, "r")}} }, "p.rego:3: mce.custom.deny must be a set of messages"},
		{"rego http.send refused", map[string]string{
			"r/p.rego": "package mce.custom\n\nallow if http.send({\"method\": \"get\", \"url\": \"http://127.0.0.1/\"}).status_code == 200\n",
		}, func(d string) Config { return Config{RegoPaths: []string{filepath.Join(d, "r")}} }, "p.rego:3: undefined function http.send"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			for name, content := range c.files {
				if err := os.MkdirAll(filepath.Join(dir, filepath.Dir(name)), 0o700); err != nil {
					t.Fatal(err)
				}
				write(t, dir, name, content)
			}
			_, err := Load(context.Background(), c.cfg(dir))
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("got %v\nwant an error containing %q", err, c.want)
			}
		})
	}
}

func TestLineErrorType(t *testing.T) {
	_, err := parsePolicyJSON("p", "f.json", []byte("{\n\n  \"Statement\": 1}"))
	var le *lineError
	if !errors.As(err, &le) || le.line != 3 || le.file != "f.json" {
		t.Fatalf("got %#v", err)
	}
}
