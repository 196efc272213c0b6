package containers

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"time"
)

// pingTimeout is SageMaker's per-request /ping timeout (contracts doc §3.1).
const pingTimeout = 2 * time.Second

// failedPingsToUnready is how many liveness pings in a row must fail before a
// ready container leaves routing.
const failedPingsToUnready = 3

// ping sends GET /ping and returns nil on 200, else a short description of what
// came back.
func (c *Container) ping(ctx context.Context) error {
	base := c.BaseURL()
	if base == "" {
		return fmt.Errorf("no address yet")
	}
	pctx, cancel := context.WithTimeout(ctx, pingTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(pctx, http.MethodGet, base+"/ping", nil)
	if err != nil {
		return err
	}
	resp, err := c.rt.pinger.Do(req)
	if err != nil {
		return err
	}
	io.Copy(io.Discard, io.LimitReader(resp.Body, 4096))
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET /ping answered %d", resp.StatusCode)
	}
	return nil
}

// waitHealthy polls /ping until it answers 200, the container exits, or the
// window closes. Polling starts fast (a container usually binds its port in
// tens of milliseconds) and backs off to 250 ms.
func (c *Container) waitHealthy(ctx context.Context, window time.Duration) error {
	deadline := time.NewTimer(window)
	defer deadline.Stop()
	wait := 20 * time.Millisecond
	var last error
	for {
		if last = c.ping(ctx); last == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case code := <-c.died:
			c.lastExit.Store(int64(code))
			time.Sleep(200 * time.Millisecond) // let the log stream drain
			return &LaunchError{Endpoint: c.endpoint, Variant: c.variant, Container: c.spec.Hostname,
				Reason: fmt.Sprintf("exited with code %d before it passed the ping health check", code), LogTail: c.LogTail()}
		case <-deadline.C:
			return &LaunchError{Endpoint: c.endpoint, Variant: c.variant, Container: c.spec.Hostname,
				Reason: fmt.Sprintf("did not pass the ping health check within %s", window), Err: last, LogTail: c.LogTail()}
		case <-time.After(wait):
		}
		if wait < 250*time.Millisecond {
			wait *= 2
		}
	}
}
