package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/spf13/cobra"

	"github.com/mce-run/mce/authz"
)

// tokenFlags are mce token's flags.
type tokenFlags struct {
	region  string
	expires time.Duration
}

func newTokenCmd() *cobra.Command {
	var f tokenFlags
	cmd := &cobra.Command{
		Use:   "token [--expires DURATION] [--region REGION]",
		Short: "Print a bearer token for the OpenAI-compatible route, made from your AWS credentials",
		Long: `token prints the bearer token SageMaker's OpenAI-compatible route takes, made from
your AWS credentials (AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, or AWS_PROFILE)
exactly as the SageMaker Python SDK's generate_token makes it: a presigned
sagemaker:CallWithBearerToken request, good for --expires (at most 12h, and never
beyond the credentials' own expiry). Nothing is sent anywhere.

Give it to an OpenAI client as its API key, with the base URL
http://HOST:PORT/endpoints/ENDPOINT/openai/v1 (docs/openai.md). The caller needs
sagemaker:CallWithBearerToken and sagemaker:InvokeEndpoint.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return printToken(cmd.Context(), f, cmd.OutOrStdout(), time.Now())
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&f.region, "region", envOr("AWS_REGION", "us-east-1"), "region the token is for (mce's --region)")
	fl.DurationVar(&f.expires, "expires", authz.MaxBearerLifetime, "how long the token is good for, 1s to 12h")
	return cmd
}

func printToken(ctx context.Context, f tokenFlags, out io.Writer, now time.Time) error {
	if f.expires < time.Second || f.expires > authz.MaxBearerLifetime {
		return &exitError{code: 2, msg: fmt.Sprintf("--expires %s: a token is good for 1s to 12h", f.expires)}
	}
	const noCreds = "no AWS credentials: set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY (or AWS_PROFILE) to a key of mce's credentials file"
	if os.Getenv("AWS_ACCESS_KEY_ID") == "" && os.Getenv("AWS_PROFILE") == "" {
		return &exitError{code: 2, msg: noCreds}
	}
	cfg, err := loadSDKConfig(ctx, f.region)
	if err != nil {
		return err
	}
	creds, err := cfg.Credentials.Retrieve(ctx)
	if err != nil || creds.AccessKeyID == "" || creds.SecretAccessKey == "" {
		return &exitError{code: 2, msg: fmt.Sprintf("%s (%v)", noCreds, err)}
	}
	life := f.expires
	if creds.CanExpire {
		left := creds.Expires.Sub(now).Truncate(time.Second)
		if left < time.Second {
			return &exitError{code: 1, msg: "the AWS credentials have expired: refresh them"}
		}
		life = min(life, left)
	}
	tok, err := authz.MakeBearerToken(ctx, creds, f.region, life, now)
	if err != nil {
		return err
	}
	_, err = fmt.Fprintln(out, tok)
	return err
}
