package host

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/mce-run/mce/host/apierr"
	"github.com/mce-run/mce/host/spec"
	"github.com/mce-run/mce/host/store"
)

// controlOps are the control-plane operations in a fixed order, so that a
// fuzz input can pick one by number.
func controlOps() []string {
	names := make([]string, 0, len(operations))
	for n := range operations {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// controlFixture is a server holding a model, an endpoint configuration
// and an InService endpoint named "victim" and the same named "other".
func controlFixture(t *testing.T) *Server {
	t.Helper()
	s := New(Config{Backend: &fakeBackend{t: t}, Store: openStore(t), Logger: zerolog.Nop()})
	t.Cleanup(func() { s.Close(context.Background()) })
	for _, name := range []string{"victim", "other"} {
		if _, err := s.CreateModel(t.Context(), spec.CreateModelInput{ModelName: name, PrimaryContainer: &spec.ContainerDefinition{Image: "tag"}}, ""); err != nil {
			t.Fatal(err)
		}
		cfg := spec.CreateEndpointConfigInput{EndpointConfigName: name, ProductionVariants: []spec.ProductionVariant{
			{VariantName: "AllTraffic", ModelName: name, InitialInstanceCount: new(int32(1)), InstanceType: "ml.m5.large"}}}
		if _, err := s.CreateEndpointConfig(t.Context(), cfg); err != nil {
			t.Fatal(err)
		}
		if _, err := s.CreateEndpoint(t.Context(), spec.CreateEndpointInput{EndpointName: name, EndpointConfigName: name}); err != nil {
			t.Fatal(err)
		}
		for deadline := time.Now().Add(10 * time.Second); s.reg.get(name).Status() != spec.StatusInService; {
			if time.Now().After(deadline) {
				t.Fatalf("%s: %s", name, s.reg.get(name).Status())
			}
			time.Sleep(time.Millisecond)
		}
	}
	return s
}

// controlState is every resource's ARN with what can change about it.
func controlState(t *testing.T, s *Server) map[string]string {
	t.Helper()
	st := map[string]string{}
	if err := store.List(s.store, store.Models, func(r ModelRecord) error { st[r.ARN] = fmt.Sprint("model ", r.Tags); return nil }); err != nil {
		t.Fatal(err)
	}
	if err := store.List(s.store, store.EndpointConfigs, func(r ConfigRecord) error { st[r.ARN] = fmt.Sprint("config ", r.Tags); return nil }); err != nil {
		t.Fatal(err)
	}
	for _, e := range s.reg.all() {
		rec := e.record()
		st[rec.ARN] = fmt.Sprint(e.Status(), " ", rec.ConfigName, " ", rec.Pending, " ", rec.Tags)
	}
	return st
}

// changed lists the ARNs whose state differs between a and b.
func changed(a, b map[string]string) []string {
	var out []string
	for k, v := range a {
		if w, ok := b[k]; !ok || w != v {
			out = append(out, k)
		}
	}
	for k := range b {
		if _, ok := a[k]; !ok {
			out = append(out, k)
		}
	}
	sort.Strings(out)
	return out
}

// FuzzControlResource: for any body, the resource a control-plane call is
// authorized on is the resource it operates on, or the call is refused and
// changes nothing. The operated-on resource is observed, not recomputed:
// the ARN in the answer (Describe, Create, Update) and every resource whose
// state changed (Create, Update, Delete). Calls on "victim" are denied, so
// a divergence shows up as the victim being touched or shown.
func FuzzControlResource(f *testing.F) {
	ops := controlOps()
	index := func(name string) uint8 {
		for i, n := range ops {
			if n == name {
				return uint8(i)
			}
		}
		panic(name)
	}
	bom := "\xEF\xBB\xBF"
	for _, op := range []string{"DescribeEndpoint", "DeleteEndpoint", "UpdateEndpoint", "UpdateEndpointWeightsAndCapacities"} {
		for _, body := range []string{
			`{"EndpointName":"victim"}`,
			bom + `{"EndpointName":"victim"}`,
			bom + bom + `{"EndpointName":"victim"}`,
			`{"EndpointName":"other","EndpointName":"victim"}`,
			`{"EndpointName":"victim","EndpointName":"other"}`,
			`{"\u0045ndpointName":"victim"}`,
			`{"EndpointName":"\u0076ictim"}`,
			`{"endpointname":"victim"}`,
			`{"EndpointName":"other","endpointName":"victim"}`,
			`{"ENDPOINTNAME":"victim","EndpointName":"other"}`,
			`{"EndpointName":"VICTIM"}`,
			" \t\r\n{\"EndpointName\" : \"victim\"}\n",
			`{"EndpointName":"victim"`,
			`{"EndpointName":"vic`,
			`{"EndpointName":"victim"}{"EndpointName":"other"}`,
			`{"EndpointName":"victim\u0000"}`,
			`{"EndpointName":"other","EndpointConfigName":"victim","DesiredWeightsAndCapacities":[{"VariantName":"AllTraffic","DesiredWeight":2}]}`,
			`{"EndpointName":"victim","EndpointConfigName":"other","DesiredWeightsAndCapacities":[{"VariantName":"AllTraffic","DesiredInstanceCount":2}]}`,
			`{"EndpointName":"other","EndpointConfigName":"other","DesiredWeightsAndCapacities":[{"VariantName":"AllTraffic","DesiredWeight":0.5}]}`,
			`{"ModelName":"victim","EndpointName":"other"}`,
			``,
			`null`,
		} {
			f.Add(index(op), []byte(body))
		}
	}
	for _, seed := range []struct{ op, body string }{
		{"DescribeModel", bom + `{"ModelName":"victim"}`},
		{"DeleteModel", `{"ModelName":"other","modelName":"victim"}`},
		{"DeleteModel", `{"ModelName":"other"}`},
		{"DeleteEndpointConfig", `{"EndpointConfigName":"\u0076ictim"}`},
		{"DescribeEndpointConfig", `{"EndpointConfigName":"other","EndpointName":"victim"}`},
		{"CreateModel", `{"ModelName":"new","PrimaryContainer":{"Image":"x"},"EndpointName":"victim"}`},
		{"CreateModel", `{"ModelName":"new","PrimaryContainer":{"Image":"x"}}`},
		{"CreateEndpointConfig", `{"EndpointConfigName":"new","ProductionVariants":[{"VariantName":"v","ModelName":"victim","InitialInstanceCount":1,"InstanceType":"ml.m5.large"}]}`},
		{"CreateEndpoint", `{"EndpointName":"new","EndpointConfigName":"victim"}`},
		{"CreateEndpoint", bom + `{"EndpointName":"victim","EndpointConfigName":"other"}`},
		{"ListEndpoints", `{"NameContains":"victim"}`},
		{"ListModels", bom + `{"MaxResults":1}`},
	} {
		f.Add(index(seed.op), []byte(seed.body))
	}
	// Tag operations act on the ResourceArn, however it is spelled.
	victimModel := `"arn:aws:sagemaker:us-east-1:123456789012:model/victim"`
	for _, seed := range []struct{ op, body string }{
		{"AddTags", `{"ResourceArn":` + victimModel + `,"Tags":[{"Key":"k","Value":"v"}]}`},
		{"AddTags", `{"ResourceArn":"arn:aws:sagemaker:us-east-1:123456789012:endpoint/VICTIM","Tags":[{"Key":"k","Value":"v"}]}`},
		{"AddTags", `{"ResourceArn":"arn:aws:sagemaker:us-east-1:123456789012:endpoint-config/\u0076ictim","Tags":[{"Key":"k","Value":""}]}`},
		{"AddTags", `{"ResourceArn":"arn:aws:sagemaker:us-east-1:123456789012:model/other","Tags":[{"Key":"k","Value":"v"}]}`},
		{"AddTags", `{"ResourceArn":"arn:aws:sagemaker:us-east-1:123456789012:model/other","resourceArn":` + victimModel + `,"Tags":[]}`},
		{"AddTags", `{"ResourceArn":"arn:aws:sagemaker:us-east-1:123456789012:model/other/../victim","Tags":[{"Key":"k","Value":"v"}]}`},
		{"DeleteTags", `{"ResourceArn":` + victimModel + `,"TagKeys":["k"]}`},
		{"DeleteTags", bom + `{"ResourceArn":"arn:aws:sagemaker:us-east-1:123456789012:endpoint/other","TagKeys":["k"]}`},
		{"ListTags", `{"ResourceArn":` + victimModel + `}`},
		{"ListTags", `{"ResourceArn":"arn:aws:sagemaker:us-east-1:123456789012:endpoint-config/other","MaxResults":50}`},
	} {
		f.Add(index(seed.op), []byte(seed.body))
	}

	victims := map[string]bool{}
	for _, kind := range []spec.Kind{spec.KindModel, spec.KindEndpointConfig, spec.KindEndpoint} {
		victims[spec.ARN("us-east-1", "123456789012", kind, "victim")] = true
	}
	f.Fuzz(func(t *testing.T, opIndex uint8, body []byte) {
		name := ops[int(opIndex)%len(ops)]
		s := controlFixture(t)
		before := controlState(t, s)
		var authorized []string
		out, err := s.control(context.Background(), operations[name], body, func(resource string, _ requestKeys) *apierr.Error {
			authorized = append(authorized, resource)
			if victims[resource] {
				return &apierr.Error{Status: http.StatusForbidden, Code: apierr.CodeAccessDenied, Message: "denied"}
			}
			return nil
		})
		after := controlState(t, s)
		diff := changed(before, after)
		if len(authorized) > 1 {
			t.Fatalf("%s %q: authorized %d times: %q", name, body, len(authorized), authorized)
		}
		if err != nil {
			if len(diff) > 0 {
				t.Fatalf("%s %q: refused (%v) but changed %q", name, body, err, diff)
			}
			return
		}
		if len(authorized) != 1 {
			t.Fatalf("%s %q: ran without authorization", name, body)
		}
		resource := authorized[0]
		if victims[resource] {
			t.Fatalf("%s %q: ran although %s was denied", name, body, resource)
		}
		for _, arn := range diff {
			if arn != resource {
				t.Fatalf("%s %q: authorized on %s but changed %s", name, body, resource, arn)
			}
		}
		b, jerr := json.Marshal(out)
		if jerr != nil {
			t.Fatal(jerr)
		}
		if strings.HasSuffix(name, "Tags") {
			return // changes, if any, were to the resource authorized (checked above)
		}
		if strings.HasPrefix(name, "List") {
			if resource != "*" || len(diff) > 0 {
				t.Fatalf("%s: authorized on %s (want *), changed %q", name, resource, diff)
			}
			return
		}
		var fields map[string]any
		json.Unmarshal(b, &fields)
		key := map[bool]string{true: "EndpointArn"}[strings.Contains(name, "Endpoint") && !strings.Contains(name, "EndpointConfig")]
		switch {
		case strings.Contains(name, "EndpointConfig"):
			key = "EndpointConfigArn"
		case strings.Contains(name, "Model"):
			key = "ModelArn"
		}
		got, _ := fields[key].(string)
		switch {
		case got != "" && got != resource:
			t.Fatalf("%s %q: authorized on %s but answered about %s", name, body, resource, got)
		case got == "" && len(diff) == 0:
			t.Fatalf("%s %q: succeeded without showing or changing %s (answer %s)", name, body, resource, b)
		}
	})
}
