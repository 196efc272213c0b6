package smserve

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// Defaults from the inference container contract (https://docs.aws.amazon.com/sagemaker/latest/dg/your-algorithms-inference-code.html, https://docs.aws.amazon.com/sagemaker/latest/dg/inference-pipeline-real-time.html).
const (
	// DefaultPort is the port used when SAGEMAKER_BIND_TO_PORT is unset.
	DefaultPort = 8080
	// DefaultModelDir is where SageMaker unpacks ModelDataUrl.
	DefaultModelDir = "/opt/ml/model"
)

// Environment variable names read by ConfigFromEnviron.
const (
	EnvBindToPort    = "SAGEMAKER_BIND_TO_PORT"
	EnvModelDir      = "SM_MODEL_DIR"
	EnvDefaultAccept = "SAGEMAKER_DEFAULT_INVOCATIONS_ACCEPT"
)

// ErrConfig marks a configuration error (bad environment, bad arguments). ExitCode maps it to exit status 2.
var ErrConfig = errors.New("invalid configuration")

// Config is what a program learns from its environment at start. Build it with ConfigFromEnviron; it is
// read-only afterwards and safe to share between goroutines.
type Config struct {
	// Port is the TCP port to listen on: SAGEMAKER_BIND_TO_PORT, else DefaultPort.
	Port int
	// ModelDir holds the unpacked model artifact: SM_MODEL_DIR, else DefaultModelDir.
	ModelDir string
	// DefaultAccept is SAGEMAKER_DEFAULT_INVOCATIONS_ACCEPT: the response type to use when a request's Accept
	// is empty or */* (https://docs.aws.amazon.com/sagemaker/latest/dg/inference-pipelines.html). Empty means the program's own default.
	DefaultAccept string
	// Environ is the whole environment as KEY=value pairs, in the order given.
	Environ []string
	// Exit ends the process at once with the given status, skipping graceful shutdown. Main uses os.Exit;
	// tests pass a recorder. Never nil in a Config built by ConfigFromEnviron.
	Exit func(code int)

	env map[string]string
}

// Getenv returns the value of key in c.Environ (the last one wins, as with os.Getenv), or "".
func (c Config) Getenv(key string) string {
	return c.env[key]
}

// ConfigFromEnviron builds a Config from KEY=value pairs. exit may be nil, in which case Config.Exit panics
// (useful in tests that must not exit). An invalid SAGEMAKER_BIND_TO_PORT is an error wrapping ErrConfig.
func ConfigFromEnviron(environ []string, exit func(int)) (Config, error) {
	env := make(map[string]string, len(environ))
	for _, kv := range environ {
		k, v, ok := strings.Cut(kv, "=")
		if !ok || k == "" {
			continue
		}
		env[k] = v
	}
	if exit == nil {
		exit = func(code int) { panic(fmt.Sprintf("smserve: Exit(%d) called without an exit function", code)) }
	}
	c := Config{
		Port:          DefaultPort,
		ModelDir:      DefaultModelDir,
		DefaultAccept: env[EnvDefaultAccept],
		Environ:       environ,
		Exit:          exit,
		env:           env,
	}
	if v, ok := env[EnvBindToPort]; ok && v != "" {
		p, err := ParsePort(v)
		if err != nil {
			return Config{}, fmt.Errorf("%s: %w", EnvBindToPort, err)
		}
		c.Port = p
	}
	if v := env[EnvModelDir]; v != "" {
		c.ModelDir = v
	}
	return c, nil
}

// ParsePort parses a decimal TCP port in 1–65535. Errors wrap ErrConfig.
func ParsePort(s string) (int, error) {
	p, err := strconv.Atoi(s)
	if err != nil || p < 1 || p > 65535 {
		return 0, fmt.Errorf("%w: %q is not a TCP port (1-65535)", ErrConfig, s)
	}
	return p, nil
}

// ExitCode maps the error returned by Start or Serve to a process exit status: 0 for nil, 2 for
// configuration errors (ErrConfig), 1 otherwise.
func ExitCode(err error) int {
	switch {
	case err == nil:
		return 0
	case errors.Is(err, ErrConfig):
		return 2
	default:
		return 1
	}
}
