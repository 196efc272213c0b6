package loadtest

import (
	"context"
	"errors"
	"fmt"
	"net"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sagemakerruntime/types"
	"github.com/aws/smithy-go"
)

func TestErrorCode(t *testing.T) {
	op := func(err error) error {
		return &smithy.OperationError{ServiceID: "SageMaker Runtime", OperationName: "InvokeEndpoint", Err: err}
	}
	expired, cancel := context.WithTimeout(context.Background(), 0)
	defer cancel()
	for _, c := range []struct {
		ctx  context.Context
		err  error
		want string
	}{
		{context.Background(), nil, ""},
		{context.Background(), op(&types.ModelError{Message: aws.String("x"), OriginalStatusCode: aws.Int32(500)}), "ModelError:500"},
		{context.Background(), op(&types.ModelError{}), "ModelError"},
		{context.Background(), &types.ModelStreamError{ErrorCode_: aws.String("StreamBroken")}, "ModelStreamError:StreamBroken"},
		{context.Background(), op(&types.ValidationError{Message: aws.String("no such endpoint")}), "ValidationError"},
		{context.Background(), op(&smithy.GenericAPIError{Code: "ThrottlingException"}), "ThrottlingException"},
		{context.Background(), op(&net.OpError{Op: "dial", Err: errors.New("connection refused")}), "ConnectionError"},
		{expired, op(fmt.Errorf("request: %w", context.DeadlineExceeded)), "Timeout"},
		{context.Background(), errors.New("strange"), "ClientError"},
	} {
		if got := ErrorCode(c.ctx, c.err); got != c.want {
			t.Errorf("%v: %q, want %q", c.err, got, c.want)
		}
	}
}
