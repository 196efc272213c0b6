package gpu

import (
	"errors"
	"fmt"
	"reflect"
	"testing"
)

const (
	uuidA = "GPU-5a3d1c2e-0f4b-4c1a-9e8d-1234567890ab"
	uuidB = "GPU-77777777-8888-9999-aaaa-bbbbbbbbbbbb"
	migA  = "MIG-3f6a7e1c-2b4d-5e6f-8a9b-0c1d2e3f4a5b"
)

func TestParseRequest(t *testing.T) {
	tests := []struct {
		in      string
		want    Request
		wantErr bool
	}{
		{in: "", want: Request{}},
		{in: "   ", want: Request{}},
		{in: "all", want: Request{All: true}},
		{in: " ALL ", want: Request{All: true}},
		{in: "1", want: Request{Count: 1}},
		{in: "2", want: Request{Count: 2}},
		{in: "count=3", want: Request{Count: 3}},
		{in: "0,1", want: Request{DeviceIDs: []string{"0", "1"}}},
		{in: " 3 , 1 ", want: Request{DeviceIDs: []string{"3", "1"}}},
		{in: "device=0", want: Request{DeviceIDs: []string{"0"}}},
		{in: "device=007", want: Request{DeviceIDs: []string{"7"}}},
		{in: uuidA, want: Request{DeviceIDs: []string{uuidA}}},
		{in: uuidA + ",1", want: Request{DeviceIDs: []string{uuidA, "1"}}},
		{in: "device=" + uuidB + "," + uuidA, want: Request{DeviceIDs: []string{uuidB, uuidA}}},
		{in: migA, want: Request{DeviceIDs: []string{migA}}},
		{in: "device=" + migA, want: Request{DeviceIDs: []string{migA}}},
		{in: "MIG-GPU-5a3d1c2e-0f4b/7/0", want: Request{DeviceIDs: []string{"MIG-GPU-5a3d1c2e-0f4b/7/0"}}},

		{in: "-1", wantErr: true},
		{in: "0", wantErr: true},
		{in: "count=0", wantErr: true},
		{in: "count=all", wantErr: true},
		{in: "abc", wantErr: true},
		{in: "0,0", wantErr: true},
		{in: "0,00", wantErr: true},
		{in: uuidA + "," + uuidA, wantErr: true},
		{in: uuidA + ",gpu-5A3D1C2E-0F4B-4C1A-9E8D-1234567890AB", wantErr: true},
		{in: "0,", wantErr: true},
		{in: ",1", wantErr: true},
		{in: "0,,1", wantErr: true},
		{in: "device=", wantErr: true},
		{in: "0,-1", wantErr: true},
		{in: "0,abc", wantErr: true},
		{in: "GPU-", wantErr: true},
		{in: "GPU-xyz", wantErr: true},
		{in: "MIG-xyz", wantErr: true},
		{in: "MIG-", wantErr: true},
		{in: "MIG-GPU-1234/1", wantErr: true},
		{in: "MIG-GPU-1234/a/0", wantErr: true},
		{in: "MIG-GPU-1234/1/0/2", wantErr: true},
		{in: migA + "," + migA, wantErr: true},
		{in: "1,99999999999999999999999", wantErr: true},
		{in: "99999999999999999999999", wantErr: true},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprintf("%q", tt.in), func(t *testing.T) {
			got, err := ParseRequest(tt.in)
			if tt.wantErr {
				if !errors.Is(err, ErrInvalidRequest) {
					t.Fatalf("ParseRequest(%q) = %+v, %v; want error wrapping ErrInvalidRequest", tt.in, got, err)
				}
				return
			}
			if err != nil {
				t.Fatalf("ParseRequest(%q): %v", tt.in, err)
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("ParseRequest(%q) = %+v, want %+v", tt.in, got, tt.want)
			}
		})
	}
}

func TestParseRequestErrorMessages(t *testing.T) {
	tests := []struct {
		in   string
		want string
	}{
		{"0", `invalid GPU request "0": count must be at least 1 (for device 0 alone write "device=0")`},
		{"-1", `invalid GPU request "-1": count must be at least 1`},
		{"0,0", `invalid GPU request "0,0": device 0 listed twice`},
		{"0,", `invalid GPU request "0,": item 2: empty device ID`},
		{"abc", `invalid GPU request "abc": want "all", a count, or device indexes/UUIDs separated by commas`},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			_, err := ParseRequest(tt.in)
			if err == nil || err.Error() != tt.want {
				t.Errorf("ParseRequest(%q) error = %v, want %q", tt.in, err, tt.want)
			}
		})
	}
}

func TestRequestIsZeroAndString(t *testing.T) {
	tests := []struct {
		req      Request
		wantZero bool
		wantStr  string
	}{
		{Request{}, true, ""},
		{Request{DeviceIDs: []string{}}, true, ""},
		{Request{All: true}, false, "all"},
		{Request{Count: 2}, false, "count=2"},
		{Request{DeviceIDs: []string{"0"}}, false, "device=0"},
		{Request{DeviceIDs: []string{uuidA, "1"}}, false, "device=" + uuidA + ",1"},
	}
	for _, tt := range tests {
		t.Run(tt.wantStr, func(t *testing.T) {
			if got := tt.req.IsZero(); got != tt.wantZero {
				t.Errorf("%+v.IsZero() = %v, want %v", tt.req, got, tt.wantZero)
			}
			if got := tt.req.String(); got != tt.wantStr {
				t.Errorf("%+v.String() = %q, want %q", tt.req, got, tt.wantStr)
			}
		})
	}
}

func FuzzParseRequest(f *testing.F) {
	for _, s := range []string{"", "all", "2", "count=2", "0,1", "device=0", uuidA + ",1", "-1", "0", "abc", "0,0", "0,,1", "GPU-", migA, "MIG-GPU-ab/1/0"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		r, err := ParseRequest(s)
		if err != nil {
			if !errors.Is(err, ErrInvalidRequest) {
				t.Fatalf("ParseRequest(%q) error %v does not wrap ErrInvalidRequest", s, err)
			}
			return
		}
		if err := r.validate(); err != nil {
			t.Fatalf("ParseRequest(%q) = %+v, malformed: %v", s, r, err)
		}
		again, err := ParseRequest(r.String())
		if err != nil || !reflect.DeepEqual(again, r) {
			t.Fatalf("ParseRequest(%q) = %+v, but its String %q parses to %+v, %v", s, r, r.String(), again, err)
		}
		if ids := r.CDIDevices(nil); r.IsZero() != (len(ids) == 0) {
			t.Fatalf("ParseRequest(%q) = %+v: IsZero %v but CDI devices %q", s, r, r.IsZero(), ids)
		}
	})
}
