package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"strconv"
	"time"

	"github.com/spf13/cobra"

	"github.com/mce-run/mce/containers/mme"
	"github.com/mce-run/mce/containers/mme/agent"
)

// agentFlags are `mce agent`'s flags: fetch's, plus the cache's.
type agentFlags struct {
	prefix, dir, listen string
	fetcher             fetcherFlags
	capacity            byteSize
	log                 logFlags
}

// newAgentCmd is the kubernetes engine's multi-model sidecar: it owns the
// pod's model cache volume and fetches and deletes model files when mce's
// multi-model manager asks (package containers/mme/agent).
func newAgentCmd() *cobra.Command {
	var f agentFlags
	cmd := &cobra.Command{
		Use:   "agent --prefix URL",
		Short: "(internal) The model cache sidecar of multi-model pods on the kubernetes engine",
		Long: `agent is what the kubernetes engine runs beside a multi-model container, in the same pod,
from mce's own image. It owns the pod's model cache volume (--dir, which the model
container mounts read-only at /opt/ml/models) and answers mce's multi-model manager on
--listen: it downloads <prefix><TargetModel> with the same safety limits as serve and
fetch, keeps the files while mce holds them, and deletes the least recently used ones past
--disk-capacity. It takes no URL, path or credential from its callers; anything that can
reach the pod's IP on its port can call it, so restrict that with a NetworkPolicy on a
shared cluster. It is not meant to be run by hand.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runAgent(cmd, f)
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&f.prefix, "prefix", "", "the container's ModelDataUrl prefix: s3://bucket/prefix/ or file:///folder/")
	fl.StringVar(&f.dir, "dir", agent.ModelsDir, "the model cache folder (the pod's volume)")
	fl.StringVar(&f.listen, "listen", ":"+strconv.Itoa(agent.Port), "address to listen on (the pod's network)")
	f.fetcher.register(fl)
	fl.Var(&f.capacity, "disk-capacity", "bytes of model files to keep on disk (e.g. 20GiB); unused models past it are deleted, least recently used first; 0 means unlimited")
	f.log.register(cmd)
	_ = cmd.MarkFlagRequired("prefix")
	return cmd
}

func runAgent(cmd *cobra.Command, f agentFlags) error {
	log, err := f.log.logger(cmd.ErrOrStderr())
	if err != nil {
		return &exitError{code: 2, msg: err.Error()}
	}
	fetcher, err := f.fetcher.new()
	if err != nil {
		return err
	}
	cache, err := mme.NewCache(mme.CacheOptions{Dir: f.dir, Prefix: f.prefix, Fetcher: fetcher,
		Capacity: int64(f.capacity), Logger: log})
	if err != nil {
		return &exitError{code: 2, msg: err.Error()}
	}
	defer cache.Close()
	srv := agent.NewServer(cache, log)
	ln, err := net.Listen("tcp", f.listen)
	if err != nil {
		return err
	}
	hs := &http.Server{Handler: srv, ReadHeaderTimeout: 10 * time.Second, ReadTimeout: 30 * time.Second,
		IdleTimeout: 2 * time.Minute, MaxHeaderBytes: 16 << 10}
	ctx := cmd.Context()
	done := make(chan error, 1)
	go func() { done <- hs.Serve(ln) }()
	log.Info().Str("listen", ln.Addr().String()).Str("prefix", f.prefix).Str("dir", cache.Dir()).
		Int64("capacity_bytes", int64(f.capacity)).Msg("mce agent: serving the pod's model cache")
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	srv.Close()
	if err := hs.Shutdown(sctx); err != nil && !errors.Is(err, context.DeadlineExceeded) {
		return err
	}
	fmt.Fprintln(os.Stderr, "mce agent: stopped")
	return nil
}
