package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/aws/aws-sdk-go-v2/aws"

	"github.com/mce-run/mce/host/bidistream/bidiclient"
)

// invokeBidi is `mce invoke --bidi`: InvokeEndpointWithBidirectionalStream
// on the HTTP/2 listener at f.endpointURL. Each line of stdin is sent as a
// UTF8 part (a message of its own); the model's messages are printed as
// they arrive, one line each. The stream ends when stdin does and the
// model has answered (or closed).
func invokeBidi(ctx context.Context, f invokeFlags, endpoint string, stdin io.Reader, stdout, stderr io.Writer) error {
	cfg, err := loadSDKConfig(ctx, f.region)
	if err != nil {
		return err
	}
	c := &bidiclient.Client{Endpoint: f.endpointURL, Region: f.region}
	if cfg.Credentials != nil && !aws.IsCredentialsProvider(cfg.Credentials, aws.AnonymousCredentials{}) {
		c.Credentials = cfg.Credentials
	}
	s, err := c.Open(ctx, endpoint, bidiclient.Input{TargetVariant: f.targetVariant})
	if err != nil {
		return &exitError{code: 1, msg: err.Error()}
	}
	defer s.Close()
	if f.verbose {
		fmt.Fprintf(stderr, "InvokedProductionVariant: %s\n", termLine(s.InvokedProductionVariant))
	}
	sent := make(chan error, 1)
	go func() {
		sc := bufio.NewScanner(stdin)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		for sc.Scan() {
			if err := s.Send(ctx, sc.Bytes(), true, true); err != nil {
				sent <- err
				return
			}
		}
		if err := sc.Err(); err != nil {
			sent <- err
			return
		}
		sent <- s.CloseSend(ctx)
	}()
	for {
		p, err := s.Recv()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return &exitError{code: 1, msg: err.Error()}
		}
		stdout.Write(p.Bytes)
		if p.Complete {
			fmt.Fprintln(stdout)
		}
	}
	select {
	case err := <-sent:
		if err != nil {
			return &exitError{code: 1, msg: "sending: " + err.Error()}
		}
	default:
	}
	return nil
}
