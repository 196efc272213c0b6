package spec

import (
	"reflect"
	"testing"
)

func TestParseGPUs(t *testing.T) {
	tests := []struct {
		in      string
		want    GPURequest
		canon   string
		wantErr bool
	}{
		{in: "", want: GPURequest{}, canon: ""},
		{in: "none", want: GPURequest{}, canon: ""},
		{in: "0", want: GPURequest{}, canon: ""},
		{in: "all", want: GPURequest{All: true}, canon: "all"},
		{in: "2", want: GPURequest{Count: 2}, canon: "2"},
		{in: "device=1", want: GPURequest{DeviceIDs: []string{"1"}}, canon: "device=1"},
		{in: "0,1", want: GPURequest{DeviceIDs: []string{"0", "1"}}, canon: "device=0,1"},
		{in: "device=0,3", want: GPURequest{DeviceIDs: []string{"0", "3"}}, canon: "device=0,3"},
		{in: "GPU-8b1c2a3d-1111-2222-3333-444455556666", want: GPURequest{DeviceIDs: []string{"GPU-8b1c2a3d-1111-2222-3333-444455556666"}},
			canon: "device=GPU-8b1c2a3d-1111-2222-3333-444455556666"},
		{in: "GPU-aa,MIG-bb/1/2", want: GPURequest{DeviceIDs: []string{"GPU-aa", "MIG-bb/1/2"}}, canon: "device=GPU-aa,MIG-bb/1/2"},
		{in: "-1", wantErr: true},
		{in: "lots", wantErr: true},
		{in: "device=", wantErr: true},
		{in: "0,", wantErr: true},
		{in: "0,0", wantErr: true},
		{in: "device=0 1", wantErr: true},
		{in: "ALL", wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			got, err := ParseGPUs(tt.in)
			if (err != nil) != tt.wantErr {
				t.Fatalf("ParseGPUs(%q) error = %v, wantErr %v", tt.in, err, tt.wantErr)
			}
			if tt.wantErr {
				return
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("ParseGPUs(%q) = %+v, want %+v", tt.in, got, tt.want)
			}
			if s := got.String(); s != tt.canon {
				t.Errorf("String() = %q, want %q", s, tt.canon)
			}
			// The canonical form parses back to the same request.
			again, err := ParseGPUs(got.String())
			if err != nil || !reflect.DeepEqual(again, got) {
				t.Errorf("ParseGPUs(%q) = %+v, %v; want %+v", got.String(), again, err, got)
			}
		})
	}
}

func TestInstanceGPUs(t *testing.T) {
	tests := []struct {
		instanceType string
		want         int
		known        bool
	}{
		{"ml.g4dn.xlarge", 1, true},
		{"ml.g4dn.12xlarge", 4, true},
		{"ml.g5.2xlarge", 1, true},
		{"ml.g5.12xlarge", 4, true},
		{"ml.g5.48xlarge", 8, true},
		{"ml.g6.24xlarge", 4, true},
		{"ml.g6e.48xlarge", 8, true},
		{"ml.p3.2xlarge", 1, true},
		{"ml.p3.8xlarge", 4, true},
		{"ml.p3.16xlarge", 8, true},
		{"ml.p4d.24xlarge", 8, true},
		{"ml.p4de.24xlarge", 8, true},
		{"ml.p5.48xlarge", 8, true},
		{"ml.p2.16xlarge", 16, true},
		{"ml.m5.large", 0, true},
		{"ml.c7i.4xlarge", 0, true},
		{"ml.inf2.xlarge", 0, true},
		{"ml.g9.xlarge", 0, false},
		{"ml.p5.2xlarge", 0, false},
	}
	for _, tt := range tests {
		t.Run(tt.instanceType, func(t *testing.T) {
			n, known := instanceGPUs(tt.instanceType)
			if n != tt.want || known != tt.known {
				t.Errorf("instanceGPUs(%q) = %d, %v; want %d, %v", tt.instanceType, n, known, tt.want, tt.known)
			}
		})
	}
}
