// Package parallel runs independent pieces of work at once and reports every
// failure, for teardown: removing containers, closing deployments. Unlike
// errgroup.Group, a failure cancels nothing and is not the only one kept: each
// piece runs to the end, and the errors of all are joined.
package parallel

import (
	"errors"
	"sync"
)

// Each calls fn on every item, all at once, waits for all of them and returns
// their errors joined (nil when none failed), in no particular order.
func Each[T any](items []T, fn func(T) error) error {
	var (
		wg   sync.WaitGroup
		mu   sync.Mutex
		errs []error
	)
	for _, it := range items {
		wg.Go(func() {
			if err := fn(it); err != nil {
				mu.Lock()
				errs = append(errs, err)
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	return errors.Join(errs...)
}
