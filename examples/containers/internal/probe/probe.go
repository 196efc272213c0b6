package probe

import (
	"context"
	"fmt"
	"os"
	"time"

	"github.com/mce-run/mce/examples/containers/internal/smserve"
)

// Program is the probe container.
func Program() smserve.Program {
	return smserve.Program{Name: "probe", Load: Load}
}

// Load reads the PROBE_* settings and starts the PROBE_EXIT_AFTER timer, which ctx cancels.
func Load(ctx context.Context, cfg smserve.Config) (smserve.Loaded, error) {
	s, err := SettingsFromConfig(cfg)
	if err != nil {
		return smserve.Loaded{}, err
	}
	host, err := os.Hostname()
	if err != nil {
		return smserve.Loaded{}, fmt.Errorf("hostname: %w", err)
	}
	h := NewHandler(s, cfg, host, time.Now())
	if s.ExitAfter > 0 {
		go func() {
			t := time.NewTimer(s.ExitAfter)
			defer t.Stop()
			select {
			case <-t.C:
				cfg.Exit(s.ExitCode)
			case <-ctx.Done():
			}
		}()
	}
	summary := fmt.Sprintf("hostname %s, tag %q, ping fail %v, ready after %s, exit after %s (code %d)",
		host, s.Tag, s.PingFail, s.ReadyAfter, s.ExitAfter, s.ExitCode)
	return smserve.Loaded{Invocations: h, Ready: h.Ready, Summary: summary, Bidirectional: bidirectional(s.Tag)}, nil
}
