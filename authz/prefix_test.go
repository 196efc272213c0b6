package authz

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"testing"
)

func TestProbeUnder(t *testing.T) {
	for _, c := range []struct {
		pattern, prefix, want string
		ok                    bool
	}{
		{"arn:aws:s3:::b/p/secret", "arn:aws:s3:::b/p/", "arn:aws:s3:::b/p/secret", true},
		{"arn:aws:s3:::b/other", "arn:aws:s3:::b/p/", "", false},
		{"arn:aws:s3:::b/*", "arn:aws:s3:::b/p/", "arn:aws:s3:::b/p/", true},
		{"arn:aws:s3:::b/p/sec*", "arn:aws:s3:::b/p/", "arn:aws:s3:::b/p/sec", true},
		{"arn:aws:s3:::b/*/secret?", "arn:aws:s3:::b/p/", "arn:aws:s3:::b/p/secretx", true},
		{"arn:aws:s3:::*/p/x", "arn:aws:s3:::b/", "arn:aws:s3:::b/p/x", true},
		{"arn:aws:s3:::c/*", "arn:aws:s3:::b/", "", false},
		{"arn:aws:s3:::b/p", "arn:aws:s3:::b/p/", "", false}, // shorter than the prefix
		{"*", "arn:aws:s3:::b/p/", "arn:aws:s3:::b/p/", true},
	} {
		got, ok := probeUnder(c.pattern, c.prefix)
		if ok != c.ok || (ok && got != c.want) {
			t.Errorf("probeUnder(%q, %q) = %q, %v; want %q, %v", c.pattern, c.prefix, got, ok, c.want, c.ok)
		}
	}
}

// TestPrefixProbes: the probes of a principal name an object under the
// prefix for each of its statements' patterns that single one out there,
// and Authorize denies the one a Deny names.
func TestPrefixProbes(t *testing.T) {
	cf := filepath.Join(t.TempDir(), "creds.yaml")
	if err := os.WriteFile(cf, []byte(`
Credentials:
  - AccessKeyId: AKIADEV00000EXAMPLE
    SecretAccessKey: dev-secret
    Arn: arn:aws:iam::123456789012:user/dev
    Policies:
      - Statement:
          - {Effect: Allow, Action: "s3:*", Resource: "arn:aws:s3:::models/*"}
          - {Effect: Deny, Action: "s3:GetObject", Resource: ["arn:aws:s3:::models/team/secret.bin", "arn:aws:s3:::other/*"]}
`), 0o600); err != nil {
		t.Fatal(err)
	}
	a, err := Load(context.Background(), Config{CredentialsFile: cf})
	if err != nil {
		t.Fatal(err)
	}
	dev, _ := a.LookupAccessKey("AKIADEV00000EXAMPLE")
	got := a.PrefixProbes(dev, "arn:aws:s3:::models/team/")
	want := []string{"arn:aws:s3:::models/team/", "arn:aws:s3:::models/team/secret.bin"}
	if !slices.Equal(got, want) {
		t.Fatalf("probes = %q, want %q", got, want)
	}
	for _, r := range got {
		d, _ := a.Authorize(context.Background(), Input{Principal: dev, Action: "s3:GetObject", Resource: r})
		if d.Allowed != (r != "arn:aws:s3:::models/team/secret.bin") {
			t.Errorf("%s: allowed %v", r, d.Allowed)
		}
	}
	if got := a.PrefixProbes(dev, "arn:aws:s3:::models/public/"); !slices.Equal(got, []string{"arn:aws:s3:::models/public/"}) {
		t.Errorf("probes under another folder = %q", got)
	}
}
