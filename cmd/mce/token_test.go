package main

import (
	"context"
	"errors"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rs/zerolog"

	"github.com/mce-run/mce/authz"
)

// mce token makes a token mce's authorizer takes for the key in the
// environment; it refuses lifetimes past 12 hours and a missing key.
func TestTokenCommand(t *testing.T) {
	dir := t.TempDir()
	creds := filepath.Join(dir, "creds.yaml")
	os.WriteFile(creds, []byte("Credentials:\n  - AccessKeyId: AKIATOKENCMDEXAMPLE\n    SecretAccessKey: token-cmd-secret\n    Arn: arn:aws:iam::123456789012:user/cmd\n"), 0o600)
	a, err := authz.Load(context.Background(), authz.Config{CredentialsFile: creds, Region: "eu-west-1", Logger: zerolog.Nop()})
	if err != nil {
		t.Fatal(err)
	}
	t.Setenv("AWS_ACCESS_KEY_ID", "AKIATOKENCMDEXAMPLE")
	t.Setenv("AWS_SECRET_ACCESS_KEY", "token-cmd-secret")
	t.Setenv("AWS_SESSION_TOKEN", "")
	t.Setenv("AWS_PROFILE", "")
	out, err := runCLIWithInput(context.Background(), "", "token", "--region", "eu-west-1", "--expires", "90m")
	if err != nil {
		t.Fatal(err)
	}
	tok := strings.TrimSpace(out)
	if !strings.HasPrefix(tok, authz.BearerPrefix) || strings.Count(out, "\n") != 1 {
		t.Fatalf("printed %q", out)
	}
	r, _ := http.NewRequest(http.MethodPost, "http://127.0.0.1/", nil)
	r.Header.Set("Authorization", "Bearer "+tok)
	if p, err := a.AuthenticateBearer(r); err != nil || p.ARN != "arn:aws:iam::123456789012:user/cmd" {
		t.Fatalf("AuthenticateBearer = %+v, %v", p, err)
	}
	var ee *exitError
	if _, err := runCLIWithInput(context.Background(), "", "token", "--expires", "13h"); !errors.As(err, &ee) || ee.code != 2 {
		t.Errorf("--expires 13h: %v", err)
	}
	t.Setenv("AWS_ACCESS_KEY_ID", "")
	if _, err := runCLIWithInput(context.Background(), "", "token"); !errors.As(err, &ee) || ee.code != 2 || !strings.Contains(ee.msg, "no AWS credentials") {
		t.Errorf("no credentials: %v", err)
	}
}
