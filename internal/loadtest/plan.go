package loadtest

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"
)

// Limits of a plan: past these a plan is refused, not trimmed.
const (
	MaxStages      = 100
	MaxUsers       = 10000
	MaxRate        = 100000 // requests per second
	MinRate        = 0.01   // requests or users per second
	MaxModels      = 1000000
	MaxInFlightCap = 20000
	maxPlanBytes   = 1 << 20
	// MaxSpawnRate is the most users started a second: MaxUsers at once.
	MaxSpawnRate = MaxUsers
	// MaxTargets is the most latency bounds in a target: each is checked
	// against every stage's latencies.
	MaxTargets = 16
	// MaxFirstModel bounds first_model, so that model numbers stay small.
	MaxFirstModel = 1_000_000_000
	// MaxRunDuration bounds a run (its per-second figures grow with it).
	MaxRunDuration = 24 * time.Hour
)

// Duration is a time.Duration written as Go writes it ("30s", "1m30s") in a
// plan file.
type Duration time.Duration

// UnmarshalYAML accepts a Go duration string ("250ms") or a number of seconds.
func (d *Duration) UnmarshalYAML(n *yaml.Node) error {
	var s string
	if err := n.Decode(&s); err != nil {
		return err
	}
	if f, err := strconv.ParseFloat(s, 64); err == nil {
		if f < 0 || f > 1e9 || math.IsNaN(f) {
			return fmt.Errorf("line %d: %q is not a duration", n.Line, s)
		}
		*d = Duration(f * float64(time.Second))
		return nil
	}
	v, err := time.ParseDuration(s)
	if err != nil {
		return fmt.Errorf("line %d: %q is not a duration (e.g. 30s, 1m, 250ms)", n.Line, s)
	}
	*d = Duration(v)
	return nil
}

// MarshalYAML writes the duration as Go writes it.
func (d Duration) MarshalYAML() (any, error) { return time.Duration(d).String(), nil }

// UnmarshalJSON reads what MarshalJSON writes, or a number of seconds.
func (d *Duration) UnmarshalJSON(b []byte) error {
	var n yaml.Node
	if err := yaml.Unmarshal(b, &n); err != nil {
		return err
	}
	if len(n.Content) != 1 {
		return fmt.Errorf("%s is not a duration", b)
	}
	return d.UnmarshalYAML(n.Content[0])
}

// MarshalJSON writes the duration as Go writes it.
func (d Duration) MarshalJSON() ([]byte, error) {
	return []byte(strconv.Quote(time.Duration(d).String())), nil
}

// Stage is one step of load. Exactly one of Users and Rate is set.
type Stage struct {
	// Name labels the stage in reports; default "stage N" with N from 1.
	Name string `yaml:"name,omitempty" json:"name"`
	// Users is the number of concurrent users (closed model): each sends a
	// request, waits for the answer and the think time, and sends again.
	// Users carry over from one user stage to the next; more are started at
	// SpawnRate, fewer are stopped after their current request.
	Users int `yaml:"users,omitempty" json:"users,omitempty"`
	// SpawnRate is how many users start per second; 0 starts them at once.
	SpawnRate float64 `yaml:"spawn_rate,omitempty" json:"spawn_rate,omitempty"`
	// Rate is a target request rate per second (open model): requests are
	// scheduled at even intervals whatever the answers' latency, and latency
	// counts from the scheduled time.
	Rate float64 `yaml:"rate,omitempty" json:"rate,omitempty"`
	// Duration is how long the stage lasts, ramp included. Required.
	Duration Duration `yaml:"duration" json:"duration"`
	// ThinkTime is each user's pause after an answer; default the plan's.
	ThinkTime *Duration `yaml:"think_time,omitempty" json:"think_time,omitempty"`
}

// Traffic says which TargetModel each request names.
type Traffic struct {
	// Models is the number of models; 0 sends no TargetModel.
	Models int `yaml:"models,omitempty" json:"models,omitempty"`
	// ModelPattern makes a model's name: {i} becomes its number, {i:03}
	// its number zero-padded to 3 digits (default "model-{i}.tar.gz").
	ModelPattern string `yaml:"model_pattern,omitempty" json:"model_pattern,omitempty"`
	// FirstModel is the first model's number (default 1): the models are
	// FirstModel to FirstModel+Models-1, the first the most popular.
	FirstModel *int `yaml:"first_model,omitempty" json:"first_model,omitempty"`
	// Shape is uniform (default), top-k (the first TopK models take Share of
	// the requests, the rest share the remainder evenly) or hot (model 1 takes
	// Share).
	Shape string `yaml:"shape,omitempty" json:"shape,omitempty"`
	// TopK is the number of popular models for top-k.
	TopK int `yaml:"top_k,omitempty" json:"top_k,omitempty"`
	// Share is the popular models' share of requests, 0 to 1 (default 0.9).
	Share float64 `yaml:"share,omitempty" json:"share,omitempty"`
}

// Request holds what every request carries besides its model and body.
type Request struct {
	ContentType      string `yaml:"content_type,omitempty" json:"content_type,omitempty"`
	Accept           string `yaml:"accept,omitempty" json:"accept,omitempty"`
	CustomAttributes string `yaml:"custom_attributes,omitempty" json:"custom_attributes,omitempty"`
	TargetContainer  string `yaml:"target_container,omitempty" json:"target_container,omitempty"`
	TargetVariant    string `yaml:"target_variant,omitempty" json:"target_variant,omitempty"`
	// InferenceComponent is InferenceComponentName: the component of an
	// endpoint that hosts inference components every call goes to.
	InferenceComponent string `yaml:"inference_component,omitempty" json:"inference_component,omitempty"`
	// Stream calls InvokeEndpointWithResponseStream and measures the time to
	// the first part as well.
	Stream bool `yaml:"stream,omitempty" json:"stream,omitempty"`
	// Timeout bounds one call (default 70s, SageMaker's own bound).
	Timeout Duration `yaml:"timeout,omitempty" json:"timeout,omitempty"`
}

// Stop says when a run ends before its last stage.
type Stop struct {
	// ErrorRate ends the run after a stage whose share of failed requests is
	// above it (0 to 1); 0 never stops for errors.
	ErrorRate float64 `yaml:"error_rate,omitempty" json:"error_rate,omitempty"`
	// OnTargetMiss ends the run after the first stage that missed the latency
	// target.
	OnTargetMiss bool `yaml:"on_target_miss,omitempty" json:"on_target_miss,omitempty"`
}

// Limits bound a run whatever its stages say.
type Limits struct {
	// MaxRequests ends the run once this many requests were sent; 0 is no
	// bound.
	MaxRequests int64 `yaml:"max_requests,omitempty" json:"max_requests,omitempty"`
	// MaxDuration ends the run after this long (default 1h).
	MaxDuration Duration `yaml:"max_duration,omitempty" json:"max_duration,omitempty"`
	// MaxInFlight bounds the requests of a rate stage waiting for an answer
	// (default 1000); a request that finds them all busy waits, and its wait
	// counts in its latency.
	MaxInFlight int `yaml:"max_inflight,omitempty" json:"max_inflight,omitempty"`
}

// Plan is a whole load test. Validate fills defaults and rejects bad plans.
type Plan struct {
	Stages    []Stage  `yaml:"stages" json:"stages"`
	ThinkTime Duration `yaml:"think_time,omitempty" json:"think_time,omitempty"`
	Traffic   Traffic  `yaml:"traffic,omitempty" json:"traffic"`
	Request   Request  `yaml:"request,omitempty" json:"request"`
	// Target is the latency target, e.g. "p90=200ms" or "p50=20ms,p99=500ms".
	Target string `yaml:"target,omitempty" json:"target,omitempty"`
	Stop   Stop   `yaml:"stop,omitempty" json:"stop"`
	Limits Limits `yaml:"limits,omitempty" json:"limits"`
	// Seed makes the choice of models and payloads repeatable; 0 picks one.
	Seed int64 `yaml:"seed,omitempty" json:"seed,omitempty"`

	targets []Target
}

// Target is one latency bound: the Percentile (0 < p ≤ 100) of a stage's
// latency must be at most Limit.
type Target struct {
	Percentile float64
	Limit      time.Duration
}

func (t Target) String() string {
	return fmt.Sprintf("p%s<=%s", strconv.FormatFloat(t.Percentile, 'f', -1, 64), t.Limit)
}

// ParseTargets reads "p90=200ms" or a comma-separated list of such bounds
// ("<=" may stand for "=").
func ParseTargets(s string) ([]Target, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return nil, nil
	}
	if n := strings.Count(s, ",") + 1; n > MaxTargets {
		return nil, fmt.Errorf("the latency target has %d bounds, more than %d", n, MaxTargets)
	}
	var out []Target
	for _, part := range strings.Split(s, ",") {
		part = strings.TrimSpace(part)
		p, lim, ok := strings.Cut(strings.Replace(part, "<=", "=", 1), "=")
		if !ok || !strings.HasPrefix(strings.ToLower(p), "p") {
			return nil, fmt.Errorf("latency target %q: want pNN=DURATION, e.g. p90=200ms", part)
		}
		pct, err := strconv.ParseFloat(strings.TrimSpace(p[1:]), 64)
		if err != nil || !(pct > 0 && pct <= 100) {
			return nil, fmt.Errorf("latency target %q: the percentile must be above 0 and at most 100", part)
		}
		d, err := time.ParseDuration(strings.TrimSpace(lim))
		if err != nil || d <= 0 {
			return nil, fmt.Errorf("latency target %q: %q is not a positive duration (e.g. 200ms)", part, lim)
		}
		out = append(out, Target{Percentile: pct, Limit: d})
	}
	return out, nil
}

// Targets returns the parsed latency target (after Validate).
func (p *Plan) Targets() []Target { return p.targets }

// ReadPlan reads a plan from YAML or JSON (JSON is YAML), refusing keys it
// does not know. It does not validate: call Validate after applying flags.
func ReadPlan(r io.Reader) (*Plan, error) {
	b, err := io.ReadAll(io.LimitReader(r, maxPlanBytes+1))
	if err != nil {
		return nil, err
	}
	if len(b) > maxPlanBytes {
		return nil, errors.New("the plan is over 1 MiB")
	}
	dec := yaml.NewDecoder(bytes.NewReader(b))
	dec.KnownFields(true)
	var p Plan
	if err := dec.Decode(&p); err != nil {
		if errors.Is(err, io.EOF) {
			return nil, errors.New("the plan is empty")
		}
		return nil, fmt.Errorf("reading the plan: %w", err)
	}
	return &p, nil
}

// Validate fills defaults and returns an error naming the first thing wrong.
func (p *Plan) Validate() error {
	if len(p.Stages) == 0 {
		return errors.New("the plan has no stages: give --users or --rate, or a plan file with stages")
	}
	if len(p.Stages) > MaxStages {
		return fmt.Errorf("the plan has %d stages, more than %d", len(p.Stages), MaxStages)
	}
	if p.ThinkTime < 0 {
		return errors.New("think_time is negative")
	}
	if p.ThinkTime > Duration(MaxRunDuration) {
		return fmt.Errorf("think_time must be at most %s", MaxRunDuration)
	}
	for i := range p.Stages {
		s := &p.Stages[i]
		if s.Name == "" {
			s.Name = fmt.Sprintf("stage %d", i+1)
		}
		switch {
		case s.Users > 0 && s.Rate > 0:
			return fmt.Errorf("%s: give users or rate, not both", s.Name)
		case s.Users < 0 || s.Rate < 0 || s.SpawnRate < 0 || math.IsNaN(s.Rate) || math.IsNaN(s.SpawnRate):
			return fmt.Errorf("%s: users, rate and spawn_rate cannot be negative", s.Name)
		case s.SpawnRate > MaxSpawnRate || math.IsInf(s.SpawnRate, 0):
			return fmt.Errorf("%s: a spawn_rate of %g users/s is more than %d/s", s.Name, s.SpawnRate, MaxSpawnRate)
		case s.Users == 0 && s.Rate == 0:
			return fmt.Errorf("%s: give users (concurrent users) or rate (requests per second)", s.Name)
		case s.Users > MaxUsers:
			return fmt.Errorf("%s: %d users is more than %d", s.Name, s.Users, MaxUsers)
		case s.Rate > MaxRate || math.IsInf(s.Rate, 0):
			return fmt.Errorf("%s: a rate of %g/s is more than %d/s", s.Name, s.Rate, MaxRate)
		case s.Rate > 0 && s.Rate < MinRate, s.SpawnRate > 0 && s.SpawnRate < MinRate:
			return fmt.Errorf("%s: rate and spawn_rate must be at least %g a second", s.Name, MinRate)
		case s.Rate > 0 && s.SpawnRate > 0:
			return fmt.Errorf("%s: spawn_rate applies to users, not to a rate", s.Name)
		case s.Duration <= 0:
			return fmt.Errorf("%s: needs a duration (e.g. 30s)", s.Name)
		case s.Duration > Duration(MaxRunDuration):
			return fmt.Errorf("%s: a duration of %s is more than a run's %s", s.Name, time.Duration(s.Duration), MaxRunDuration)
		case s.ThinkTime != nil && *s.ThinkTime < 0:
			return fmt.Errorf("%s: think_time is negative", s.Name)
		case s.ThinkTime != nil && *s.ThinkTime > Duration(MaxRunDuration):
			return fmt.Errorf("%s: think_time must be at most %s", s.Name, MaxRunDuration)
		}
		if s.Rate > 0 && s.ThinkTime != nil && *s.ThinkTime > 0 {
			return fmt.Errorf("%s: think_time applies to users, not to a rate", s.Name)
		}
	}
	t := &p.Traffic
	if t.Models < 0 || t.Models > MaxModels {
		return fmt.Errorf("traffic: models must be 0 to %d", MaxModels)
	}
	if t.ModelPattern == "" {
		t.ModelPattern = "model-{i}.tar.gz"
	}
	if t.Models > 0 && !modelNumberRE.MatchString(t.ModelPattern) {
		return fmt.Errorf("traffic: model_pattern %q has no {i} (or {i:03}) for the model's number", t.ModelPattern)
	}
	if t.FirstModel == nil {
		one := 1
		t.FirstModel = &one
	}
	if *t.FirstModel < 0 || *t.FirstModel > MaxFirstModel {
		return fmt.Errorf("traffic: first_model must be 0 to %d", MaxFirstModel)
	}
	if t.Shape == "" {
		t.Shape = ShapeUniform
	}
	if t.Share == 0 {
		t.Share = 0.9
	}
	switch t.Shape {
	case ShapeUniform:
	case ShapeTopK:
		if t.TopK < 1 || t.TopK > t.Models {
			return fmt.Errorf("traffic: top-k needs top_k between 1 and models (%d)", t.Models)
		}
	case ShapeHot:
	default:
		return fmt.Errorf("traffic: shape %q is not uniform, top-k or hot", t.Shape)
	}
	if t.Shape != ShapeUniform && t.Models < 2 {
		return fmt.Errorf("traffic: shape %s needs at least 2 models", t.Shape)
	}
	// Checked whatever the shape: the plan is written into the report.
	if !(t.Share > 0 && t.Share <= 1) {
		return errors.New("traffic: share must be above 0 and at most 1")
	}
	if p.Request.Timeout == 0 {
		p.Request.Timeout = Duration(70 * time.Second)
	}
	if p.Request.Timeout < 0 || p.Request.Timeout > Duration(MaxRunDuration) {
		return fmt.Errorf("request: timeout must be above 0 and at most %s", MaxRunDuration)
	}
	if p.Request.Stream && t.Models > 0 {
		return errors.New("streaming takes no TargetModel: multi-model endpoints do not stream")
	}
	targets, err := ParseTargets(p.Target)
	if err != nil {
		return err
	}
	p.targets = targets
	if p.Stop.OnTargetMiss && len(targets) == 0 {
		return errors.New("stop on_target_miss needs a latency target (e.g. p90=200ms)")
	}
	if !(p.Stop.ErrorRate >= 0 && p.Stop.ErrorRate <= 1) { // NaN too
		return errors.New("stop error_rate must be 0 to 1")
	}
	if p.Limits.MaxRequests < 0 {
		return errors.New("limits: max_requests is negative")
	}
	if p.Limits.MaxDuration == 0 {
		p.Limits.MaxDuration = Duration(time.Hour)
	}
	if p.Limits.MaxDuration < 0 || p.Limits.MaxDuration > Duration(MaxRunDuration) {
		return fmt.Errorf("limits: max_duration must be up to %s", MaxRunDuration)
	}
	if p.Limits.MaxInFlight == 0 {
		p.Limits.MaxInFlight = 1000
	}
	if p.Limits.MaxInFlight < 1 || p.Limits.MaxInFlight > MaxInFlightCap {
		return fmt.Errorf("limits: max_inflight must be 1 to %d", MaxInFlightCap)
	}
	return nil
}

// thinkTime is the stage's think time, else the plan's.
func (p *Plan) thinkTime(s Stage) time.Duration {
	if s.ThinkTime != nil {
		return time.Duration(*s.ThinkTime)
	}
	return time.Duration(p.ThinkTime)
}

// PlannedDuration is the sum of the stages' durations.
func (p *Plan) PlannedDuration() time.Duration {
	var d time.Duration
	for _, s := range p.Stages {
		d += time.Duration(s.Duration)
	}
	return d
}
