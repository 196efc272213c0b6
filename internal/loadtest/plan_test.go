package loadtest

import (
	"math"
	"strings"
	"testing"
	"time"
)

func TestReadPlanYAMLAndJSON(t *testing.T) {
	yml := `
stages:
  - {users: 5, spawn_rate: 2, duration: 30s}
  - {name: burst, rate: 100, duration: 1m}
think_time: 250ms
traffic: {models: 200, shape: top-k, top_k: 10, share: 0.9}
request: {content_type: application/json, stream: false, timeout: 5s}
target: p90=200ms,p99=1s
stop: {error_rate: 0.05, on_target_miss: true}
limits: {max_requests: 1000, max_duration: 10m, max_inflight: 50}
seed: 7
`
	js := `{"stages":[{"users":5,"spawn_rate":2,"duration":"30s"},{"name":"burst","rate":100,"duration":"1m"}],
"think_time":"250ms","traffic":{"models":200,"shape":"top-k","top_k":10,"share":0.9},
"request":{"content_type":"application/json","timeout":5},"target":"p90=200ms,p99=1s",
"stop":{"error_rate":0.05,"on_target_miss":true},"limits":{"max_requests":1000,"max_duration":"10m","max_inflight":50},"seed":7}`
	for name, src := range map[string]string{"yaml": yml, "json": js} {
		t.Run(name, func(t *testing.T) {
			p, err := ReadPlan(strings.NewReader(src))
			if err != nil {
				t.Fatal(err)
			}
			if err := p.Validate(); err != nil {
				t.Fatal(err)
			}
			if len(p.Stages) != 2 || p.Stages[0].Name != "stage 1" || p.Stages[1].Name != "burst" {
				t.Errorf("stages %+v", p.Stages)
			}
			if time.Duration(p.Stages[1].Duration) != time.Minute || p.thinkTime(p.Stages[0]) != 250*time.Millisecond {
				t.Errorf("durations %v %v", p.Stages[1].Duration, p.ThinkTime)
			}
			if got := p.Targets(); len(got) != 2 || got[0].Percentile != 90 || got[0].Limit != 200*time.Millisecond || got[1].Limit != time.Second {
				t.Errorf("targets %+v", got)
			}
			if p.Request.Timeout != Duration(5*time.Second) || p.Limits.MaxInFlight != 50 || p.Traffic.ModelPattern != "model-{i}.tar.gz" {
				t.Errorf("request %+v limits %+v traffic %+v", p.Request, p.Limits, p.Traffic)
			}
			if p.PlannedDuration() != 90*time.Second {
				t.Errorf("planned %v", p.PlannedDuration())
			}
		})
	}
}

func TestReadPlanRefusesBadFiles(t *testing.T) {
	for name, src := range map[string]string{
		"unknown key":   "stages: [{users: 1, duration: 1s}]\nusers: 4\n",
		"bad duration":  "stages: [{users: 1, duration: soon}]\n",
		"negative secs": "stages: [{users: 1, duration: -3}]\n",
		"empty":         "",
		"not yaml":      "stages: [",
		"too big":       "stages: []\n#" + strings.Repeat("x", maxPlanBytes),
	} {
		if _, err := ReadPlan(strings.NewReader(src)); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
}

func TestValidate(t *testing.T) {
	ok := func() Plan { return Plan{Stages: []Stage{{Users: 1, Duration: Duration(time.Second)}}} }
	neg := Duration(-time.Second)
	for _, c := range []struct {
		name string
		mod  func(*Plan)
		want string // "" for valid
	}{
		{"minimal", func(p *Plan) {}, ""},
		{"no stages", func(p *Plan) { p.Stages = nil }, "no stages"},
		{"both", func(p *Plan) { p.Stages[0].Rate = 5 }, "not both"},
		{"neither", func(p *Plan) { p.Stages[0].Users = 0 }, "give users"},
		{"too many users", func(p *Plan) { p.Stages[0].Users = MaxUsers + 1 }, "more than"},
		{"tiny spawn rate", func(p *Plan) { p.Stages[0].SpawnRate = 1e-300 }, "at least"},
		{"tiny rate", func(p *Plan) { p.Stages[0] = Stage{Rate: 1e-9, Duration: Duration(time.Second)} }, "at least"},
		{"no duration", func(p *Plan) { p.Stages[0].Duration = 0 }, "duration"},
		{"spawn with rate", func(p *Plan) { p.Stages[0] = Stage{Rate: 5, SpawnRate: 1, Duration: Duration(time.Second)} }, "spawn_rate"},
		{"negative think", func(p *Plan) { p.Stages[0].ThinkTime = &neg }, "negative"},
		{"pattern without i", func(p *Plan) { p.Traffic = Traffic{Models: 3, ModelPattern: "m.tar.gz"} }, "{i}"},
		{"bad shape", func(p *Plan) { p.Traffic = Traffic{Models: 3, Shape: "zipf"} }, "shape"},
		{"top-k too big", func(p *Plan) { p.Traffic = Traffic{Models: 3, Shape: ShapeTopK, TopK: 4} }, "top_k"},
		{"hot of one", func(p *Plan) { p.Traffic = Traffic{Models: 1, Shape: ShapeHot} }, "at least 2"},
		{"share over 1", func(p *Plan) { p.Traffic = Traffic{Models: 3, Shape: ShapeHot, Share: 1.5} }, "share"},
		{"stream with models", func(p *Plan) { p.Traffic.Models = 2; p.Request.Stream = true }, "stream"},
		{"bad target", func(p *Plan) { p.Target = "p90<200ms" }, "pNN=DURATION"},
		{"target over 100", func(p *Plan) { p.Target = "p101=1s" }, "percentile"},
		{"miss without target", func(p *Plan) { p.Stop.OnTargetMiss = true }, "needs a latency target"},
		{"error rate", func(p *Plan) { p.Stop.ErrorRate = 2 }, "error_rate"},
		{"too long", func(p *Plan) { p.Limits.MaxDuration = Duration(25 * time.Hour) }, "max_duration"},
		{"inflight", func(p *Plan) { p.Limits.MaxInFlight = MaxInFlightCap + 1 }, "max_inflight"},
		// Issue 18: numbers that are not finite, or beyond any sane run,
		// and lists too long to check, are refused at load.
		{"infinite spawn rate", func(p *Plan) { p.Stages[0].SpawnRate = math.Inf(1) }, "spawn_rate"},
		{"huge spawn rate", func(p *Plan) { p.Stages[0].SpawnRate = MaxSpawnRate + 1 }, "spawn_rate"},
		{"NaN spawn rate", func(p *Plan) { p.Stages[0].SpawnRate = math.NaN() }, "negative"},
		{"infinite rate", func(p *Plan) { p.Stages[0] = Stage{Rate: math.Inf(1), Duration: Duration(time.Second)} }, "more than"},
		{"NaN rate", func(p *Plan) { p.Stages[0] = Stage{Rate: math.NaN(), Duration: Duration(time.Second)} }, "negative"},
		{"stage too long", func(p *Plan) { p.Stages[0].Duration = Duration(MaxRunDuration + time.Second) }, "duration"},
		{"think too long", func(p *Plan) { d := Duration(25 * time.Hour); p.Stages[0].ThinkTime = &d }, "think_time"},
		{"plan think too long", func(p *Plan) { p.ThinkTime = Duration(25 * time.Hour) }, "think_time"},
		{"NaN error rate", func(p *Plan) { p.Stop.ErrorRate = math.NaN() }, "error_rate"},
		{"infinite share, uniform", func(p *Plan) { p.Traffic = Traffic{Models: 3, Share: math.Inf(1)} }, "share"},
		{"NaN share", func(p *Plan) { p.Traffic = Traffic{Models: 3, Shape: ShapeHot, Share: math.NaN()} }, "share"},
		{"first model too big", func(p *Plan) { big := MaxFirstModel + 1; p.Traffic = Traffic{Models: 3, FirstModel: &big} }, "first_model"},
		{"request timeout too long", func(p *Plan) { p.Request.Timeout = Duration(25 * time.Hour) }, "timeout"},
		{"too many targets", func(p *Plan) { p.Target = strings.Repeat("p50=1s,", MaxTargets) + "p90=1s" }, "more than 16"},
		{"most targets", func(p *Plan) { p.Target = strings.Repeat("p50=1s,", MaxTargets-1) + "p90=1s" }, ""},
	} {
		p := ok()
		c.mod(&p)
		err := p.Validate()
		switch {
		case c.want == "" && err != nil:
			t.Errorf("%s: %v", c.name, err)
		case c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)):
			t.Errorf("%s: error %v, want one with %q", c.name, err, c.want)
		}
	}
}

func TestParseTargets(t *testing.T) {
	got, err := ParseTargets("p99.9<=1.5s, P50=20ms")
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || got[0].Percentile != 99.9 || got[0].Limit != 1500*time.Millisecond || got[1].Percentile != 50 {
		t.Errorf("got %+v", got)
	}
	if got[0].String() != "p99.9<=1.5s" {
		t.Errorf("String %q", got[0].String())
	}
	for _, bad := range []string{"90=1s", "p0=1s", "p90=", "p90=-1s", "px=1s"} {
		if _, err := ParseTargets(bad); err == nil {
			t.Errorf("%q: no error", bad)
		}
	}
}

// TestPlanFileRefusals: plan files that used to run and then lose their
// report (spawn_rate: .inf cannot be written as JSON), or that spent most of
// a minute and half a GiB on a 1 s stage (100,000 latency targets), are
// refused when the plan is loaded (issue 18).
func TestPlanFileRefusals(t *testing.T) {
	for name, c := range map[string]struct{ src, want string }{
		"infinite spawn rate": {"stages: [{users: 2, spawn_rate: .inf, duration: 1s}]\n", "spawn_rate"},
		"NaN rate":            {"stages: [{rate: .nan, duration: 1s}]\n", "negative"},
		"100000 targets":      {"stages: [{users: 1, duration: 1s}]\ntarget: " + strings.Repeat("p50=1s,", 99999) + "p90=1s\n", "more than 16"},
		"infinite share":      {"stages: [{users: 1, duration: 1s}]\ntraffic: {models: 2, share: .inf}\n", "share"},
		"too many stages":     {"stages: [" + strings.Repeat("{users: 1, duration: 1s},", MaxStages) + "{users: 1, duration: 1s}]\n", "stages"},
	} {
		t.Run(name, func(t *testing.T) {
			p, err := ReadPlan(strings.NewReader(c.src))
			if err != nil {
				t.Fatal(err)
			}
			start := time.Now()
			err = p.Validate()
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("Validate: %v, want an error with %q", err, c.want)
			}
			if d := time.Since(start); d > time.Second {
				t.Errorf("refusing took %v", d)
			}
		})
	}
}
