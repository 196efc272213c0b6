package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sagemakerruntime"
	"github.com/aws/aws-sdk-go-v2/service/sagemakerruntime/types"
	"github.com/aws/smithy-go"
	"github.com/spf13/cobra"

	"github.com/mce-run/mce/internal/loadtest"
	"github.com/mce-run/mce/internal/sdkhttp"
)

type invokeFlags struct {
	endpointURL      string
	region           string
	targetContainer  string
	component        string // InferenceComponentName
	targetVariant    string
	targetModel      string
	contentType      string
	accept           string
	customAttributes string
	inferenceID      string
	timeout          time.Duration
	verbose          bool
	stream           bool
	bidi             bool
}

func newInvokeCmd() *cobra.Command {
	var f invokeFlags
	cmd := &cobra.Command{
		Use:   "invoke ENDPOINT [BODY | @file | -]",
		Short: "Call InvokeEndpoint (or, with --stream, InvokeEndpointWithResponseStream) through the AWS SDK for Go and print the answer",
		Long: `invoke calls InvokeEndpoint on an mce host (or any SageMaker Runtime endpoint) with
aws-sdk-go-v2's sagemakerruntime client, so the call is exactly what an application makes.
The body is the argument itself, @file for a file's contents, or - (or nothing) for
standard input. The answer's body goes to standard output; with -v the invoked variant,
content type and custom attributes go to standard error.

With --bidi the call is InvokeEndpointWithBidirectionalStream, to the HTTP/2 listener
of mce serve --bidi-listen given as --endpoint-url: each line of standard input is sent
as a UTF8 message and each of the model's messages is printed as a line; --timeout
bounds the whole stream.

With --stream the call is InvokeEndpointWithResponseStream: the answer's parts are
printed as they arrive, and a ModelStreamError that ends the stream is printed to
standard error (exit status 1). --accept is then sent as X-Amzn-SageMaker-Accept, as the
SDK does; --target-model is not a parameter of that operation.

The ContentType is --content-type when given; otherwise text on the command line is
sent as text/plain and @file by its extension (.json application/json, .jsonl
application/jsonlines, .csv text/csv, .txt text/plain, .npy application/x-npy,
.npz application/x-npz, .parquet application/x-parquet, .png image/png, .jpg/.jpeg
image/jpeg, .pb application/x-protobuf). Standard input and other extensions need
--content-type.

Credentials come from the usual AWS environment variables or profile when present;
otherwise the request is sent unsigned (mce treats it as anonymous).`,
		Args: cobra.RangeArgs(1, 2),
		RunE: func(cmd *cobra.Command, args []string) error {
			return invoke(cmd.Context(), f, args, cmd.InOrStdin(), cmd.OutOrStdout(), cmd.ErrOrStderr())
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&f.endpointURL, "endpoint-url", envOr("MCE_ENDPOINT_URL", "http://127.0.0.1:8080"), "URL of the mce host (env MCE_ENDPOINT_URL)")
	fl.StringVar(&f.region, "region", envOr("AWS_REGION", "us-east-1"), "region to sign for")
	fl.StringVar(&f.targetContainer, "target-container", "", "TargetContainerHostname (Direct mode)")
	fl.StringVar(&f.targetVariant, "target-variant", "", "TargetVariant")
	fl.StringVar(&f.component, "inference-component", "", "InferenceComponentName (endpoints that host inference components)")
	fl.StringVar(&f.targetModel, "target-model", "", "TargetModel (multi-model endpoints)")
	fl.StringVar(&f.contentType, "content-type", "", "ContentType of the body (default: text/plain for text arguments, by extension for @file)")
	fl.StringVar(&f.accept, "accept", "", "Accept")
	fl.StringVar(&f.customAttributes, "custom-attributes", "", "CustomAttributes")
	fl.StringVar(&f.inferenceID, "inference-id", "", "InferenceId")
	fl.DurationVar(&f.timeout, "timeout", 70*time.Second, "time limit of the call (SageMaker advises 70 s)")
	fl.BoolVarP(&f.verbose, "verbose", "v", false, "print the invoked variant and response headers to standard error")
	fl.BoolVar(&f.stream, "stream", false, "call InvokeEndpointWithResponseStream and print the parts as they arrive")
	fl.BoolVar(&f.bidi, "bidi", false, "call InvokeEndpointWithBidirectionalStream on mce serve --bidi-listen's URL (--endpoint-url): each line of standard input is a message, each answer a line")
	return cmd
}

func envOr(k, def string) string {
	if v := os.Getenv(k); v != "" {
		return v
	}
	return def
}

func readBodyArg(args []string, stdin io.Reader) ([]byte, error) {
	const limit = 6 << 20
	var r io.Reader
	switch {
	case len(args) < 2 || args[1] == "-":
		r = stdin
	case strings.HasPrefix(args[1], "@"):
		f, err := os.Open(args[1][1:])
		if err != nil {
			return nil, err
		}
		defer f.Close()
		r = f
	default:
		return []byte(args[1]), nil
	}
	b, err := io.ReadAll(io.LimitReader(r, limit+1))
	if err != nil {
		return nil, err
	}
	if len(b) > limit {
		return nil, fmt.Errorf("the body is over SageMaker's 6 MiB limit")
	}
	return b, nil
}

// contentTypeOf maps a file extension to the content type SageMaker
// containers expect for it, or "" when there is none.
func contentTypeOf(ext string) string { return loadtest.ContentTypeOf(ext) }

// inferContentType returns explicit when set; else text/plain for a body given
// on the command line, the type of an @file's extension, or an error that
// says to pass --content-type.
func inferContentType(args []string, explicit string) (string, error) {
	if explicit != "" {
		return explicit, nil
	}
	switch {
	case len(args) < 2 || args[1] == "-":
		return "", errors.New("cannot tell the content type of standard input: pass --content-type (e.g. --content-type application/json)")
	case strings.HasPrefix(args[1], "@"):
		ext := strings.ToLower(filepath.Ext(args[1]))
		if ct := contentTypeOf(ext); ct != "" {
			return ct, nil
		}
		return "", fmt.Errorf("cannot tell the content type of %s from its extension %q: pass --content-type", args[1][1:], ext)
	default:
		return "text/plain", nil
	}
}

func newRuntimeClient(ctx context.Context, endpointURL, region string) (*sagemakerruntime.Client, error) {
	cfg, err := loadSDKConfig(ctx, region)
	if err != nil {
		return nil, err
	}
	return sagemakerruntime.NewFromConfig(cfg, func(o *sagemakerruntime.Options) {
		o.BaseEndpoint = aws.String(endpointURL)
		// A request body the SDK cannot close under the transport: without
		// it a response stream can die mid-way (see internal/sdkhttp).
		o.HTTPClient = &sdkhttp.Client{Next: o.HTTPClient}
	}), nil
}

func invoke(ctx context.Context, f invokeFlags, args []string, stdin io.Reader, stdout, stderr io.Writer) error {
	if f.bidi {
		if len(args) > 1 || f.stream {
			return &exitError{code: 2, msg: "--bidi reads its messages from standard input, one a line, and cannot be used with --stream"}
		}
		ctx, cancel := context.WithTimeout(ctx, f.timeout)
		defer cancel()
		return invokeBidi(ctx, f, args[0], stdin, stdout, stderr)
	}
	contentType, err := inferContentType(args, f.contentType)
	if err != nil {
		return &exitError{code: 2, msg: err.Error()}
	}
	f.contentType = contentType
	if f.stream && f.targetModel != "" {
		return &exitError{code: 2, msg: "--target-model is not a parameter of InvokeEndpointWithResponseStream: multi-model endpoints do not stream"}
	}
	body, err := readBodyArg(args, stdin)
	if err != nil {
		return &exitError{code: 2, msg: err.Error()}
	}
	cli, err := newRuntimeClient(ctx, f.endpointURL, f.region)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, f.timeout)
	defer cancel()
	if f.stream {
		return invokeStream(ctx, cli, f, args[0], body, stdout, stderr)
	}
	in := &sagemakerruntime.InvokeEndpointInput{EndpointName: aws.String(args[0]), Body: body}
	setString(&in.TargetContainerHostname, f.targetContainer)
	setString(&in.InferenceComponentName, f.component)
	setString(&in.TargetVariant, f.targetVariant)
	setString(&in.TargetModel, f.targetModel)
	setString(&in.ContentType, f.contentType)
	setString(&in.Accept, f.accept)
	setString(&in.CustomAttributes, f.customAttributes)
	setString(&in.InferenceId, f.inferenceID)
	out, err := cli.InvokeEndpoint(ctx, in)
	if err != nil {
		return &exitError{code: 1, msg: apiErrorMessage(err, f.endpointURL)}
	}
	if f.verbose {
		fmt.Fprintf(stderr, "InvokedProductionVariant: %s\nContentType: %s\n", termLine(aws.ToString(out.InvokedProductionVariant)), termLine(aws.ToString(out.ContentType)))
		if out.CustomAttributes != nil {
			fmt.Fprintf(stderr, "CustomAttributes: %s\n", termLine(aws.ToString(out.CustomAttributes)))
		}
	}
	stdout.Write(out.Body)
	if len(out.Body) > 0 && out.Body[len(out.Body)-1] != '\n' {
		fmt.Fprintln(stdout)
	}
	return nil
}

// setString sets an optional input member to v, leaving it nil when v is
// empty (the flag was not given).
func setString(dst **string, v string) {
	if v != "" {
		*dst = aws.String(v)
	}
}

// invokeStream calls InvokeEndpointWithResponseStream and writes each part
// to stdout as it arrives.
func invokeStream(ctx context.Context, cli *sagemakerruntime.Client, f invokeFlags, endpoint string, body []byte, stdout, stderr io.Writer) error {
	in := &sagemakerruntime.InvokeEndpointWithResponseStreamInput{EndpointName: aws.String(endpoint), Body: body}
	setString(&in.TargetContainerHostname, f.targetContainer)
	setString(&in.InferenceComponentName, f.component)
	setString(&in.TargetVariant, f.targetVariant)
	setString(&in.ContentType, f.contentType)
	setString(&in.Accept, f.accept)
	setString(&in.CustomAttributes, f.customAttributes)
	setString(&in.InferenceId, f.inferenceID)
	out, err := cli.InvokeEndpointWithResponseStream(ctx, in)
	if err != nil {
		return &exitError{code: 1, msg: apiErrorMessage(err, f.endpointURL)}
	}
	es := out.GetStream()
	defer es.Close()
	if f.verbose {
		fmt.Fprintf(stderr, "InvokedProductionVariant: %s\nContentType: %s\n", termLine(aws.ToString(out.InvokedProductionVariant)), termLine(aws.ToString(out.ContentType)))
		if out.CustomAttributes != nil {
			fmt.Fprintf(stderr, "CustomAttributes: %s\n", termLine(aws.ToString(out.CustomAttributes)))
		}
	}
	var last byte = '\n'
	for ev := range es.Events() {
		p, ok := ev.(*types.ResponseStreamMemberPayloadPart)
		if !ok || len(p.Value.Bytes) == 0 {
			continue // an event type this client does not know
		}
		if _, err := stdout.Write(p.Value.Bytes); err != nil {
			return err
		}
		last = p.Value.Bytes[len(p.Value.Bytes)-1]
	}
	if last != '\n' {
		fmt.Fprintln(stdout)
	}
	if err := es.Err(); err != nil {
		var se *types.ModelStreamError
		if errors.As(err, &se) {
			return &exitError{code: 1, msg: fmt.Sprintf("ModelStreamError (%s): %s", aws.ToString(se.ErrorCode_), aws.ToString(se.Message))}
		}
		return &exitError{code: 1, msg: apiErrorMessage(err, f.endpointURL)}
	}
	return nil
}

// describeInvokeError prints the SDK's typed error with its SageMaker fields.
func describeInvokeError(err error) string {
	var me *types.ModelError
	if errors.As(err, &me) {
		return fmt.Sprintf("ModelError: %s (OriginalStatusCode %d, OriginalMessage %q)",
			aws.ToString(me.Message), aws.ToInt32(me.OriginalStatusCode), aws.ToString(me.OriginalMessage))
	}
	var ae smithy.APIError
	if errors.As(err, &ae) {
		return ae.ErrorCode() + ": " + ae.ErrorMessage()
	}
	return err.Error()
}
