package docker

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/mce-run/mce/internal/parallel"
)

// Scale changes the number of copies of a variant: new copies are started and
// must pass /ping before Scale returns; surplus copies (the highest-numbered)
// are stopped and removed. Take surplus copies out of routing before scaling
// down.
func (d *Deployment) Scale(ctx context.Context, variant string, copies int) error {
	if copies < 1 {
		return fmt.Errorf("%w: variant %q needs at least one copy", ErrInvalidSpec, variant)
	}
	var vs *VariantSpec
	for i := range d.spec.Variants {
		if d.spec.Variants[i].Name == variant {
			vs = &d.spec.Variants[i]
		}
	}
	if vs == nil {
		return fmt.Errorf("endpoint %q has no variant %q", d.endpoint, variant)
	}
	current := d.Copies(variant)
	switch {
	case copies > len(current):
		added, err := d.launchCopies(ctx, *vs, len(current), copies)
		if err != nil {
			// The copies that did start are removed even when ctx is what
			// failed: detached from its cancellation, bounded on its own.
			cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), d.rt.opts.StopGrace+time.Minute)
			defer cancel()
			var started []*Container
			for _, c := range d.rt.containersOf(d.endpoint, d.gen) {
				if c.variant == variant && c.copy >= len(current) {
					started = append(started, c)
				}
			}
			parallel.Each(started, func(c *Container) error { return c.remove(cctx, 0) }) // best effort: err says why Scale failed
			return err
		}
		d.setCopies(variant, append(current, added...))
	case copies < len(current):
		d.setCopies(variant, current[:copies])
		removed := slices.Concat(current[copies:]...)
		if err := parallel.Each(removed, func(c *Container) error { return c.remove(ctx, d.rt.opts.StopGrace) }); err != nil {
			return err
		}
	}
	d.mu.Lock()
	vs.Copies = copies
	d.mu.Unlock()
	return nil
}

func (d *Deployment) setCopies(variant string, copies [][]*Container) {
	d.mu.Lock()
	defer d.mu.Unlock()
	for _, v := range d.variants {
		if v.Name == variant {
			v.Copies = copies
		}
	}
}
