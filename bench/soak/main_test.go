package main

import (
	"testing"
	"time"
)

func TestParseTarget(t *testing.T) {
	tests := []struct {
		in      string
		want    target
		wantErr bool
	}{
		{in: "d=ep,host=p1", want: target{name: "d", endpoint: "ep", host: "p1"}},
		{in: "s=chain,suffix=abc", want: target{name: "s", endpoint: "chain", suffix: "abc"}},
		{in: "plain=ep", want: target{name: "plain", endpoint: "ep"}},
		{in: "noequals", wantErr: true},
		{in: "=ep", wantErr: true},
		{in: "x=", wantErr: true},
		{in: "x=ep,colour=red", wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			got, err := parseTarget(tt.in)
			if (err != nil) != tt.wantErr {
				t.Fatalf("err = %v, wantErr %v", err, tt.wantErr)
			}
			if !tt.wantErr && got != tt.want {
				t.Errorf("got %+v, want %+v", got, tt.want)
			}
		})
	}
}

func TestPercentile(t *testing.T) {
	var d []time.Duration
	for i := 1; i <= 100; i++ {
		d = append(d, time.Duration(i)*time.Millisecond)
	}
	for _, c := range []struct {
		p    float64
		want time.Duration
	}{{50, 50 * time.Millisecond}, {99, 99 * time.Millisecond}, {100, 100 * time.Millisecond}, {0, time.Millisecond}} {
		if got := percentile(d, c.p); got != c.want {
			t.Errorf("p%v = %v, want %v", c.p, got, c.want)
		}
	}
	if got := percentile(nil, 50); got != 0 {
		t.Errorf("empty: %v", got)
	}
}

func TestParseVmRSS(t *testing.T) {
	got, err := parseVmRSS([]byte("Name:\tmce\nVmPeak:\t 900 kB\nVmRSS:\t   12345 kB\nThreads: 9\n"))
	if err != nil || got != 12345 {
		t.Fatalf("got %d, %v; want 12345", got, err)
	}
	for _, bad := range []string{"Name: x\n", "VmRSS: 12 MB\n", "VmRSS: x kB\n"} {
		if _, err := parseVmRSS([]byte(bad)); err == nil {
			t.Errorf("%q: no error", bad)
		}
	}
}
