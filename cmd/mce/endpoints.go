package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sagemaker"
	"github.com/aws/aws-sdk-go-v2/service/sagemaker/types"
	"github.com/spf13/cobra"
)

// clientFlags are the connection flags of the commands that call mce's API.
type clientFlags struct {
	endpointURL string
	region      string
	timeout     time.Duration
}

func (f *clientFlags) register(cmd *cobra.Command) {
	cmd.Flags().StringVar(&f.endpointURL, "endpoint-url", envOr("MCE_ENDPOINT_URL", "http://127.0.0.1:8080"), "URL of the mce host (env MCE_ENDPOINT_URL)")
	cmd.Flags().StringVar(&f.region, "region", envOr("AWS_REGION", "us-east-1"), "region to sign for")
	cmd.Flags().DurationVar(&f.timeout, "timeout", 30*time.Second, "time limit of the call")
}

func (f *clientFlags) sagemaker(ctx context.Context) (*sagemaker.Client, error) {
	cfg, err := loadSDKConfig(ctx, f.region)
	if err != nil {
		return nil, err
	}
	return sagemaker.NewFromConfig(cfg, func(o *sagemaker.Options) { o.BaseEndpoint = aws.String(f.endpointURL) }), nil
}

// run wraps a command's work with the call's time limit and a sagemaker
// client for the mce host.
func (f *clientFlags) run(fn func(ctx context.Context, cmd *cobra.Command, args []string, cli *sagemaker.Client) error) func(*cobra.Command, []string) error {
	return func(cmd *cobra.Command, args []string) error {
		ctx, cancel := context.WithTimeout(cmd.Context(), f.timeout)
		defer cancel()
		cli, err := f.sagemaker(ctx)
		if err != nil {
			return err
		}
		return fn(ctx, cmd, args, cli)
	}
}

func newEndpointsCmd() *cobra.Command {
	var f clientFlags
	cmd := &cobra.Command{
		Use:   "endpoints",
		Short: "List the endpoints and their status (ListEndpoints)",
		Args:  cobra.NoArgs,
		RunE: f.run(func(ctx context.Context, cmd *cobra.Command, _ []string, cli *sagemaker.Client) error {
			tw := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "NAME\tSTATUS\tCREATED\tMODIFIED\tFAILURE REASON")
			p := sagemaker.NewListEndpointsPaginator(cli, &sagemaker.ListEndpointsInput{SortBy: "Name", SortOrder: "Ascending"})
			for p.HasMorePages() {
				page, err := p.NextPage(ctx)
				if err != nil {
					return &exitError{code: 1, msg: apiErrorMessage(err, f.endpointURL)}
				}
				for _, e := range page.Endpoints {
					// ListEndpoints has no FailureReason: ask DescribeEndpoint for the endpoints that have one.
					reason := ""
					if e.EndpointStatus == types.EndpointStatusFailed {
						d, err := cli.DescribeEndpoint(ctx, &sagemaker.DescribeEndpointInput{EndpointName: e.EndpointName})
						if err == nil {
							reason = strings.Join(strings.Fields(aws.ToString(d.FailureReason)), " ")
						}
					}
					fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", termLine(aws.ToString(e.EndpointName)), termLine(string(e.EndpointStatus)),
						aws.ToTime(e.CreationTime).Local().Format(time.DateTime), aws.ToTime(e.LastModifiedTime).Local().Format(time.DateTime), termLine(reason))
				}
			}
			if err := tw.Flush(); err != nil {
				return err
			}
			return listComponents(ctx, cli, cmd.OutOrStdout())
		}),
	}
	f.register(cmd)
	return cmd
}

func newDescribeCmd() *cobra.Command {
	var f clientFlags
	cmd := &cobra.Command{
		Use:   "describe ENDPOINT|INFERENCE-COMPONENT",
		Short: "Show an endpoint as DescribeEndpoint returns it, or an inference component as DescribeInferenceComponent does (JSON)",
		Args:  cobra.ExactArgs(1),
		RunE: f.run(func(ctx context.Context, cmd *cobra.Command, args []string, cli *sagemaker.Client) error {
			out, err := cli.DescribeEndpoint(ctx, &sagemaker.DescribeEndpointInput{EndpointName: aws.String(args[0])})
			if err != nil && strings.Contains(err.Error(), "Could not find endpoint") {
				// Not an endpoint: an inference component of that name?
				if ic, icErr := cli.DescribeInferenceComponent(ctx, &sagemaker.DescribeInferenceComponentInput{InferenceComponentName: aws.String(args[0])}); icErr == nil {
					return printJSON(newTermWriter(cmd.OutOrStdout()), ic)
				}
			}
			if err != nil {
				return &exitError{code: 1, msg: apiErrorMessage(err, f.endpointURL)}
			}
			return printJSON(newTermWriter(cmd.OutOrStdout()), out) // JSON escapes C0 controls, not C1
		}),
	}
	f.register(cmd)
	return cmd
}

// printJSON prints an SDK output as indented JSON, without the SDK's result
// metadata and without unset members (nil pointers, and enums the SDK
// marshals as "" when the answer had none).
func printJSON(w io.Writer, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		return err
	}
	delete(m, "ResultMetadata")
	dropNulls(m)
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(m)
}

// dropNulls removes the fields the SDK left unset (JSON null) from v, at
// every depth, so describe prints what the endpoint has rather than every
// field the API could return.
func dropNulls(v any) {
	switch v := v.(type) {
	case map[string]any:
		for k, e := range v {
			if e == nil || e == "" {
				delete(v, k)
				continue
			}
			dropNulls(e)
		}
	case []any:
		for _, e := range v {
			dropNulls(e)
		}
	}
}

func newDeleteCmd() *cobra.Command {
	var f clientFlags
	var wait bool
	cmd := &cobra.Command{
		Use:   "delete ENDPOINT",
		Short: "Delete an endpoint (DeleteEndpoint), waiting until it is gone with --wait",
		Args:  cobra.ExactArgs(1),
		RunE: f.run(func(ctx context.Context, cmd *cobra.Command, args []string, cli *sagemaker.Client) error {
			if _, err := cli.DeleteEndpoint(ctx, &sagemaker.DeleteEndpointInput{EndpointName: aws.String(args[0])}); err != nil {
				return &exitError{code: 1, msg: apiErrorMessage(err, f.endpointURL)}
			}
			if wait {
				w := sagemaker.NewEndpointDeletedWaiter(cli, func(o *sagemaker.EndpointDeletedWaiterOptions) {
					o.MinDelay, o.MaxDelay = 200*time.Millisecond, time.Second
				})
				if err := w.Wait(ctx, &sagemaker.DescribeEndpointInput{EndpointName: aws.String(args[0])}, f.timeout); err != nil {
					return &exitError{code: 1, msg: err.Error()}
				}
			}
			fmt.Fprintf(cmd.OutOrStdout(), "deleted %s\n", args[0])
			return nil
		}),
	}
	f.register(cmd)
	cmd.Flags().BoolVar(&wait, "wait", true, "wait until the endpoint is gone")
	return cmd
}

// listComponents prints the inference components, if any, with their
// copies (current/desired) and failure reason.
func listComponents(ctx context.Context, cli *sagemaker.Client, w io.Writer) error {
	var rows []string
	p := sagemaker.NewListInferenceComponentsPaginator(cli, &sagemaker.ListInferenceComponentsInput{SortBy: "Name", SortOrder: "Ascending"})
	for p.HasMorePages() {
		page, err := p.NextPage(ctx)
		if err != nil {
			return nil // a host without inference components
		}
		for _, c := range page.InferenceComponents {
			copies, reason := "", ""
			if d, err := cli.DescribeInferenceComponent(ctx, &sagemaker.DescribeInferenceComponentInput{InferenceComponentName: c.InferenceComponentName}); err == nil {
				if rc := d.RuntimeConfig; rc != nil {
					copies = fmt.Sprintf("%d/%d", aws.ToInt32(rc.CurrentCopyCount), aws.ToInt32(rc.DesiredCopyCount))
				}
				if sp := d.Specification; sp != nil && aws.ToString(sp.BaseInferenceComponentName) != "" {
					copies = "adapter of " + termLine(aws.ToString(sp.BaseInferenceComponentName)) // served by its base's copies
				}
				reason = strings.Join(strings.Fields(aws.ToString(d.FailureReason)), " ")
			}
			rows = append(rows, fmt.Sprintf("%s\t%s\t%s\t%s\t%s\t%s\n", termLine(aws.ToString(c.InferenceComponentName)), termLine(aws.ToString(c.EndpointName)),
				termLine(aws.ToString(c.VariantName)), termLine(string(c.InferenceComponentStatus)), copies, termLine(reason)))
		}
	}
	if len(rows) == 0 {
		return nil
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "\nINFERENCE COMPONENT\tENDPOINT\tVARIANT\tSTATUS\tCOPIES\tFAILURE REASON")
	for _, r := range rows {
		fmt.Fprint(tw, r)
	}
	return tw.Flush()
}
