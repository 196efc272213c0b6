package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/feature/ec2/imds"
)

// loadSDKConfig loads the AWS configuration the CLI's clients share: the
// region, the usual credentials when present (else anonymous), no EC2
// metadata service, and a retryer that gives up at once when the host cannot
// be dialled, so "mce is not running" shows in milliseconds, not after the
// SDK's backoff.
func loadSDKConfig(ctx context.Context, region string) (aws.Config, error) {
	opts := []func(*config.LoadOptions) error{
		config.WithRegion(region),
		// Never ask the EC2 metadata service for credentials: mce runs on
		// laptops and servers where that address is not ours to dial.
		config.WithEC2IMDSClientEnableState(imds.ClientDisabled),
		config.WithRetryer(func() aws.Retryer {
			return retry.NewStandard(func(o *retry.StandardOptions) {
				o.Retryables = append([]retry.IsErrorRetryable{retry.IsErrorRetryableFunc(func(err error) aws.Ternary {
					if isDialError(err) {
						return aws.FalseTernary
					}
					return aws.UnknownTernary
				})}, o.Retryables...)
			})
		}),
	}
	if os.Getenv("AWS_ACCESS_KEY_ID") == "" && os.Getenv("AWS_PROFILE") == "" {
		opts = append(opts, config.WithCredentialsProvider(aws.AnonymousCredentials{}))
	}
	return config.LoadDefaultConfig(ctx, opts...)
}

// isDialError reports whether err is a failure to connect (refused, no route,
// unknown host) rather than an answer.
func isDialError(err error) bool {
	var op *net.OpError
	if errors.As(err, &op) && op.Op == "dial" {
		return true
	}
	var dns *net.DNSError
	return errors.As(err, &dns)
}

// apiErrorMessage is the one line the CLI prints for a failed call: the
// SageMaker error code and message, or for a host that cannot be reached, the
// URL and how to start mce.
func apiErrorMessage(err error, endpointURL string) string {
	if isDialError(err) {
		var op *net.OpError
		cause := err.Error()
		if errors.As(err, &op) && op.Err != nil {
			cause = op.Err.Error()
		}
		return fmt.Sprintf("cannot connect to mce at %s (%s): start it with `bin/mce serve -f ENDPOINT.yaml`, or point --endpoint-url / MCE_ENDPOINT_URL at a running one", endpointURL, cause)
	}
	return describeInvokeError(err)
}
