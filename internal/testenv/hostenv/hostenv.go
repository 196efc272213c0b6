// Package hostenv is the one fixture of tests that need a whole mce host: a
// model-data fetcher, a Docker runtime (or another engine), a state store,
// the host and an HTTP server in front of it, torn down in order with a check
// that nothing of the instance is left on the engine.
//
// It lives beside testenv, not in it, because it imports host: host's own
// (package host) tests use testenv, and testenv importing host would make
// an import cycle of them. Tests using hostenv are external (package
// host_test, cmd/mce's package main, ...).
package hostenv

import (
	"context"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sagemaker"
	"github.com/aws/aws-sdk-go-v2/service/sagemakerruntime"
	"github.com/rs/zerolog"

	"github.com/mce-run/mce/containers"
	"github.com/mce-run/mce/containers/artifact"
	"github.com/mce-run/mce/containers/docker"
	"github.com/mce-run/mce/host"
	"github.com/mce-run/mce/host/spec"
	"github.com/mce-run/mce/host/store"
	"github.com/mce-run/mce/internal/sdkhttp"
	"github.com/mce-run/mce/internal/testenv"
)

// Options are what tests vary in a host; the zero value is a host on the
// local Docker engine with the defaults below.
type Options struct {
	// Instance is the mce instance name; default a fresh one
	// (testenv.Instance).
	Instance string
	// StateDir is the runtime's state folder; default t.TempDir().
	StateDir string
	// Store is an open state store to use, such as the one of a host that
	// Crash ended (its successor on the same Instance and StateDir adopts
	// its containers); the fixture does not close it. Default a new store
	// in t.TempDir(), closed when t ends.
	Store *store.Store

	// ModelRoots are the folders file:// model data may come from; default
	// os.TempDir() (tests write their artifacts in t.TempDir() folders).
	ModelRoots []string
	// Artifacts are the fetcher's options besides ModelRoots (S3 settings,
	// limits); default none.
	Artifacts artifact.Options
	// S3 is an S3 server (testenv.S3Server) the fetcher reads model data
	// from and that holds asynchronous requests' objects: when set, the
	// fetcher's S3 endpoint, region, path style and credentials are its,
	// and the host's AsyncObjects is the fetcher.
	S3 *testenv.S3

	// Runtime adjusts the Docker runtime's options after the fixture fills
	// them: Client (testenv.Docker), Instance, StateDir, Logger, Fetcher,
	// StopGrace 2 s, HealthInterval 500 ms, RestartBackoff 100 ms.
	Runtime func(*docker.Options)
	// Backend is an engine other than Docker (a fake, Kubernetes): the
	// fixture then starts no runtime, needs no Docker engine, and checks
	// no leftovers.
	Backend containers.Engine
	// Wrap, when set, is given the Docker engine and returns the engine the
	// host drives (one that records the plans it launches, say); unused
	// with Backend.
	Wrap func(*docker.Engine) containers.Engine

	// Host adjusts the host's configuration after the fixture fills it:
	// Backend, Store, Logger, ModelData (the fetcher), ContainerTimeout 5 s
	// (tests of ModelInvocationTimeExceeded rely on it), MetricsOnAPI, and
	// AsyncObjects when S3 is set. Credentials and policies (Authz) go
	// here.
	Host func(*host.Config)
}

// Host is a running mce host and its parts.
type Host struct {
	Server   *host.Server
	Runtime  *docker.Runtime // nil with Options.Backend
	Docker   docker.Client   // nil with Options.Backend
	Fetcher  *artifact.Fetcher
	Store    *store.Store
	HTTP     *httptest.Server
	URL      string // HTTP.URL
	Instance string
	StateDir string
	// Logs holds the host's and the runtime's log (JSON lines); it is
	// printed when the test fails.
	Logs *testenv.SyncBuffer
	Log  zerolog.Logger

	crashed bool
}

// Crash ends the host as a crash of mce would: the HTTP server and the
// runtime close, but the host stops none of its endpoints, so their
// containers keep running for a next host on the same Instance, StateDir
// and Store (Options) to adopt. The end of t then does nothing more for
// this host (the next one's teardown removes the containers and checks
// for leftovers).
func (h *Host) Crash() {
	h.crashed = true
	h.HTTP.Close()
	if h.Runtime != nil {
		h.Runtime.Close()
	}
}

// New starts a host for t. When t ends, in this order: the HTTP server
// closes, the host stops its endpoints (an error fails t), the runtime
// closes, the store closes (unless Options gave it), t fails if a container or network of the
// instance is left, and the log is printed if t failed.
func New(t testing.TB, o Options) *Host {
	t.Helper()
	h := &Host{Instance: o.Instance, StateDir: o.StateDir, Logs: &testenv.SyncBuffer{}}
	if o.Backend == nil {
		h.Docker = testenv.Docker(t)
	}
	if h.Instance == "" {
		h.Instance = testenv.Instance(t)
	}
	if h.StateDir == "" {
		h.StateDir = t.TempDir()
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("mce log:\n%s", h.Logs.String())
		}
	})
	h.Log = zerolog.New(h.Logs).With().Timestamp().Logger()

	fo := o.Artifacts
	fo.ModelRoots = o.ModelRoots
	if fo.ModelRoots == nil {
		fo.ModelRoots = []string{os.TempDir()}
	}
	if o.S3 != nil {
		fo.S3.Endpoint, fo.S3.Region, fo.S3.UsePathStyle, fo.S3.Credentials = o.S3.Endpoint, o.S3.Region, true, o.S3.Credentials()
	}
	var err error
	if h.Fetcher, err = artifact.NewFetcher(fo); err != nil {
		t.Fatal(err)
	}

	backend := o.Backend
	if backend == nil {
		ro := docker.Options{Client: h.Docker, Instance: h.Instance, StateDir: h.StateDir, Logger: h.Log, Fetcher: h.Fetcher,
			StopGrace: 2 * time.Second, HealthInterval: 500 * time.Millisecond, RestartBackoff: 100 * time.Millisecond}
		if o.Runtime != nil {
			o.Runtime(&ro)
			h.Instance, h.StateDir = ro.Instance, ro.StateDir
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if h.Runtime, err = docker.New(ctx, ro); err != nil {
			t.Fatal(err)
		}
		backend = &docker.Engine{Runtime: h.Runtime}
		if o.Wrap != nil {
			backend = o.Wrap(backend.(*docker.Engine))
		}
	}

	ownStore := o.Store == nil
	if h.Store = o.Store; ownStore {
		if h.Store, err = store.Open(filepath.Join(t.TempDir(), "state.db")); err != nil {
			if h.Runtime != nil {
				h.Runtime.Close()
			}
			t.Fatal(err)
		}
	}
	cfg := host.Config{Backend: backend, Store: h.Store, Logger: h.Log, ModelData: h.Fetcher,
		ContainerTimeout: 5 * time.Second, MetricsOnAPI: true}
	if o.S3 != nil {
		cfg.AsyncObjects = h.Fetcher
	}
	if o.Host != nil {
		o.Host(&cfg)
	}
	h.Server = host.New(cfg)
	if h.Runtime != nil {
		h.Runtime.OnAddressChange(h.Server.ForgetAddress) // as mce serve does
	}
	h.HTTP = httptest.NewServer(h.Server.Handler())
	h.URL = h.HTTP.URL
	t.Cleanup(func() {
		if !h.crashed {
			h.HTTP.Close()
			if err := h.Server.Close(context.Background()); err != nil {
				t.Errorf("teardown: %v", err)
			}
			if h.Runtime != nil {
				h.Runtime.Close()
			}
		}
		if ownStore {
			h.Store.Close()
		}
		if h.Docker != nil && !h.crashed {
			testenv.NoLeftovers(t, h.Docker, h.Instance)
		}
	})
	return h
}

// Apply creates the endpoints of endpoint files and waits until each is in
// service (within 2 minutes), failing t otherwise; it returns their names.
func (h *Host) Apply(t testing.TB, files ...string) []string {
	t.Helper()
	b, err := spec.LoadFiles(files...)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	names, err := h.Server.Apply(ctx, b)
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range names {
		if err := h.Server.WaitEndpoint(ctx, name); err != nil {
			t.Fatal(err)
		}
	}
	return names
}

// ApplyYAML is Apply of one endpoint file holding yaml.
func (h *Host) ApplyYAML(t testing.TB, yaml string) []string {
	t.Helper()
	file := filepath.Join(t.TempDir(), "endpoints.yaml")
	if err := os.WriteFile(file, []byte(yaml), 0o644); err != nil {
		t.Fatal(err)
	}
	return h.Apply(t, file)
}

// RuntimeClient is an aws-sdk-go-v2 SageMaker Runtime client of the host
// (anonymous, region us-east-1).
func (h *Host) RuntimeClient() *sagemakerruntime.Client {
	return sagemakerruntime.New(sagemakerruntime.Options{Region: "us-east-1", BaseEndpoint: aws.String(h.URL),
		Credentials: aws.AnonymousCredentials{}, HTTPClient: &sdkhttp.Client{Next: h.HTTP.Client()}})
}

// SageMakerClient is an aws-sdk-go-v2 SageMaker client of the host
// (anonymous, region us-east-1).
func (h *Host) SageMakerClient() *sagemaker.Client {
	return sagemaker.New(sagemaker.Options{Region: "us-east-1", BaseEndpoint: aws.String(h.URL),
		Credentials: aws.AnonymousCredentials{}, HTTPClient: &sdkhttp.Client{Next: h.HTTP.Client()}})
}
