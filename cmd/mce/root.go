package main

import (
	"fmt"
	"io"
	"os"
	"runtime/debug"
	"strings"
	"time"

	"github.com/mattn/go-isatty"
	"github.com/rs/zerolog"
	"github.com/spf13/cobra"
)

// version may be set at build time with -ldflags "-X main.version=…"; when it
// is not, buildVersion reads the module version and VCS stamp Go embeds.
var version = ""

// buildVersion describes this binary: the -ldflags version when set, else the
// main module's version with the commit, its time and "modified" when the
// work tree had changes, as `go build` records them.
func buildVersion() string {
	bi, ok := debug.ReadBuildInfo()
	v := version
	if v == "" && ok {
		v = bi.Main.Version
	}
	if v == "" || v == "(devel)" {
		v = "devel"
	}
	if !ok {
		return v
	}
	var rev, at, modified string
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value
		case "vcs.time":
			at = s.Value
		case "vcs.modified":
			if s.Value == "true" {
				modified = ", modified"
			}
		}
	}
	if rev != "" {
		v += fmt.Sprintf(" (commit %s, %s%s)", rev, at, modified)
	}
	return v + ", " + bi.GoVersion
}

func newRootCmd() *cobra.Command {
	root := &cobra.Command{
		Use:   "mce",
		Short: "Run SageMaker-style multi-container and multi-model endpoints on Docker or Kubernetes",
		Long: `mce runs Amazon SageMaker-style endpoints on the local Docker engine or on a Kubernetes
cluster (serve --engine kubernetes): multi-container endpoints (up to 15 containers,
invoked directly by TargetContainerHostname or serially as a chain) and multi-model
endpoints behind the SageMaker Runtime API. boto3, the aws CLI and every AWS SDK work
against it with only the endpoint URL changed.

Start with:  mce serve -f examples/go-ab-test/endpoint.yaml
Then:        mce invoke ab-test --target-container english 'what a lovely day'
Check a container image against SageMaker's contract:  mce check mce-example/probe:latest
Load-test an endpoint in stages, with a report and charts:  mce loadtest ab-test --endpoint-url http://127.0.0.1:8080 --target-container english --users 1,4,16 --duration 10s`,
		SilenceUsage:  true,
		SilenceErrors: true,
		Version:       buildVersion(),
	}
	root.AddCommand(newServeCmd(), newInvokeCmd(), newEndpointsCmd(), newDescribeCmd(), newDeleteCmd(), newPolicyCmd(), newCheckCmd(), newLogsCmd(), newFetchCmd(), newAgentCmd(), newLoadtestCmd(), newTokenCmd())
	return root
}

// logFlags are shared by commands that log.
type logFlags struct {
	format string
	level  string
}

func (f *logFlags) register(cmd *cobra.Command) {
	cmd.Flags().StringVar(&f.format, "log-format", "auto", "log format: json, console, or auto (console on a terminal, else json)")
	cmd.Flags().StringVar(&f.level, "log-level", "info", "log level: debug, info, warn, error")
}

func (f *logFlags) logger(w io.Writer) (zerolog.Logger, error) {
	lvl, err := zerolog.ParseLevel(strings.ToLower(f.level))
	if err != nil || lvl == zerolog.NoLevel {
		return zerolog.Logger{}, fmt.Errorf("--log-level %q: want debug, info, warn or error", f.level)
	}
	format := f.format
	if format == "auto" {
		format = "json"
		if file, ok := w.(*os.File); ok && isatty.IsTerminal(file.Fd()) {
			format = "console"
		}
	}
	switch format {
	case "json":
	case "console":
		w = zerolog.ConsoleWriter{Out: w, TimeFormat: time.TimeOnly}
	default:
		return zerolog.Logger{}, fmt.Errorf("--log-format %q: want json, console or auto", f.format)
	}
	return zerolog.New(w).Level(lvl).With().Timestamp().Logger(), nil
}
