package main

import (
	"reflect"
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

func TestParseMemory(t *testing.T) {
	status := "Name:\tmce\nVmPeak:\t 900 kB\nVmRSS:\t   12345 kB\nRssAnon:\t    2345 kB\nRssFile:\t   10000 kB\nRssShmem:\t       0 kB\nThreads: 9\n"
	got, err := parseMemory([]byte(status))
	if err != nil || got != (memory{RSS: 12345, Anon: 2345, File: 10000}) {
		t.Fatalf("got %+v, %v; want 12345, 2345, 10000", got, err)
	}
	for _, bad := range []string{"Name: x\n", "VmRSS: 12 MB\nRssAnon: 1 kB\nRssFile: 1 kB\n", "VmRSS: x kB\nRssAnon: 1 kB\nRssFile: 1 kB\n",
		"VmRSS: 12 kB\nRssFile: 1 kB\n"} {
		if _, err := parseMemory([]byte(bad)); err == nil {
			t.Errorf("%q: no error", bad)
		}
	}
}

func TestSummarizeMemory(t *testing.T) {
	r := report{RSSSamples: []rssSample{
		{AtS: 0, RSSMiB: 115, AnonMiB: 17, FileMiB: 98},
		{AtS: 10, RSSMiB: 150, AnonMiB: 50, FileMiB: 100},
		{AtS: 60, RSSMiB: 153, AnonMiB: 53, FileMiB: 100},
		{AtS: 600, RSSMiB: 151, AnonMiB: 51.5, FileMiB: 99.5},
	}}
	summarizeMemory(&r, 10*time.Minute)
	want := report{RSSStartMiB: 115, RSSMaxMiB: 153, RSSEndMiB: 151, AnonStartMiB: 17, AnonMaxMiB: 53, AnonEndMiB: 51.5, AnonGrowthMiB: -1.5}
	r.RSSSamples = nil
	if !reflect.DeepEqual(r, want) {
		t.Errorf("got %+v\nwant %+v", r, want)
	}
}
