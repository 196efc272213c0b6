package docker

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"time"
)

// pingTimeout is SageMaker's per-request /ping timeout (https://docs.aws.amazon.com/sagemaker/latest/dg/your-algorithms-inference-code.html).
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
//
// A wait longer than pingProgressEvery is reported at info every
// pingProgressEvery, with the time waited and the container's last output
// line, and its end with the time it took.
func (c *Container) waitHealthy(ctx context.Context, window time.Duration) error {
	deadline := time.NewTimer(window)
	defer deadline.Stop()
	wait := 20 * time.Millisecond
	start := time.Now()
	nextReport := start.Add(pingProgressEvery)
	var last error
	for {
		if last = c.ping(ctx); last == nil {
			if took := time.Since(start); took >= pingProgressEvery {
				c.log.Info().Str("event", "ping_ready").Dur("took_ms", took).
					Msgf("%s passed /ping after %s", c.spec.Hostname, roundDuration(took))
			}
			return nil
		}
		if now := time.Now(); !now.Before(nextReport) {
			nextReport = now.Add(pingProgressEvery)
			c.reportPingWait(now.Sub(start), window, last)
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

// pingProgressEvery is how often a long wait for /ping is reported.
const pingProgressEvery = 5 * time.Second

// reportPingWait logs one progress line of a wait for /ping, last being the
// error of the ping that just failed:
// "waiting for /ping on english (12s of 60s): <last output line>".
func (c *Container) reportPingWait(elapsed, window time.Duration, last error) {
	line := "(no output yet)"
	if tail := c.tail.lines(); len(tail) > 0 {
		line = tail[len(tail)-1]
	}
	c.log.Info().Str("event", "ping_wait").Dur("elapsed_ms", elapsed).
		Dur("timeout_ms", window).Str("last_output", line).
		Str("ping", firstLine(last.Error(), 200)).
		Msgf("waiting for /ping on %s (%s of %s): %s", c.spec.Hostname, roundDuration(elapsed), window, line)
}

// roundDuration prints a duration with a unit at a precision fit for a log
// line: whole seconds from 10 s, tenths below, milliseconds below 1 s.
func roundDuration(d time.Duration) string {
	switch {
	case d >= 10*time.Second:
		return d.Round(time.Second).String()
	case d >= time.Second:
		return d.Round(100 * time.Millisecond).String()
	}
	return d.Round(time.Millisecond).String()
}
