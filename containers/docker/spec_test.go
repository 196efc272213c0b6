package docker

import (
	"errors"
	"fmt"
	"strings"
	"testing"
)

func specWith(n int, mutate func(*EndpointSpec)) EndpointSpec {
	v := VariantSpec{Name: "AllTraffic", Copies: 1}
	for i := range n {
		v.Containers = append(v.Containers, ContainerSpec{Hostname: fmt.Sprintf("c%d", i+1), Image: "img"})
	}
	s := EndpointSpec{Name: "ep", Variants: []VariantSpec{v}}
	if mutate != nil {
		mutate(&s)
	}
	return s
}

func TestValidate(t *testing.T) {
	tests := []struct {
		name string
		spec EndpointSpec
		want string // substring of the error; empty for valid
	}{
		{"one container", specWith(1, nil), ""},
		{"fifteen containers", specWith(15, nil), ""},
		{"sixteen containers", specWith(16, nil), "has 16 containers; SageMaker allows at most 15"},
		{"no containers", specWith(0, nil), "has no containers"},
		{"bad hostname", specWith(2, func(s *EndpointSpec) { s.Variants[0].Containers[1].Hostname = "bad_name" }), `hostname "bad_name" must match`},
		{"hostname too long", specWith(1, func(s *EndpointSpec) { s.Variants[0].Containers[0].Hostname = strings.Repeat("a", 64) }), "must match"},
		{"hostname trailing dash", specWith(1, func(s *EndpointSpec) { s.Variants[0].Containers[0].Hostname = "a-" }), "must match"},
		{"duplicate hostnames", specWith(2, func(s *EndpointSpec) { s.Variants[0].Containers[1].Hostname = "c1" }), `hostname "c1" appears twice`},
		{"no image", specWith(1, func(s *EndpointSpec) { s.Variants[0].Containers[0].Image = " " }), "no image"},
		{"zero copies", specWith(1, func(s *EndpointSpec) { s.Variants[0].Copies = 0 }), "must be at least 1"},
		{"no variants", EndpointSpec{Name: "ep"}, "at least one variant"},
		{"bad endpoint name", specWith(1, func(s *EndpointSpec) { s.Name = "-ep" }), `endpoint name "-ep"`},
		{"duplicate variants", specWith(1, func(s *EndpointSpec) { s.Variants = append(s.Variants, s.Variants[0]) }), `variant "AllTraffic" appears twice`},
		{"two multi-model", specWith(2, func(s *EndpointSpec) {
			s.Variants[0].Containers[0].MultiModel = true
			s.Variants[0].Containers[1].MultiModel = true
		}), "more than one container in MultiModel mode"},
		{"negative memory", specWith(1, func(s *EndpointSpec) { s.Variants[0].Containers[0].MemoryBytes = -1 }), "negative resource limit"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.spec.Validate()
			if tt.want == "" {
				if err != nil {
					t.Fatalf("Validate() = %v, want nil", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("Validate() = %v, want error containing %q", err, tt.want)
			}
			if !errors.Is(err, ErrInvalidSpec) {
				t.Errorf("error does not wrap ErrInvalidSpec: %v", err)
			}
		})
	}
}

func TestEnvironment(t *testing.T) {
	cs := ContainerSpec{Environment: map[string]string{"A": "1", "SAGEMAKER_BIND_TO_PORT": "1"}, MultiModel: true}
	got := strings.Join(environment(cs, 2), " ")
	want := "A=1 SAGEMAKER_BIND_TO_PORT=8082 SAGEMAKER_MULTI_MODEL=true SAGEMAKER_SAFE_PORT_RANGE=9200-9299"
	if got != want {
		t.Errorf("environment() = %q, want %q", got, want)
	}
	// Ports and safe ranges are distinct across the 15 positions.
	seen := map[string]bool{}
	for i := range MaxContainers {
		for _, kv := range environment(ContainerSpec{}, i) {
			if seen[kv] {
				t.Fatalf("position %d repeats %s", i, kv)
			}
			seen[kv] = true
		}
	}
}
