package modelserver

import (
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"testing"

	"github.com/mce-run/mce/examples/containers/internal/smserve"
)

func TestDecodeAndRun(t *testing.T) {
	m := mustCompile(t, tinySpec())
	for _, body := range []string{
		`{"inputs":[{"name":"X","shape":[3,2],"datatype":"FP64","data":[[1,2],[6,7],[-3,1]]}]}`,
		`{"inputs":[{"name":"X","shape":[3,2],"datatype":"FP64","data":[1,2,6,7,-3,1]}]}`,
		`{"inputs":[{"name":"X","shape":[3,2],"datatype":"FP64","data":[[[1,2]],[6,7e0],[-3,0.1e1]]}],"extra":1}`,
	} {
		b, err := m.DecodeRequest("tiny", []byte(body))
		if err != nil {
			t.Fatalf("%s: %v", body, err)
		}
		resp, err := m.Run("tiny", b)
		if err != nil {
			t.Fatal(err)
		}
		got, _ := json.Marshal(resp)
		want := `{"model_name":"tiny","model_version":"1","outputs":[{"name":"Y","datatype":"FP64","shape":[3,1],"data":[3.5,16.5,1.5]}]}`
		if string(got) != want {
			t.Errorf("%s\n got %s\nwant %s", body, got, want)
		}
	}
}

func TestRunIDAndOutputs(t *testing.T) {
	m := mustCompile(t, tinySpec())
	b, err := m.DecodeRequest("tiny", []byte(`{"id":"r1","inputs":[{"name":"X","shape":[0,2],"datatype":"FP64","data":[]}],"outputs":[{"name":"Y"}]}`))
	if err != nil {
		t.Fatal(err)
	}
	resp, _ := m.Run("tiny", b)
	got, _ := json.Marshal(resp)
	if want := `{"model_name":"tiny","model_version":"1","id":"r1","outputs":[{"name":"Y","datatype":"FP64","shape":[0,1],"data":[]}]}`; string(got) != want {
		t.Errorf("got %s\nwant %s", got, want)
	}
}

func TestFP32Response(t *testing.T) {
	s := tinySpec()
	s.Inputs[0].Datatype, s.Outputs[0].Datatype = FP32, FP32
	s.Layers[1].Bias[0] = 0.1
	m := mustCompile(t, s)
	b, err := m.DecodeRequest("t", []byte(`{"inputs":[{"name":"X","shape":[1,2],"datatype":"FP32","data":[0.3,0.3]}]}`))
	if err != nil {
		t.Fatal(err)
	}
	resp, _ := m.Run("t", b)
	got, _ := json.Marshal(resp.Outputs[0].Data)
	if string(got) != "[0.70000005]" { // float32 arithmetic, shortest float32 text
		t.Errorf("data %s", got)
	}
}

func TestDecodeErrors(t *testing.T) {
	s := tinySpec()
	m := mustCompile(t, s)
	m.MaxBatchSize = 2
	for _, tc := range []struct{ body, want string }{
		{`{`, "failed to parse the request JSON buffer"},
		{`{"inputs":[]}`, "expected 1 inputs but got 0 inputs for model 'tiny'"},
		{`{"inputs":[{"name":"Z","shape":[1,2],"datatype":"FP64","data":[1,2]}]}`, "unexpected inference input 'Z' for model 'tiny'"},
		{`{"inputs":[{"name":"X","shape":[1,2],"datatype":"FP32","data":[1,2]}]}`, "data-type is 'FP32', but model 'tiny' expects 'FP64'"},
		{`{"inputs":[{"name":"X","shape":[1,3],"datatype":"FP64","data":[1,2,3]}]}`, "Expected [-1,2], got [1,3]"},
		{`{"inputs":[{"name":"X","shape":[2],"datatype":"FP64","data":[1,2]}]}`, "Expected [-1,2], got [2]"},
		{`{"inputs":[{"name":"X","shape":[-1,2],"datatype":"FP64","data":[1,2]}]}`, "got [-1,2]"},
		{`{"inputs":[{"name":"X","shape":[3,2],"datatype":"FP64","data":[1,2,3,4,5,6]}]}`, "batch-size must be <= 2 for 'tiny'"},
		{`{"inputs":[{"name":"X","shape":[2,2],"datatype":"FP64","data":[1,2,3]}]}`, "shape [2,2] has 4 elements but 'data' has 3"},
		{`{"inputs":[{"name":"X","shape":[1,2],"datatype":"FP64","data":[1,2,3]}]}`, "more elements than the shape holds"},
		{`{"inputs":[{"name":"X","shape":[1,2],"datatype":"FP64","data":["1",2]}]}`, "found a string"},
		{`{"inputs":[{"name":"X","shape":[1,2],"datatype":"FP64","data":[true,2]}]}`, "found a boolean"},
		{`{"inputs":[{"name":"X","shape":[1,2],"datatype":"FP64","data":[{},2]}]}`, "found an object"},
		{`{"inputs":[{"name":"X","shape":[1,2],"datatype":"FP64"}]}`, "has no 'data'"},
		{`{"inputs":[{"name":"X","shape":[1,2],"datatype":"FP64","data":null}]}`, "has no 'data'"},
		{`{"inputs":[{"name":"X","shape":[1,2],"datatype":"FP64","data":[1,2]}],"outputs":[{"name":"Q"}]}`, "unexpected inference output 'Q'"},
		{`{"inputs":[{"name":"X","shape":[1,2],"datatype":"FP64","data":` + strings.Repeat("[", 40) + "1" + strings.Repeat("]", 40) + `}]}`, "nested deeper"},
		{`{"inputs":[{"name":"X","shape":[99999999999,2],"datatype":"FP64","data":[1,2]}]}`, "got [99999999999,2]"},
		{`{"inputs":[{"name":"X","shape":[9999999,2],"datatype":"FP64","data":[1,2]}]}`, "more elements than a request can carry"},
	} {
		_, err := m.DecodeRequest("tiny", []byte(tc.body))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: error %v, want %q", tc.body, err, tc.want)
			continue
		}
		if smserve.StatusOf(err) != http.StatusBadRequest {
			t.Errorf("%s: status %d", tc.body, smserve.StatusOf(err))
		}
	}
	s.Inputs[0].Datatype = FP32
	m32 := mustCompile(t, s)
	if _, err := m32.DecodeRequest("t", []byte(`{"inputs":[{"name":"X","shape":[1,2],"datatype":"FP32","data":[1e39,2]}]}`)); err == nil ||
		!strings.Contains(err.Error(), "FP32 range") {
		t.Errorf("1e39 in FP32: %v", err)
	}
}

func TestRunOverflow(t *testing.T) {
	s := tinySpec()
	s.Layers[1].Weights[0][0] = 1e300
	m := mustCompile(t, s)
	b, err := m.DecodeRequest("t", []byte(`{"inputs":[{"name":"X","shape":[1,2],"datatype":"FP64","data":[1e300,0]}]}`))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := m.Run("t", b); err == nil || !strings.Contains(err.Error(), "not finite") {
		t.Errorf("overflow: %v", err)
	}
}

func TestScratchBudget(t *testing.T) {
	b := &budget{limit: 100, workspace: 50}
	if n, err := b.scratch(50); n != 0 || err != nil {
		t.Fatalf("within workspace: %d %v", n, err)
	}
	n, err := b.scratch(120)
	if n != 70 || err != nil {
		t.Fatalf("scratch(120) = %d, %v", n, err)
	}
	_, err = b.scratch(90)
	var se *smserve.Error
	if !errors.As(err, &se) || se.Status != http.StatusInsufficientStorage || !strings.Contains(se.Message, "out of memory") {
		t.Fatalf("over budget: %v", err)
	}
	b.give(n)
	if used, _ := b.usage(); used != 0 {
		t.Errorf("used %d after give", used)
	}
}
