package docker

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"

	"github.com/moby/moby/api/types/network"
	"github.com/moby/moby/client"

	"github.com/mce-run/mce/internal/parallel"
)

// Reconcile removes every container and network labelled with this runtime's
// instance name that no live deployment of this runtime owns, and their
// extracted artifacts: what an earlier run of this instance left behind
// (after a crash or SIGKILL). New calls it unless Options.Adopt is set; with
// Adopt, call Adopt for each endpoint to keep first, then Reconcile. It runs
// under the instance lock, so it never touches the resources of a live mce.
func (rt *Runtime) Reconcile(ctx context.Context) error {
	f := client.Filters{}.Add("label", LabelInstance+"="+rt.opts.Instance)
	cctx, cancel := context.WithTimeout(ctx, callTimeout)
	list, err := rt.engine.ContainerList(cctx, client.ContainerListOptions{All: true, Filters: f})
	cancel()
	if err != nil {
		return classify("list leftover containers", err)
	}
	keep := rt.keptEndpoints()
	var leftovers []string
	for _, s := range list.Items {
		if rt.lookup(s.ID) != nil {
			continue // a live container of an adopted or running deployment
		}
		leftovers = append(leftovers, s.ID)
	}
	removed := len(leftovers)
	errs := []error{parallel.Each(leftovers, func(id string) error {
		rctx, cancel := context.WithTimeout(ctx, callTimeout)
		_, err := rt.engine.ContainerRemove(rctx, id, client.ContainerRemoveOptions{Force: true})
		cancel()
		if !gone(err) {
			return classify("remove leftover container "+id[:12], err)
		}
		return nil
	})}
	cctx, cancel = context.WithTimeout(ctx, callTimeout)
	nets, err := rt.engine.NetworkList(cctx, client.NetworkListOptions{Filters: f})
	cancel()
	if err != nil {
		return classify("list leftover networks", err)
	}
	var leftoverNets []network.Summary
	for _, n := range nets.Items {
		if keep[n.Labels[LabelEndpoint]] == nil {
			leftoverNets = append(leftoverNets, n)
		}
	}
	removedNets := len(leftoverNets)
	errs = append(errs, parallel.Each(leftoverNets, func(n network.Summary) error {
		rctx, cancel := context.WithTimeout(ctx, callTimeout)
		_, err := rt.engine.NetworkRemove(rctx, n.ID, client.NetworkRemoveOptions{})
		cancel()
		if !gone(err) {
			return classify("remove leftover network "+n.Name, err)
		}
		return nil
	}))
	errs = append(errs, rt.removeLeftoverArtifacts(keep))
	if removed+removedNets > 0 {
		rt.log.Warn().Int("containers", removed).Int("networks", removedNets).
			Str("instance", rt.opts.Instance).Msg("removed what an earlier run of this mce instance left behind")
	}
	return errors.Join(errs...)
}

// keptEndpoints maps each endpoint with a live deployment to its generations.
func (rt *Runtime) keptEndpoints() map[string]map[int]bool {
	rt.mu.Lock()
	defer rt.mu.Unlock()
	keep := map[string]map[int]bool{}
	for k := range rt.deployments {
		if keep[k.endpoint] == nil {
			keep[k.endpoint] = map[int]bool{}
		}
		keep[k.endpoint][k.gen] = true
	}
	return keep
}

// removeLeftoverArtifacts deletes artifact folders of deployments that no
// longer exist: artifacts/<endpoint>/g<generation>.
func (rt *Runtime) removeLeftoverArtifacts(keep map[string]map[int]bool) error {
	eps, err := os.ReadDir(rt.artifactsDir())
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("read artifacts folder: %w", err)
	}
	var errs []error
	for _, ep := range eps {
		epDir := filepath.Join(rt.artifactsDir(), ep.Name())
		gens, err := os.ReadDir(epDir)
		if err != nil {
			errs = append(errs, os.RemoveAll(epDir))
			continue
		}
		left := 0
		for _, g := range gens {
			n, err := strconv.Atoi(g.Name()[min(1, len(g.Name())):])
			if err == nil && keep[ep.Name()][n] {
				left++
				continue
			}
			errs = append(errs, os.RemoveAll(filepath.Join(epDir, g.Name())))
		}
		if left == 0 {
			errs = append(errs, os.RemoveAll(epDir))
		}
	}
	return errors.Join(errs...)
}
