package cloudwatchlogs

import (
	"context"
	"fmt"
	"net/http"
	"sync/atomic"
	"time"

	"github.com/rs/zerolog"

	"github.com/mce-run/mce/containers"
	"github.com/mce-run/mce/host/apierr"
)

// Options configure a Service. Groups is required; every other zero value
// is usable and means what its comment says.
type Options struct {
	// Groups finds the endpoints (CloudWatch's log groups) and their
	// containers.
	Groups Groups
	// Region and Account go into the ARNs the calls are authorized on
	// (GroupARN); give the host's own.
	Region, Account string
	// Streams, once cancelled, ends every follow of Tail (the host's
	// EndStreams, so that a graceful shutdown does not wait for them);
	// nil: a follow ends with its caller or with its containers only.
	Streams context.Context
	Logger  zerolog.Logger
}

// Service answers the calls that read endpoints' container output: Tail
// (GET /mce/endpoints/{name}/logs) and Call (the CloudWatch Logs
// operations). Make one with NewService; it is safe for concurrent use.
type Service struct {
	o         Options
	log       zerolog.Logger
	followers atomic.Int32 // log follows in progress
}

// NewService makes a Service.
func NewService(o Options) *Service {
	return &Service{o: o, log: o.Logger}
}

// Decide says whether the caller of the request being served may perform
// action on resource; nil means go ahead, otherwise the error to write.
// The host binds it to the request's principal (its authenticate and
// decide).
type Decide func(ctx context.Context, action, resource string) *apierr.Error

// Groups finds endpoints by name.
type Groups interface {
	// Group is the endpoint named name, in any case; nil when there is
	// none.
	Group(name string) Group
}

// Group is one endpoint, CloudWatch's log group
// /aws/sagemaker/Endpoints/<Name>.
type Group interface {
	// Name is the endpoint's name as created: SageMaker names the log
	// group after it, and the ARNs authorized are built from it, never
	// from the name as typed (a Deny on …/Endpoints/my-mce must not miss
	// MY-MCE).
	Name() string
	// Containers is what the endpoint runs now.
	Containers() Containers
}

// Containers is an endpoint's containers at one moment.
type Containers struct {
	// Running is false while the endpoint has no containers launched;
	// Status then says what it is.
	Running bool
	Status  string
	// Created is when the endpoint was created: its log streams'
	// creation time.
	Created time.Time
	// Variants are the names of the variants it serves, and List their
	// containers, in variant, copy and chain order.
	Variants []string
	List     []Container
}

// Container is one running container: a log stream.
type Container struct {
	Variant string
	Copy    int
	Host    string // its ContainerHostname
	// Source reads its output; nil when mce cannot.
	Source Source
}

// Source is what an engine's containers offer for logs (the Docker
// engine's do).
type Source interface {
	Follow(buffer int) (lines <-chan containers.LogLine, done <-chan struct{}, stop func())
	Logs(ctx context.Context, n int, fn func(containers.LogLine) error) error
	LogsBetween(ctx context.Context, since, until time.Time, fn func(containers.LogLine) error) error
}

// GroupARN is the ARN of an endpoint's log group as SageMaker's errors
// show it (LogStreamArn); IAM policies name the group with a final ":*"
// and its streams with ":log-stream:NAME".
func GroupARN(region, account, endpoint string) string {
	return fmt.Sprintf("arn:aws:logs:%s:%s:log-group:%s%s", region, account, logGroupPrefix, endpoint)
}

// groupARN is the ARN of an endpoint's CloudWatch log group, as IAM
// policies name it.
func (s *Service) groupARN(endpoint string) string {
	return GroupARN(s.o.Region, s.o.Account, endpoint) + ":*"
}

// streamARN is the ARN of one of an endpoint's log streams.
func (s *Service) streamARN(endpoint, stream string) string {
	return GroupARN(s.o.Region, s.o.Account, endpoint) + ":log-stream:" + stream
}

// group finds the endpoint a call names and the name its log group has
// (Group.Name). An unknown endpoint keeps the name as typed (the call then
// fails as not found).
func (s *Service) group(name string) (Group, string) {
	g := s.o.Groups.Group(name)
	if g == nil {
		return nil, name
	}
	return g, g.Name()
}

// logsError is an error in CloudWatch Logs' shape.
func logsError(status int, code, format string, args ...any) *apierr.Error {
	return &apierr.Error{Status: status, Code: code, Message: fmt.Sprintf(format, args...)}
}

// BodyTooLarge is the error for a CloudWatch Logs call whose body is over
// limit bytes.
func BodyTooLarge(limit int) *apierr.Error {
	return logsError(http.StatusBadRequest, codeInvalidParameter, "The request body exceeds %d bytes.", limit)
}
