package docker

import (
	"context"
	"errors"
	"fmt"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/moby/moby/client"
)

// Client is the part of the Docker Engine API that mce uses. *client.Client
// satisfies it; tests may substitute a small fake.
type Client interface {
	Ping(ctx context.Context, options client.PingOptions) (client.PingResult, error)
	Info(ctx context.Context, options client.InfoOptions) (client.SystemInfoResult, error)
	ImageInspect(ctx context.Context, image string, opts ...client.ImageInspectOption) (client.ImageInspectResult, error)
	ImagePull(ctx context.Context, ref string, options client.ImagePullOptions) (client.ImagePullResponse, error)
	ImageTag(ctx context.Context, options client.ImageTagOptions) (client.ImageTagResult, error)
	ImageImport(ctx context.Context, source client.ImageImportSource, ref string, options client.ImageImportOptions) (client.ImageImportResult, error)
	ContainerCreate(ctx context.Context, options client.ContainerCreateOptions) (client.ContainerCreateResult, error)
	ContainerStart(ctx context.Context, id string, options client.ContainerStartOptions) (client.ContainerStartResult, error)
	ContainerStop(ctx context.Context, id string, options client.ContainerStopOptions) (client.ContainerStopResult, error)
	ContainerRemove(ctx context.Context, id string, options client.ContainerRemoveOptions) (client.ContainerRemoveResult, error)
	ContainerInspect(ctx context.Context, id string, options client.ContainerInspectOptions) (client.ContainerInspectResult, error)
	ContainerList(ctx context.Context, options client.ContainerListOptions) (client.ContainerListResult, error)
	ContainerLogs(ctx context.Context, id string, options client.ContainerLogsOptions) (client.ContainerLogsResult, error)
	ContainerStats(ctx context.Context, id string, options client.ContainerStatsOptions) (client.ContainerStatsResult, error)
	NetworkCreate(ctx context.Context, name string, options client.NetworkCreateOptions) (client.NetworkCreateResult, error)
	NetworkRemove(ctx context.Context, id string, options client.NetworkRemoveOptions) (client.NetworkRemoveResult, error)
	NetworkList(ctx context.Context, options client.NetworkListOptions) (client.NetworkListResult, error)
	NetworkConnect(ctx context.Context, id string, options client.NetworkConnectOptions) (client.NetworkConnectResult, error)
	Events(ctx context.Context, options client.EventsListOptions) client.EventsResult
	Close() error
}

var _ Client = (*client.Client)(nil)

// Connect returns a client for the engine named by the environment
// (DOCKER_HOST and friends, else the local socket), negotiating the API
// version down to what the engine speaks, and checks that it answers.
func Connect(ctx context.Context) (*client.Client, error) {
	cli, err := client.New(client.FromEnv, client.WithAPIVersionNegotiation())
	if err != nil {
		return nil, fmt.Errorf("docker client: %w", err)
	}
	pctx, cancel := context.WithTimeout(ctx, callTimeout)
	defer cancel()
	if _, err := cli.Ping(pctx, client.PingOptions{NegotiateAPIVersion: true}); err != nil {
		cli.Close()
		return nil, classify("ping the Docker engine", err)
	}
	return cli, nil
}

// Sentinel classes of engine errors; errors returned by this package wrap one
// of them where the class is known, so callers can use errors.Is.
var (
	ErrEngineUnreachable = errors.New("Docker engine unreachable")
	ErrNotFound          = errors.New("not found")
	ErrConflict          = errors.New("conflict")
	errNoGPUs            = errors.New("no GPU inventory")
)

// engineError keeps the engine's own error while adding a class and the
// operation that failed.
type engineError struct {
	op    string
	class error
	err   error
}

func (e *engineError) Error() string {
	if e.class == nil {
		return e.op + ": " + e.err.Error()
	}
	return e.op + ": " + e.class.Error() + ": " + e.err.Error()
}

func (e *engineError) Unwrap() []error {
	if e.class == nil {
		return []error{e.err}
	}
	return []error{e.class, e.err}
}

// classify wraps a Docker client error with its class. A nil error stays nil.
func classify(op string, err error) error {
	if err == nil {
		return nil
	}
	var class error
	switch {
	case client.IsErrConnectionFailed(err):
		class = ErrEngineUnreachable
	case cerrdefs.IsNotFound(err):
		class = ErrNotFound
	case cerrdefs.IsConflict(err):
		class = ErrConflict
	}
	return &engineError{op: op, class: class, err: err}
}

// gone reports whether err means the object is already gone, which teardown
// treats as success.
func gone(err error) bool {
	return err == nil || cerrdefs.IsNotFound(err)
}
