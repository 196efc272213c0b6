package spec

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

func TestParseStrictErrors(t *testing.T) {
	tests := []struct {
		name    string
		file    string
		content string
		want    string // exact Error()
		is      error
	}{
		{
			name: "unknown field in YAML names the full path",
			file: "ab.yaml",
			content: `
Models:
  - ModelName: ab-model
    Containers:
      - {ContainerHostname: english, Image: img}
      - {ContainerHostname: german, Imagee: img}
`,
			want: "ab.yaml: Models[0].Containers[1].Imagee: unknown field",
			is:   ErrUnknownField,
		},
		{
			name:    "unknown field in JSON names the full path",
			file:    "ab.json",
			content: `{"Models":[{"ModelName":"ab-model","Containers":[{"Image":"i"},{"Imagee":"i"}]}]}`,
			want:    "ab.json: Models[0].Containers[1].Imagee: unknown field",
			is:      ErrUnknownField,
		},
		{
			name:    "keys are case-sensitive, with a hint",
			file:    "x.yaml",
			content: "Models:\n  - modelName: m\n",
			want:    "x.yaml: Models[0].modelName: unknown field (did you mean ModelName?)",
			is:      ErrUnknownField,
		},
		{
			name:    "unknown top-level key",
			file:    "x.yaml",
			content: "Model:\n  - ModelName: m\n",
			want:    "x.yaml: Model: unknown field",
			is:      ErrUnknownField,
		},
		{
			name:    "x- keys are only ignored at the top level",
			file:    "x.yaml",
			content: "Models:\n  - ModelName: m\n    x-note: hi\n",
			want:    "x.yaml: Models[0].x-note: unknown field",
			is:      ErrUnknownField,
		},
		{
			name:    "string where an integer belongs",
			file:    "x.yaml",
			content: "EndpointConfigs:\n  - ProductionVariants:\n      - InitialInstanceCount: \"1\"\n",
			want:    "x.yaml: EndpointConfigs[0].ProductionVariants[0].InitialInstanceCount: wrong type: expected an integer, got a string",
			is:      ErrType,
		},
		{
			name:    "fraction where an integer belongs",
			file:    "x.json",
			content: `{"EndpointConfigs":[{"ProductionVariants":[{"InitialInstanceCount":1.5}]}]}`,
			want:    "x.json: EndpointConfigs[0].ProductionVariants[0].InitialInstanceCount: wrong type: expected an integer that fits int32, got 1.5",
			is:      ErrType,
		},
		{
			name:    "integer out of range",
			file:    "x.yaml",
			content: "EndpointConfigs:\n  - ProductionVariants:\n      - VolumeSizeInGB: 3000000000\n",
			want:    "x.yaml: EndpointConfigs[0].ProductionVariants[0].VolumeSizeInGB: wrong type: expected an integer that fits int32, got 3000000000",
			is:      ErrType,
		},
		{
			name:    "number where an Environment string belongs",
			file:    "x.yaml",
			content: "Models:\n  - PrimaryContainer:\n      Environment: {WORKERS: 4}\n",
			want:    "x.yaml: Models[0].PrimaryContainer.Environment.WORKERS: wrong type: expected a string, got a number (4)",
			is:      ErrType,
		},
		{
			name:    "odd map keys are quoted in paths",
			file:    "x.yaml",
			content: "Models:\n  - PrimaryContainer:\n      Environment: {\"a b\": true}\n",
			want:    `x.yaml: Models[0].PrimaryContainer.Environment["a b"]: wrong type: expected a string, got a boolean`,
			is:      ErrType,
		},
		{
			name:    "mapping where a list belongs",
			file:    "x.yaml",
			content: "Models:\n  - Containers: {Image: i}\n",
			want:    "x.yaml: Models[0].Containers: wrong type: expected a list, got a mapping",
			is:      ErrType,
		},
		{
			name:    "list where a mapping belongs",
			file:    "x.json",
			content: `{"Endpoints":[["ab"]]}`,
			want:    "x.json: Endpoints[0]: wrong type: expected a mapping, got a list",
			is:      ErrType,
		},
		{
			name:    "top level must be a mapping",
			file:    "x.yaml",
			content: "- ModelName: m\n",
			want:    "x.yaml: wrong type: expected a mapping at the top level, got a list",
			is:      ErrType,
		},
		{
			name:    "empty file",
			file:    "x.yaml",
			content: "# nothing here\n",
			want:    "x.yaml: no Models, EndpointConfigs or Endpoints",
			is:      ErrEmpty,
		},
		{
			name:    "duplicate YAML key",
			file:    "x.yaml",
			content: "Models:\n  - ModelName: a\n    ModelName: b\n",
			want:    "x.yaml: Models[0].ModelName: syntax error: line 3: duplicate key",
			is:      ErrSyntax,
		},
		{
			name:    "duplicate JSON key",
			file:    "x.json",
			content: `{"Models":[{"ModelName":"a","ModelName":"b"}]}`,
			want:    "x.json: Models[0].ModelName: syntax error: duplicate key",
			is:      ErrSyntax,
		},
		{
			name:    "JSON syntax error has a position",
			file:    "x.json",
			content: "{\"Models\": [\n  }",
			want:    "x.json: syntax error: line 2, column 3: invalid character '}' looking for beginning of value",
			is:      ErrSyntax,
		},
		{
			name:    "JSON with trailing data",
			file:    "x.json",
			content: `{"Endpoints": []} {}`,
			want:    "x.json: syntax error: line 1, column 19: data after the top-level value",
			is:      ErrSyntax,
		},
		{
			name:    "truncated JSON",
			file:    "x.json",
			content: `{"Endpoints": [`,
			want:    "x.json: syntax error: line 1, column 16: unexpected EOF",
			is:      ErrSyntax,
		},
		{
			name:    "several YAML documents",
			file:    "x.yaml",
			content: "Endpoints: []\n---\nEndpoints: []\n",
			want:    "x.yaml: syntax error: more than one YAML document; use one document per file",
			is:      ErrSyntax,
		},
		{
			name:    "custom YAML tags",
			file:    "x.yaml",
			content: "Endpoints:\n  - EndpointName: !secret x\n",
			want:    "x.yaml: Endpoints[0].EndpointName: syntax error: line 2: unsupported tag !secret",
			is:      ErrSyntax,
		},
		{
			name:    "non-finite YAML numbers",
			file:    "x.yaml",
			content: "EndpointConfigs:\n  - ProductionVariants:\n      - InitialVariantWeight: .inf\n",
			want:    "x.yaml: EndpointConfigs[0].ProductionVariants[0].InitialVariantWeight: syntax error: line 3: number is not finite",
			is:      ErrSyntax,
		},
		{
			name:    "alias cycles hit the depth cap",
			file:    "x.yaml",
			content: "Models: &a [*a]\n",
			is:      ErrTooDeep,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f, err := Parse(tt.file, []byte(tt.content))
			if err == nil {
				t.Fatalf("Parse() = %+v, want error %q", f, tt.want)
			}
			if tt.want != "" && err.Error() != tt.want {
				t.Errorf("Parse() error\n got: %s\nwant: %s", err, tt.want)
			}
			if !errors.Is(err, tt.is) {
				t.Errorf("Parse() error %v is not %v", err, tt.is)
			}
			var de *DecodeError
			if !errors.As(err, &de) || de.File != tt.file {
				t.Errorf("Parse() error %#v is not a *DecodeError for %s", err, tt.file)
			}
		})
	}
}

func TestParseLimits(t *testing.T) {
	deepJSON := strings.Repeat("[", MaxDepth+2) + strings.Repeat("]", MaxDepth+2)
	deepYAML := "Models: " + deepJSON
	// Each level multiplies by ten: 10^7 values from a few hundred bytes.
	bomb := "x-a: &a [x,x,x,x,x,x,x,x,x,x]\n"
	prev := "a"
	for _, name := range []string{"b", "c", "d", "e", "f", "g"} {
		bomb += "x-" + name + ": &" + name + " [" + strings.Repeat("*"+prev+",", 9) + "*" + prev + "]\n"
		prev = name
	}
	bomb += "Endpoints: *g\n"
	tests := []struct {
		name    string
		file    string
		content string
		is      error
	}{
		{"too large", "big.yaml", "Endpoints: []\n" + strings.Repeat("#", MaxFileSize), ErrTooLarge},
		{"JSON too deep", "deep.json", `{"Models": ` + deepJSON + `}`, ErrTooDeep},
		{"YAML too deep", "deep.yaml", deepYAML, ErrTooDeep},
		{"YAML alias bomb", "bomb.yaml", bomb, ErrTooDeep},
		// The second use of the alias is converted once but still counts its depth.
		{"YAML alias reused too deep", "reuse.yaml", "x-a: &a " + strings.Repeat("[", 20) + "1" + strings.Repeat("]", 20) +
			"\nx-b: *a\nModels: " + strings.Repeat("[", 15) + "*a" + strings.Repeat("]", 15) + "\n", ErrTooDeep},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Parse(tt.file, []byte(tt.content))
			if !errors.Is(err, tt.is) {
				t.Fatalf("Parse() error = %v, want %v", err, tt.is)
			}
		})
	}
}

func TestDetectFormat(t *testing.T) {
	tests := []struct {
		name, data string
		want       Format
	}{
		{"a.json", "Models: []", FormatJSON},
		{"a.YAML", `{"Models": []}`, FormatYAML},
		{"a.yml", "", FormatYAML},
		{"-", "  \n\t{\"Models\": []}", FormatJSON},
		{"endpoint", "\xEF\xBB\xBF[1]", FormatJSON},
		{"endpoint", "Models: []", FormatYAML},
		{"endpoint", "", FormatYAML},
	}
	for _, tt := range tests {
		t.Run(tt.name+"/"+tt.data, func(t *testing.T) {
			if got := DetectFormat(tt.name, []byte(tt.data)); got != tt.want {
				t.Errorf("DetectFormat(%q, %q) = %v, want %v", tt.name, tt.data, got, tt.want)
			}
		})
	}
}

// TestYAMLAndJSONAgree checks that the two syntaxes decode to the same File.
func TestYAMLAndJSONAgree(t *testing.T) {
	abYAML, err := os.ReadFile("testdata/ab-test.yaml")
	if err != nil {
		t.Fatal(err)
	}
	abJSON, err := os.ReadFile("testdata/ab-test.json")
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name       string
		yaml, json string
	}{
		{"testdata files", string(abYAML), string(abJSON)},
		{
			"integral numbers as integers or decimals",
			"EndpointConfigs: [{ProductionVariants: [{InitialInstanceCount: 2.0, InitialVariantWeight: 1}]}]",
			`{"EndpointConfigs": [{"ProductionVariants": [{"InitialInstanceCount": 2, "InitialVariantWeight": 1.0}]}]}`,
		},
		{
			"null is absent",
			"Models: [{ModelName: m, PrimaryContainer: ~, Containers: null, Tags: []}]",
			`{"Models": [{"ModelName": "m", "Tags": []}]}`,
		},
		{
			"anchors and merge keys expand",
			"x-base: &base {Image: img, Environment: {A: b}}\nModels: [{ModelName: m, Containers: [{<<: *base, ContainerHostname: one}, {<<: *base, Image: other}]}]",
			`{"Models": [{"ModelName": "m", "Containers": [{"ContainerHostname": "one", "Image": "img", "Environment": {"A": "b"}}, {"Image": "other", "Environment": {"A": "b"}}]}]}`,
		},
		{
			"kept-raw members re-encode the same",
			"EndpointConfigs: [{AsyncInferenceConfig: {OutputConfig: {S3OutputPath: 's3://b/o'}, ClientConfig: {MaxConcurrentInvocationsPerInstance: 4}}}]",
			`{"EndpointConfigs": [{"AsyncInferenceConfig": {"ClientConfig": {"MaxConcurrentInvocationsPerInstance": 4}, "OutputConfig": {"S3OutputPath": "s3://b/o"}}}]}`,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fy, err := Parse("f.yaml", []byte(tt.yaml))
			if err != nil {
				t.Fatalf("Parse(yaml): %v", err)
			}
			fj, err := Parse("f.json", []byte(tt.json))
			if err != nil {
				t.Fatalf("Parse(json): %v", err)
			}
			if !reflect.DeepEqual(fy, fj) {
				t.Errorf("YAML and JSON differ\nyaml: %+v\njson: %+v", fy, fj)
			}
		})
	}
}

func TestDecodeJSONRoundTrip(t *testing.T) {
	// A boto3-style CreateModel body, as the control-plane API receives it.
	body := `{"ModelName":"m","PrimaryContainer":{"Image":"img","Mode":"MultiModel","ModelDataUrl":"s3://b/p/","Environment":{"A":"b"},"MultiModelConfig":{"ModelCacheSetting":"Disabled"}},"EnableNetworkIsolation":false}`
	var got CreateModelInput
	if err := DecodeJSON([]byte(body), &got); err != nil {
		t.Fatalf("DecodeJSON: %v", err)
	}
	isolation := false
	want := CreateModelInput{
		ModelName: "m",
		PrimaryContainer: &ContainerDefinition{
			Image: "img", Environment: map[string]string{"A": "b"}, Mode: "MultiModel", ModelDataURL: "s3://b/p/",
			MultiModelConfig: &MultiModelConfig{ModelCacheSetting: "Disabled"},
		},
		EnableNetworkIsolation: &isolation,
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("DecodeJSON\n got: %+v\nwant: %+v", got, want)
	}
	out, err := json.Marshal(got)
	if err != nil {
		t.Fatal(err)
	}
	// encoding/json writes members in field order; the body above uses it too.
	if string(out) != body {
		t.Errorf("Marshal\n got: %s\nwant: %s", out, body)
	}

	if err := DecodeJSON([]byte(`{"ModelName":"m","Extra":1}`), &got); !errors.Is(err, ErrUnknownField) {
		t.Errorf("DecodeJSON(unknown member) error = %v, want ErrUnknownField", err)
	}
	if err := DecodeJSON([]byte(`{}`), got); !errors.Is(err, ErrType) {
		t.Errorf("DecodeJSON(non-pointer) error = %v, want ErrType", err)
	}
}

func FuzzParse(f *testing.F) {
	err := filepath.WalkDir("testdata", func(path string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		data, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		f.Add(filepath.Base(path), data)
		return nil
	})
	if err != nil {
		f.Fatal(err)
	}
	f.Add("x.json", []byte(`{"Models":[{"ModelName":"m","PrimaryContainer":{"Image":"i"}}]}`))
	f.Add("x", []byte("Endpoints: [{EndpointName: e, EndpointConfigName: c}]"))
	f.Fuzz(func(t *testing.T, name string, data []byte) {
		file, err := Parse(name, data)
		if err != nil {
			var de *DecodeError
			if !errors.As(err, &de) {
				t.Fatalf("Parse error %T is not a *DecodeError: %v", err, err)
			}
			return
		}
		// What decoded re-encodes to JSON that decodes to the same.
		out, err := json.Marshal(file)
		if err != nil {
			t.Fatalf("Marshal: %v", err)
		}
		again, err := Parse("again.json", out)
		if err != nil {
			t.Fatalf("Parse(Marshal(file)) = %v for %s", err, out)
		}
		out2, err := json.Marshal(again)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(out, out2) {
			t.Fatalf("round trip changed the document\nfirst:  %s\nsecond: %s", out, out2)
		}
		// Validation and planning never panic on decoded input.
		b := &Bundle{}
		for _, m := range file.Models {
			_ = m.Validate()
			_ = m.Warnings()
			b.Models = append(b.Models, Model{CreateModelInput: m})
		}
		for _, c := range file.EndpointConfigs {
			_ = c.Validate()
			_ = c.Warnings()
			b.EndpointConfigs = append(b.EndpointConfigs, EndpointConfig{CreateEndpointConfigInput: c})
		}
		for _, e := range file.Endpoints {
			_ = e.Validate()
			b.Endpoints = append(b.Endpoints, Endpoint{CreateEndpointInput: e})
		}
		_, _, _ = b.Plans("us-east-1", "123456789012")
	})
}

func TestYAMLScalars(t *testing.T) {
	tests := []struct {
		yaml    string
		want    any
		wantErr bool
	}{
		{yaml: "yes", want: "yes"}, // YAML 1.2: not a boolean
		{yaml: "True", want: true},
		{yaml: "false", want: false},
		{yaml: "~", want: nil},
		{yaml: "12", want: number("12")},
		{yaml: "-7", want: number("-7")},
		{yaml: "0x1F", want: number("31")},
		{yaml: "0o17", want: number("15")},
		{yaml: "1.5e3", want: number("1500")},
		{yaml: "0.25", want: number("0.25")},
		{yaml: "!!str 12", want: "12"},
		{yaml: "2001-12-14", want: "2001-12-14"},
		{yaml: "!!binary aGVsbG8=", want: "aGVsbG8="},
		{yaml: "'a: b'", want: "a: b"},
		{yaml: ".nan", wantErr: true},
		{yaml: "-.inf", wantErr: true},
		{yaml: "!!int x", wantErr: true},
		{yaml: "!custom x", wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.yaml, func(t *testing.T) {
			got, err := yamlToPlain([]byte("k: " + tt.yaml + "\n"))
			if (err != nil) != tt.wantErr {
				t.Fatalf("yamlToPlain(%q) error = %v, wantErr %v", tt.yaml, err, tt.wantErr)
			}
			if tt.wantErr {
				return
			}
			want := object{{key: "k", val: tt.want}}
			if !reflect.DeepEqual(got, want) {
				t.Errorf("yamlToPlain(%q) = %#v, want %#v", tt.yaml, got, want)
			}
		})
	}
}

// DecodeJSON takes the members of an embedded struct as the outer struct's
// own, keeps them strict (case, unknown keys), and leaves the embedded
// struct's own name unreachable.
func TestDecodeJSONEmbedded(t *testing.T) {
	type common struct {
		SortBy     string
		MaxResults *int
	}
	type shape struct {
		common
		Extra string
	}
	var v shape
	if err := DecodeJSON([]byte(`{"SortBy": "Name", "MaxResults": 2, "Extra": "x"}`), &v); err != nil {
		t.Fatal(err)
	}
	if v.SortBy != "Name" || v.MaxResults == nil || *v.MaxResults != 2 || v.Extra != "x" {
		t.Errorf("decoded %+v", v)
	}
	for body, want := range map[string]string{
		`{"sortBy": "Name"}`:         "sortBy: unknown field (did you mean SortBy?)",
		`{"common": {}}`:             "common: unknown field",
		`{"MaxResults": "2"}`:        "MaxResults: wrong type: expected an integer, got a string",
		`{"SortBy": "a", "Nope": 1}`: "Nope: unknown field",
	} {
		var v shape
		if err := DecodeJSON([]byte(body), &v); err == nil || err.Error() != want {
			t.Errorf("%s: %v, want %q", body, err, want)
		}
	}
}
