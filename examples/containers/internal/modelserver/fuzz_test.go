package modelserver

import (
	"errors"
	"net/http"
	"testing"
	"testing/fstest"

	"github.com/mce-run/mce/examples/containers/internal/smserve"
)

func FuzzLoadModel(f *testing.F) {
	f.Add(specJSON(f, tinySpec()), "name: \"tiny\"\nmax_batch_size: 2\n")
	f.Add([]byte(`{"inputs":[{"name":"a","datatype":"FP32","shape":[3]}],"outputs":[{"name":"b","datatype":"FP32","shape":[1]}],"layers":[{"weights":[[1,2,3]],"bias":[0],"activation":"sigmoid"}]}`), "")
	f.Add([]byte(`{"layers":[{"weights":[[1e308]]}]}`), "input [ { dims: [ 1 ] } ]")
	f.Fuzz(func(t *testing.T, model []byte, config string) {
		fsys := fstest.MapFS{ModelFile: {Data: model}}
		if config != "" {
			fsys[ConfigFile] = &fstest.MapFile{Data: []byte(config)}
		}
		m, err := LoadFS(fsys)
		if err != nil {
			return
		}
		if m.Footprint < 0 || m.Params <= 0 || m.inFeatures <= 0 || m.outFeatures <= 0 {
			t.Fatalf("bad model %+v", m)
		}
		if m.Params > 1<<12 {
			return // keep the run cheap
		}
		y := m.Forward(make([]float64, 2*m.inFeatures), 2)
		if len(y) != 2*m.outFeatures {
			t.Fatalf("Forward gave %d values, want %d", len(y), 2*m.outFeatures)
		}
	})
}

func FuzzInferRequest(f *testing.F) {
	f.Add([]byte(tinyReq))
	f.Add([]byte(`{"id":"x","inputs":[{"name":"X","shape":[1,2],"datatype":"FP64","data":[[1],[2]]}],"outputs":[{"name":"Y"}]}`))
	f.Add([]byte(`{"inputs":[{"name":"X","shape":[0,2],"datatype":"FP64","data":[]}]}`))
	f.Add([]byte(`{"inputs":[{"name":"X","shape":[1,2],"datatype":"FP64","data":[1e308,1e308]}]}`))
	m := mustCompile(f, tinySpec())
	m.MaxBatchSize = 64
	f.Fuzz(func(t *testing.T, body []byte) {
		b, err := m.DecodeRequest("tiny", body)
		if err != nil {
			var se *smserve.Error
			if !errors.As(err, &se) || se.Status != http.StatusBadRequest {
				t.Fatalf("error %v is not a 400", err)
			}
			return
		}
		if len(b.X) != b.Rows*m.inFeatures || b.Rows > 64 {
			t.Fatalf("%d rows, %d values", b.Rows, len(b.X))
		}
		resp, err := m.Run("tiny", b)
		if err != nil {
			return
		}
		if b.Output && len(resp.Outputs[0].Data.([]float64)) != b.Rows {
			t.Fatalf("output %v for %d rows", resp.Outputs[0].Data, b.Rows)
		}
	})
}
