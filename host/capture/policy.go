package capture

import (
	"fmt"
	"regexp"
	"slices"
	"strings"

	"github.com/mce-run/mce/host/spec"
	"github.com/mce-run/mce/internal/wire"
)

// policy is one DataCaptureConfig made ready for the call path. It never
// changes once built: Capturer.Update replaces it whole, and every record
// keeps the policy it was sampled under (its destination and encodings).
type policy struct {
	enabled       bool
	pct           uint32 // 0–100
	input, output bool
	csv, json     []string
	dest          string // s3://bucket[/prefix], no final slash
	cfg           spec.DataCaptureConfig
}

// ConfigError is a DataCaptureConfig the capturer cannot carry out; host
// answers it as a ValidationException. spec.CreateEndpointConfigInput's
// Validate refuses all of these first; the capturer checks again because
// its configurations may also come from the state folder.
type ConfigError struct{ Message string }

func (e *ConfigError) Error() string { return e.Message }

var s3URIRe = regexp.MustCompile(wire.S3URIPattern)

// compile checks cfg and builds its policy; allowed, when not nil, says
// whether records may be written under a destination.
func compile(cfg spec.DataCaptureConfig, allowed func(string) bool) (*policy, error) {
	cfg = clone(cfg)
	p := &policy{enabled: cfg.EnableCapture == nil || *cfg.EnableCapture, cfg: cfg}
	if cfg.InitialSamplingPercentage == nil {
		return nil, &ConfigError{"DataCaptureConfig needs InitialSamplingPercentage (0–100)."}
	}
	pct := *cfg.InitialSamplingPercentage
	if pct < 0 || pct > 100 {
		return nil, &ConfigError{fmt.Sprintf("DataCaptureConfig's InitialSamplingPercentage is %d; it must be 0–100.", pct)}
	}
	p.pct = uint32(pct)
	if len(cfg.CaptureOptions) == 0 {
		return nil, &ConfigError{"DataCaptureConfig needs CaptureOptions: Input, Output or InputAndOutput."}
	}
	for _, o := range cfg.CaptureOptions {
		switch o.CaptureMode {
		case spec.CaptureInput:
			p.input = true
		case spec.CaptureOutput:
			p.output = true
		case spec.CaptureInputAndOutput:
			p.input, p.output = true, true
		default:
			return nil, &ConfigError{fmt.Sprintf("DataCaptureConfig's CaptureMode %q is not Input, Output or InputAndOutput.", o.CaptureMode)}
		}
	}
	dest := cfg.DestinationS3URI
	if !strings.HasPrefix(dest, "s3://") || !s3URIRe.MatchString(dest) {
		return nil, &ConfigError{fmt.Sprintf("DataCaptureConfig's DestinationS3Uri %q is not an s3://bucket[/prefix] location.", dest)}
	}
	if why := wire.S3KeyRefused(dest); why != "" {
		return nil, &ConfigError{fmt.Sprintf("DataCaptureConfig's DestinationS3Uri %q is refused: %s.", dest, why)}
	}
	p.dest = strings.TrimSuffix(dest, "/")
	if allowed != nil && !allowed(p.dest+"/") {
		return nil, &ConfigError{fmt.Sprintf("DataCaptureConfig's DestinationS3Uri %q is outside the S3 prefixes mce writes to.", dest)}
	}
	if h := cfg.CaptureContentTypeHeader; h != nil {
		p.csv, p.json = h.CSVContentTypes, h.JSONContentTypes
	}
	return p, nil
}

// clone is a deep copy of cfg, so that a caller's later changes to its
// slices and pointers reach neither the policy nor Status.
func clone(cfg spec.DataCaptureConfig) spec.DataCaptureConfig {
	if cfg.EnableCapture != nil {
		v := *cfg.EnableCapture
		cfg.EnableCapture = &v
	}
	if cfg.InitialSamplingPercentage != nil {
		v := *cfg.InitialSamplingPercentage
		cfg.InitialSamplingPercentage = &v
	}
	cfg.CaptureOptions = slices.Clone(cfg.CaptureOptions)
	if h := cfg.CaptureContentTypeHeader; h != nil {
		cfg.CaptureContentTypeHeader = &spec.CaptureContentTypeHeader{
			CSVContentTypes:  slices.Clone(h.CSVContentTypes),
			JSONContentTypes: slices.Clone(h.JSONContentTypes),
		}
	}
	return cfg
}
