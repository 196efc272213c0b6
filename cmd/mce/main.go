// Command mce runs Amazon SageMaker–style multi-container endpoints on the
// local Docker engine or on a Kubernetes cluster (--engine) and answers the
// SageMaker Runtime API, so boto3, the aws CLI and every AWS SDK work against
// it with only the endpoint URL changed.
package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Args[1:]); err != nil {
		var ee *exitError
		if errors.As(err, &ee) {
			if ee.msg != "" {
				fmt.Fprintln(os.Stderr, "mce:", termSafe(ee.msg))
			}
			os.Exit(ee.code)
		}
		fmt.Fprintln(os.Stderr, "mce:", termSafe(err.Error()))
		os.Exit(1)
	}
}

// exitError carries a specific exit status out of run.
type exitError struct {
	code int
	msg  string
}

func (e *exitError) Error() string { return e.msg }

func run(ctx context.Context, args []string) error {
	root := newRootCmd()
	root.SetArgs(args)
	return root.ExecuteContext(ctx)
}
