package containers

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sync"

	"github.com/moby/moby/client"
)

// Reconcile removes every container and network labelled with this runtime's
// instance name, and the extracted artifacts, that an earlier run of this
// instance left behind (after a crash or SIGKILL). New calls it before
// anything else, while it holds the instance lock, so it never touches the
// resources of a live mce.
func (rt *Runtime) Reconcile(ctx context.Context) error {
	f := client.Filters{}.Add("label", LabelInstance+"="+rt.opts.Instance)
	cctx, cancel := context.WithTimeout(ctx, callTimeout)
	list, err := rt.engine.ContainerList(cctx, client.ContainerListOptions{All: true, Filters: f})
	cancel()
	if err != nil {
		return classify("list leftover containers", err)
	}
	var errs []error
	var mu sync.Mutex
	var wg sync.WaitGroup
	for _, s := range list.Items {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rctx, cancel := context.WithTimeout(ctx, callTimeout)
			_, err := rt.engine.ContainerRemove(rctx, s.ID, client.ContainerRemoveOptions{Force: true})
			cancel()
			if !gone(err) {
				mu.Lock()
				errs = append(errs, classify("remove leftover container "+s.ID[:12], err))
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	cctx, cancel = context.WithTimeout(ctx, callTimeout)
	nets, err := rt.engine.NetworkList(cctx, client.NetworkListOptions{Filters: f})
	cancel()
	if err != nil {
		return classify("list leftover networks", err)
	}
	for _, n := range nets.Items {
		rctx, cancel := context.WithTimeout(ctx, callTimeout)
		_, err := rt.engine.NetworkRemove(rctx, n.ID, client.NetworkRemoveOptions{})
		cancel()
		if !gone(err) {
			errs = append(errs, classify("remove leftover network "+n.Name, err))
		}
	}
	if err := os.RemoveAll(rt.artifactsDir()); err != nil {
		errs = append(errs, fmt.Errorf("remove leftover artifacts: %w", err))
	}
	if n := len(list.Items) + len(nets.Items); n > 0 {
		rt.log.Warn().Int("containers", len(list.Items)).Int("networks", len(nets.Items)).
			Str("instance", rt.opts.Instance).Msg("removed what an earlier run of this mce instance left behind")
	}
	return errors.Join(errs...)
}
