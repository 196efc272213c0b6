package loadtest

import (
	"strings"
	"testing"
	"time"
)

// FuzzReadPlan: any plan file is read and validated without a panic, and a
// plan Validate accepts can run: every stage has a positive duration and
// either users or a rate within bounds, and its model names can be made.
func FuzzReadPlan(f *testing.F) {
	for _, s := range []string{
		"stages: [{users: 5, spawn_rate: 2, duration: 30s}]\n",
		`{"stages":[{"rate":100,"duration":"1m"}],"traffic":{"models":200,"shape":"top-k","top_k":10,"share":0.9,"model_pattern":"m-{i:03}","first_model":0},"target":"p90=200ms"}`,
		"stages: [{users: 1, duration: 1s, think_time: 2}]\ntraffic: {models: 3, shape: hot}\nstop: {error_rate: 0.5}\n",
		"stages: [{rate: .nan, duration: 1s}]\n",
		"stages: [{users: 1, duration: 1e400}]\n",
		"target: p0=1s\nstages: []\n",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, src string) {
		p, err := ReadPlan(strings.NewReader(src))
		if err != nil {
			return
		}
		if p.Validate() != nil {
			return
		}
		for _, s := range p.Stages {
			if s.Duration <= 0 || (s.Users > 0) == (s.Rate > 0) || s.Users > MaxUsers || s.Rate > MaxRate {
				t.Fatalf("validated stage %+v", s)
			}
			if s.Rate > 0 && PlannedSends(s.Rate, time.Duration(s.Duration)) < 1 {
				t.Fatalf("rate stage %+v sends nothing", s)
			}
		}
		if p.Traffic.Models > 0 {
			c := NewChooser(p.Traffic, 1, 1)
			if name := c.Name(c.Index()); name == "" {
				t.Fatalf("no model name from %+v", p.Traffic)
			}
		}
		for _, tg := range p.Targets() {
			if tg.Limit <= 0 || tg.Percentile <= 0 || tg.Percentile > 100 {
				t.Fatalf("target %+v", tg)
			}
		}
	})
}
