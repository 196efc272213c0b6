package probe

import (
	"fmt"
	"strconv"
	"time"

	"github.com/mce-run/mce/examples/containers/internal/smserve"
)

// Settings are the probe's environment settings. The zero value is a plain echo server.
type Settings struct {
	// Tag (PROBE_TAG) is appended to every echo.
	Tag string
	// PingFail (PROBE_PING=fail) makes /ping always answer 503.
	PingFail bool
	// ReadyAfter (PROBE_READY_AFTER) keeps /ping at 503 for this long after start.
	ReadyAfter time.Duration
	// ExitAfter (PROBE_EXIT_AFTER), when positive, ends the process this long after start with ExitCode
	// (PROBE_EXIT_CODE, default 1).
	ExitAfter time.Duration
	ExitCode  int
	// Status (PROBE_STATUS, 200-599), when set, is the status of every
	// invocation without a status= attribute of its own, as status=
	// answers it: a model that always fails, for rollout tests.
	Status int
}

// SettingsFromConfig reads the PROBE_* variables. Errors wrap smserve.ErrConfig.
func SettingsFromConfig(cfg smserve.Config) (Settings, error) {
	s := Settings{Tag: cfg.Getenv("PROBE_TAG"), ExitCode: 1}
	switch v := cfg.Getenv("PROBE_PING"); v {
	case "", "ok":
	case "fail":
		s.PingFail = true
	default:
		return Settings{}, fmt.Errorf("%w: PROBE_PING=%q (want ok or fail)", smserve.ErrConfig, v)
	}
	var err error
	if s.ReadyAfter, err = envDuration(cfg, "PROBE_READY_AFTER"); err != nil {
		return Settings{}, err
	}
	if s.ExitAfter, err = envDuration(cfg, "PROBE_EXIT_AFTER"); err != nil {
		return Settings{}, err
	}
	if v := cfg.Getenv("PROBE_EXIT_CODE"); v != "" {
		c, err := strconv.Atoi(v)
		if err != nil || c < 0 || c > 255 {
			return Settings{}, fmt.Errorf("%w: PROBE_EXIT_CODE=%q (want 0-255)", smserve.ErrConfig, v)
		}
		s.ExitCode = c
	}
	if v := cfg.Getenv("PROBE_STATUS"); v != "" {
		c, err := strconv.Atoi(v)
		if err != nil || c < 200 || c > 599 {
			return Settings{}, fmt.Errorf("%w: PROBE_STATUS=%q (want 200-599)", smserve.ErrConfig, v)
		}
		s.Status = c
	}
	return s, nil
}

func envDuration(cfg smserve.Config, key string) (time.Duration, error) {
	v := cfg.Getenv(key)
	if v == "" {
		return 0, nil
	}
	d, err := time.ParseDuration(v)
	if err != nil || d < 0 {
		return 0, fmt.Errorf("%w: %s=%q is not a non-negative Go duration such as 1.5s", smserve.ErrConfig, key, v)
	}
	return d, nil
}
