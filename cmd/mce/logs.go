package main

import (
	"bufio"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"
	"github.com/spf13/cobra"

	"github.com/mce-run/mce/containers"
	"github.com/mce-run/mce/host/cloudwatchlogs"
)

type logsFlags struct {
	endpointURL string
	region      string
	container   string
	variant     string
	follow      bool
	tail        int
}

func newLogsCmd() *cobra.Command {
	var f logsFlags
	cmd := &cobra.Command{
		Use:   "logs ENDPOINT [--container HOSTNAME] [--variant VARIANT] [--tail N] [--follow]",
		Short: "Show the output of an endpoint's containers (what SageMaker sends to CloudWatch Logs)",
		Long: `logs prints what the containers of a running endpoint wrote to stdout and stderr:
the last --tail lines of each, then, with --follow, new lines as they come until
Ctrl-C or until the containers are removed. When several containers are shown, each
line starts with VARIANT/COPY/CONTAINER.

It asks mce (GET /mce/endpoints/ENDPOINT/logs, signed like every call), never the
Docker engine, so mce's policies apply: the call is authorized as CloudWatch Logs'
logs:FilterLogEvents on the endpoint's log group,
arn:aws:logs:REGION:ACCOUNT:log-group:/aws/sagemaker/Endpoints/ENDPOINT:*.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return showLogs(cmd.Context(), f, args[0], cmd.OutOrStdout(), cmd.ErrOrStderr())
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&f.endpointURL, "endpoint-url", envOr("MCE_ENDPOINT_URL", "http://127.0.0.1:8080"), "URL of the mce host (env MCE_ENDPOINT_URL)")
	fl.StringVar(&f.region, "region", envOr("AWS_REGION", "us-east-1"), "region to sign for")
	fl.StringVarP(&f.container, "container", "c", "", "only this container (ContainerHostname)")
	fl.StringVar(&f.variant, "variant", "", "only this production variant")
	fl.BoolVarP(&f.follow, "follow", "f", false, "keep printing new lines as they come")
	fl.IntVarP(&f.tail, "tail", "n", 100, fmt.Sprintf("lines of history per container, 0 to %d", containers.MaxLogTail))
	return cmd
}

// showLogs streams the logs call's JSON lines and prints them.
func showLogs(ctx context.Context, f logsFlags, endpoint string, stdout, stderr io.Writer) error {
	base, err := url.Parse(f.endpointURL)
	if err != nil || base.Scheme != "http" && base.Scheme != "https" || base.Host == "" {
		return &exitError{code: 2, msg: fmt.Sprintf("--endpoint-url %q: want http(s)://HOST:PORT", f.endpointURL)}
	}
	q := url.Values{}
	if f.container != "" {
		q.Set("container", f.container)
	}
	if f.variant != "" {
		q.Set("variant", f.variant)
	}
	q.Set("tail", strconv.Itoa(f.tail))
	if f.follow {
		q.Set("follow", "true")
	}
	u := base.JoinPath("mce", "endpoints", endpoint, "logs")
	u.RawQuery = q.Encode()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return err
	}
	if err := signRequest(ctx, req, f.region); err != nil {
		return err
	}
	// No overall time limit: a follow lasts until Ctrl-C. Connecting and
	// the answer's headers are bounded.
	cli := &http.Client{Transport: &http.Transport{ResponseHeaderTimeout: 30 * time.Second}}
	resp, err := cli.Do(req)
	if err != nil {
		if ctx.Err() != nil {
			return nil
		}
		return &exitError{code: 1, msg: apiErrorMessage(err, f.endpointURL)}
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		var e struct {
			Type    string `json:"__type"`
			Message string `json:"Message"`
		}
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
		if json.Unmarshal(b, &e) != nil || e.Type == "" {
			return &exitError{code: 1, msg: fmt.Sprintf("%s answered %s", f.endpointURL, resp.Status)}
		}
		return &exitError{code: 1, msg: e.Type + ": " + e.Message}
	}
	// mce says how many containers the answer covers: with more than
	// one, each line is prefixed with whose it is.
	prefix := resp.Header.Get(cloudwatchlogs.HeaderLogContainers) != "1"
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 4<<20)
	for sc.Scan() {
		var ev cloudwatchlogs.LogEvent
		if err := json.Unmarshal(sc.Bytes(), &ev); err != nil {
			return fmt.Errorf("reading the logs from mce: %w", err)
		}
		who := fmt.Sprintf("%s/%d/%s", ev.Variant, ev.Copy, ev.Container)
		if ev.Dropped > 0 {
			fmt.Fprintf(stderr, "mce: %d lines of %s were dropped: this client read too slowly\n", ev.Dropped, termLine(who))
		}
		if prefix {
			fmt.Fprintf(stdout, "%s | %s\n", termLine(who), termSafe(ev.Message))
		} else {
			fmt.Fprintln(stdout, termSafe(ev.Message))
		}
	}
	if err := sc.Err(); err != nil && ctx.Err() == nil {
		return fmt.Errorf("reading the logs from mce: %w", err)
	}
	return nil
}

// signRequest signs a GET with SigV4 for service sagemaker (what mce
// verifies) with the usual AWS credentials; without any, the call goes
// unsigned (anonymous), as the other commands' calls do.
func signRequest(ctx context.Context, req *http.Request, region string) error {
	cfg, err := loadSDKConfig(ctx, region)
	if err != nil {
		return err
	}
	if cfg.Credentials == nil || aws.IsCredentialsProvider(cfg.Credentials, aws.AnonymousCredentials{}) {
		return nil
	}
	creds, err := cfg.Credentials.Retrieve(ctx)
	if err != nil {
		return fmt.Errorf("AWS credentials: %w", err)
	}
	if creds.AccessKeyID == "" {
		return nil
	}
	empty := sha256.Sum256(nil)
	return v4.NewSigner().SignHTTP(ctx, creds, req, hex.EncodeToString(empty[:]), "sagemaker", region, time.Now())
}
