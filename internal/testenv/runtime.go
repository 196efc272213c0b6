package testenv

import (
	"context"
	"testing"
	"time"

	"github.com/mce-run/mce/containers/docker"
)

// Runtime starts a Docker runtime for tb, the fixture of tests of the Docker
// engine alone (a whole host over it is hostenv.New). What o leaves empty
// gets a default:
//   - Client: Docker(tb), which skips under -short (and fails in CI when no
//     engine answers);
//   - Instance: a fresh name (Instance);
//   - StateDir: tb.TempDir();
//   - Logger: none (the zero zerolog.Logger writes nothing).
//
// Every other option is passed as given. When tb ends, the runtime is closed
// and tb fails if a container or network of the instance is left
// (NoLeftovers). It returns the runtime and the options it was started with,
// which name its client, instance and state folder.
func Runtime(tb testing.TB, o docker.Options) (*docker.Runtime, docker.Options) {
	tb.Helper()
	if o.Client == nil {
		o.Client = Docker(tb)
	}
	if o.Instance == "" {
		o.Instance = Instance(tb)
	}
	if o.StateDir == "" {
		o.StateDir = tb.TempDir()
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	rt, err := docker.New(ctx, o)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() {
		rt.Close()
		NoLeftovers(tb, o.Client, o.Instance)
	})
	return rt, o
}

// NoLeftovers fails tb (without stopping it) when a container or network
// carrying the instance's label is left on the engine.
func NoLeftovers(tb testing.TB, cli docker.Client, instance string) {
	tb.Helper()
	if c, n := Leftovers(tb, cli, instance); c+n > 0 {
		tb.Errorf("left behind %d containers and %d networks with instance %s", c, n, instance)
	}
}
