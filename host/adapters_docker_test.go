package host_test

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"errors"
	"math"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sagemaker"
	smtypes "github.com/aws/aws-sdk-go-v2/service/sagemaker/types"
	"github.com/aws/aws-sdk-go-v2/service/sagemakerruntime"
	rttypes "github.com/aws/aws-sdk-go-v2/service/sagemakerruntime/types"
	"github.com/aws/smithy-go"
	"github.com/moby/moby/client"

	"github.com/mce-run/mce/host/store"
	"github.com/mce-run/mce/internal/testenv"
)

// The base network of the adapter test (modelserver's dense format,
// FP64): 2 → 3 (relu) → 2. Its weights are the test's, so that every
// expected answer is computed here.
var (
	lW0 = [][]float64{{0.5, -1}, {1.5, 0.25}, {-0.75, 2}}
	lB0 = []float64{0.1, -0.2, 0.3}
	lW1 = [][]float64{{1, -0.5, 0.25}, {-1, 0.75, 0.5}}
	lB1 = []float64{0.05, -0.05}
	lX  = []float64{0.8, -0.3}
)

// lora is one adapter of the test: rank-r deltas of the layers it names.
type lora struct {
	Format string      `json:"format"`
	Rank   int         `json:"rank"`
	Alpha  float64     `json:"alpha"`
	Layers []loraLayer `json:"layers"`
}

type loraLayer struct {
	Layer int         `json:"layer"`
	A     [][]float64 `json:"a"`
	B     [][]float64 `json:"b"`
}

// expect is the network's answer to lX with the adapter's deltas
// W + (alpha/rank)·B·A added to the weights (none: the base's).
func (a *lora) expect() []float64 {
	w := [][][]float64{lW0, lW1}
	if a != nil {
		for _, l := range a.Layers {
			nw := make([][]float64, len(w[l.Layer]))
			for j, row := range w[l.Layer] {
				nw[j] = make([]float64, len(row))
				for i := range row {
					d := 0.0
					for k := range a.Rank {
						d += l.B[j][k] * l.A[k][i]
					}
					nw[j][i] = row[i] + a.Alpha/float64(a.Rank)*d
				}
			}
			w[l.Layer] = nw
		}
	}
	dense := func(w [][]float64, b, in []float64, relu bool) []float64 {
		out := make([]float64, len(w))
		for j, row := range w {
			s := b[j]
			for i, v := range row {
				s += v * in[i]
			}
			if relu && s < 0 {
				s = 0
			}
			out[j] = s
		}
		return out
	}
	return dense(w[1], lB1, dense(w[0], lB0, lX, true), false)
}

// tgz packs files into a tar.gz; names are taken as given (hostile ones too).
func tgz(t *testing.T, path string, files map[string][]byte) {
	t.Helper()
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	tw := tar.NewWriter(zw)
	for name, b := range files {
		if err := tw.WriteHeader(&tar.Header{Name: name, Mode: 0o644, Size: int64(len(b)), Typeflag: tar.TypeReg}); err != nil {
			t.Fatal(err)
		}
		tw.Write(b)
	}
	tw.Close()
	zw.Close()
	if err := os.WriteFile(path, buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestDockerAdapterComponents puts a base component (modelserver with a
// dense network) and two LoRA adapters of it on one endpoint: each adapter
// answers with its own deltas applied (computed here), on every copy of
// the base, also one started after the adapters; it then checks the
// refusals, an adapter whose artifact is a hostile archive, a restart, and
// an adapter whose base is gone.
func TestDockerAdapterComponents(t *testing.T) {
	cli := testenv.Docker(t)
	image := testenv.OwnImage(t, "modelserver") // this checkout's: its adapter API
	instance := testenv.Instance(t)
	st, err := store.Open(filepath.Join(t.TempDir(), "state.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	h := startICHost(t, instance, t.TempDir(), st)
	ctx := context.Background()
	const ep = "lora-share"

	// The artifacts: the base model as a folder, a1 as a tar.gz, a2 as a folder.
	dir := t.TempDir() // under the host's model roots (the temporary folder)
	model, _ := json.Marshal(map[string]any{
		"inputs":  []any{map[string]any{"name": "INPUT0", "datatype": "FP64", "shape": []int{-1, 2}}},
		"outputs": []any{map[string]any{"name": "OUTPUT0", "datatype": "FP64", "shape": []int{-1, 2}}},
		"layers": []any{map[string]any{"weights": lW0, "bias": lB0, "activation": "relu"},
			map[string]any{"weights": lW1, "bias": lB1}}})
	os.MkdirAll(filepath.Join(dir, "base"), 0o755)
	os.WriteFile(filepath.Join(dir, "base", "model.json"), model, 0o644)
	a1 := &lora{Format: "mce-lora/1", Rank: 1, Alpha: 2, Layers: []loraLayer{
		{Layer: 0, A: [][]float64{{1, 0.5}}, B: [][]float64{{0.2}, {-0.4}, {0.6}}}}}
	a2 := &lora{Format: "mce-lora/1", Rank: 2, Alpha: 1, Layers: []loraLayer{
		{Layer: 1, A: [][]float64{{1, 0, -1}, {0.5, 0.5, 0.5}}, B: [][]float64{{1, -2}, {0.5, 0.25}}}}}
	j1, _ := json.Marshal(a1)
	j2, _ := json.Marshal(a2)
	tgz(t, filepath.Join(dir, "a1.tar.gz"), map[string][]byte{"adapter.json": j1})
	os.MkdirAll(filepath.Join(dir, "a2"), 0o755)
	os.WriteFile(filepath.Join(dir, "a2", "adapter.json"), j2, 0o644)
	tgz(t, filepath.Join(dir, "evil.tar.gz"), map[string][]byte{"../../evil/adapter.json": j1})
	base, want1, want2 := (*lora)(nil).expect(), a1.expect(), a2.expect()
	if near(want1, base) || near(want2, base) || near(want1, want2) {
		t.Fatal("the adapters do not change the answer: the test would prove nothing")
	}

	if _, err := h.sm.CreateEndpointConfig(ctx, &sagemaker.CreateEndpointConfigInput{EndpointConfigName: aws.String(ep + "-config"),
		ExecutionRoleArn: aws.String("arn:aws:iam::123456789012:role/mce"),
		ProductionVariants: []smtypes.ProductionVariant{{VariantName: aws.String("AllTraffic"), InitialInstanceCount: aws.Int32(1),
			InstanceType: smtypes.ProductionVariantInstanceTypeMlM5Xlarge}}}); err != nil {
		t.Fatal(err)
	}
	if _, err := h.sm.CreateEndpoint(ctx, &sagemaker.CreateEndpointInput{EndpointName: aws.String(ep), EndpointConfigName: aws.String(ep + "-config")}); err != nil {
		t.Fatal(err)
	}
	if err := h.Server.WaitEndpoint(ctx, ep); err != nil {
		t.Fatal(err)
	}
	if _, err := h.sm.CreateInferenceComponent(ctx, &sagemaker.CreateInferenceComponentInput{InferenceComponentName: aws.String("llm"),
		EndpointName: aws.String(ep), VariantName: aws.String("AllTraffic"),
		Specification: &smtypes.InferenceComponentSpecification{
			Container: &smtypes.InferenceComponentContainerSpecification{Image: aws.String(image), ArtifactUrl: aws.String("file://" + filepath.Join(dir, "base"))},
			ComputeResourceRequirements: &smtypes.InferenceComponentComputeResourceRequirements{NumberOfCpuCoresRequired: aws.Float32(0.25),
				MinMemoryRequiredInMb: aws.Int32(128)}},
		RuntimeConfig: &smtypes.InferenceComponentRuntimeConfig{CopyCount: aws.Int32(1)}}); err != nil {
		t.Fatal(err)
	}
	if d := h.wait(t, "llm"); d.InferenceComponentStatus != smtypes.InferenceComponentStatusInService {
		t.Fatalf("llm: %s %s", d.InferenceComponentStatus, aws.ToString(d.FailureReason))
	}
	adapter := func(name, baseName, url string) error {
		_, err := h.sm.CreateInferenceComponent(ctx, &sagemaker.CreateInferenceComponentInput{InferenceComponentName: aws.String(name),
			EndpointName: aws.String(ep), Specification: &smtypes.InferenceComponentSpecification{BaseInferenceComponentName: aws.String(baseName),
				Container: &smtypes.InferenceComponentContainerSpecification{ArtifactUrl: aws.String(url)}}})
		return err
	}
	for name, url := range map[string]string{"a1": "file://" + filepath.Join(dir, "a1.tar.gz"), "a2": "file://" + filepath.Join(dir, "a2")} {
		if err := adapter(name, "llm", url); err != nil {
			t.Fatal(err)
		}
	}
	for _, name := range []string{"a1", "a2"} {
		d := h.wait(t, name)
		if d.InferenceComponentStatus != smtypes.InferenceComponentStatusInService || d.RuntimeConfig != nil ||
			aws.ToString(d.Specification.BaseInferenceComponentName) != "llm" || aws.ToString(d.VariantName) != "AllTraffic" ||
			d.Specification.ComputeResourceRequirements != nil || !strings.HasPrefix(aws.ToString(d.Specification.Container.ArtifactUrl), "file://") {
			t.Fatalf("%s: %s %s %+v %+v", name, d.InferenceComponentStatus, aws.ToString(d.FailureReason), d.RuntimeConfig, d.Specification)
		}
	}
	if n := len(copies(t, cli, instance, "a1")); n != 0 {
		t.Fatalf("an adapter runs %d containers of its own", n)
	}
	check := func(h *icHost, name string, want []float64) {
		t.Helper()
		got, err := invokeDense(h, ep, name)
		if err != nil || !near(got, want) {
			t.Fatalf("invoke %s = %v, %v; want %v", name, got, err, want)
		}
	}
	check(h, "llm", base)
	check(h, "a1", want1)
	check(h, "a2", want2)
	// A response stream names the adapter to the container too.
	if got, err := invokeDenseStream(h, ep, "a2"); err != nil || !near(got, want2) {
		t.Fatalf("stream a2 = %v, %v; want %v", got, err, want2)
	}

	// A copy of the base started after the adapters has them before it takes calls.
	if _, err := h.sm.UpdateInferenceComponentRuntimeConfig(ctx, &sagemaker.UpdateInferenceComponentRuntimeConfigInput{InferenceComponentName: aws.String("llm"),
		DesiredRuntimeConfig: &smtypes.InferenceComponentRuntimeConfig{CopyCount: aws.Int32(3)}}); err != nil {
		t.Fatal(err)
	}
	if d := h.wait(t, "llm"); aws.ToInt32(d.RuntimeConfig.CurrentCopyCount) != 3 {
		t.Fatalf("llm scaled to 3: %+v %s", d.RuntimeConfig, aws.ToString(d.FailureReason))
	}
	for range 12 { // the copies are chosen at random among the least busy: all three answer
		check(h, "a1", want1)
		check(h, "a2", want2)
		check(h, "llm", base)
	}
	registered := func(want string) {
		t.Helper()
		ids := copies(t, cli, instance, "llm")
		for _, id := range ids {
			if got := adaptersIn(t, cli, id); got != want {
				t.Fatalf("copy %s of llm has the adapters %q registered, want %q", id[:12], got, want)
			}
		}
	}
	registered("a1,a2") // in each of the three copies, the third one started after them

	// Refusals, each a ValidationException that says why.
	refused := func(what string, err error, want string) {
		t.Helper()
		var ae smithy.APIError
		if !errors.As(err, &ae) || ae.ErrorCode() != "ValidationException" || !strings.Contains(ae.ErrorMessage(), want) {
			t.Errorf("%s: %v, want a ValidationException with %q", what, err, want)
		}
	}
	refused("adapter of an adapter", adapter("a3", "a1", "file://"+filepath.Join(dir, "a2")), "an adapter of an adapter is not supported")
	refused("unknown base", adapter("a3", "nope", "file://"+filepath.Join(dir, "a2")), `Could not find base inference component "arn:aws:sagemaker:`)
	refused("artifact outside the model roots", adapter("a3", "llm", "file:///etc"), "")
	spec := func(mod func(*smtypes.InferenceComponentSpecification)) *smtypes.InferenceComponentSpecification {
		s := &smtypes.InferenceComponentSpecification{BaseInferenceComponentName: aws.String("llm"),
			Container: &smtypes.InferenceComponentContainerSpecification{ArtifactUrl: aws.String("file://" + filepath.Join(dir, "a2"))}}
		mod(s)
		return s
	}
	for what, c := range map[string]struct {
		spec *smtypes.InferenceComponentSpecification
		rc   *smtypes.InferenceComponentRuntimeConfig
		want string
	}{
		"resources": {spec(func(s *smtypes.InferenceComponentSpecification) {
			s.ComputeResourceRequirements = &smtypes.InferenceComponentComputeResourceRequirements{MinMemoryRequiredInMb: aws.Int32(128)}
		}), nil, "omit ComputeResourceRequirements"},
		"image":           {spec(func(s *smtypes.InferenceComponentSpecification) { s.Container.Image = aws.String(image) }), nil, "omit Container.Image"},
		"no artifact":     {spec(func(s *smtypes.InferenceComponentSpecification) { s.Container.ArtifactUrl = nil }), nil, "needs Container.ArtifactUrl"},
		"model":           {spec(func(s *smtypes.InferenceComponentSpecification) { s.ModelName = aws.String("m") }), nil, "omit ModelName"},
		"copies":          {spec(func(*smtypes.InferenceComponentSpecification) {}), &smtypes.InferenceComponentRuntimeConfig{CopyCount: aws.Int32(1)}, "Omit RuntimeConfig"},
		"another variant": {spec(func(*smtypes.InferenceComponentSpecification) {}), nil, "omit VariantName or give the base's"},
	} {
		in := &sagemaker.CreateInferenceComponentInput{InferenceComponentName: aws.String("a3"), EndpointName: aws.String(ep),
			Specification: c.spec, RuntimeConfig: c.rc}
		if what == "another variant" {
			in.VariantName = aws.String("Other")
		}
		_, err := h.sm.CreateInferenceComponent(ctx, in)
		refused(what, err, c.want)
	}
	_, err = h.sm.UpdateInferenceComponentRuntimeConfig(ctx, &sagemaker.UpdateInferenceComponentRuntimeConfigInput{InferenceComponentName: aws.String("a1"),
		DesiredRuntimeConfig: &smtypes.InferenceComponentRuntimeConfig{CopyCount: aws.Int32(2)}})
	refused("copies of an adapter", err, "has no copies of its own")
	_, err = h.sm.DeleteInferenceComponent(ctx, &sagemaker.DeleteInferenceComponentInput{InferenceComponentName: aws.String("llm")})
	refused("deleting a base with adapters", err, "it is the base of the adapter inference components a1, a2; delete them first")

	// A hostile archive: the adapter fails, with the reason, and says so when invoked.
	if err := adapter("evil", "llm", "file://"+filepath.Join(dir, "evil.tar.gz")); err != nil {
		t.Fatal(err)
	}
	if d := h.wait(t, "evil"); d.InferenceComponentStatus != smtypes.InferenceComponentStatusFailed ||
		!strings.Contains(aws.ToString(d.FailureReason), "could not be staged") {
		t.Fatalf("evil: %s %s", d.InferenceComponentStatus, aws.ToString(d.FailureReason))
	}
	if _, err := os.Stat(filepath.Join(h.StateDir, "instances", instance, "adapters", "evil")); err == nil {
		t.Fatal("the hostile archive wrote outside its folder")
	}
	_, err = invokeDense(h, ep, "evil")
	var ae smithy.APIError
	if !errors.As(err, &ae) || ae.ErrorCode() != "ValidationError" || !strings.Contains(ae.ErrorMessage(), "Adapter inference component evil is Failed") {
		t.Fatalf("invoke of a failed adapter: %v", err)
	}

	// An update of an adapter: a new artifact, registered again.
	if _, err := h.sm.UpdateInferenceComponent(ctx, &sagemaker.UpdateInferenceComponentInput{InferenceComponentName: aws.String("evil"),
		Specification: spec(func(*smtypes.InferenceComponentSpecification) {})}); err != nil {
		t.Fatal(err)
	}
	if d := h.wait(t, "evil"); d.InferenceComponentStatus != smtypes.InferenceComponentStatusInService {
		t.Fatalf("evil updated: %s %s", d.InferenceComponentStatus, aws.ToString(d.FailureReason))
	}
	check(h, "evil", want2)
	if _, err := h.sm.DeleteInferenceComponent(ctx, &sagemaker.DeleteInferenceComponentInput{InferenceComponentName: aws.String("evil")}); err != nil {
		t.Fatal(err)
	}
	waitGone(t, h, "evil")
	registered("a1,a2") // evil is unregistered from every copy
	_, err = invokeDense(h, ep, "evil")
	if !errors.As(err, &ae) || ae.ErrorCode() != "ValidationError" || !strings.Contains(ae.ErrorMessage(), "Inference Component evil of endpoint") {
		t.Fatalf("invoke of a deleted adapter: %v", err)
	}

	// A restart (a crash: the copies keep running) adopts the base's
	// copies and registers the adapters again.
	h.Crash()
	h = startICHost(t, instance, h.StateDir, st)
	for _, name := range []string{"llm", "a1", "a2"} {
		if d := h.wait(t, name); d.InferenceComponentStatus != smtypes.InferenceComponentStatusInService {
			t.Fatalf("%s after the restart: %s %s", name, d.InferenceComponentStatus, aws.ToString(d.FailureReason))
		}
	}
	check(h, "a1", want1)
	check(h, "a2", want2)

	// An adapter whose base is gone: its record outlived the base's (here,
	// the base's record is removed while mce is down). It fails with the
	// reason, invocations say so, and it can be deleted.
	h.Crash()
	if _, err := st.Delete(store.InferenceComponents, "llm"); err != nil {
		t.Fatal(err)
	}
	h = startICHost(t, instance, h.StateDir, st)
	if d := h.wait(t, "a1"); d.InferenceComponentStatus != smtypes.InferenceComponentStatusFailed ||
		!strings.Contains(aws.ToString(d.FailureReason), "The base inference component llm no longer exists.") {
		t.Fatalf("a1 without its base: %s %s", d.InferenceComponentStatus, aws.ToString(d.FailureReason))
	}
	_, err = invokeDense(h, ep, "a1")
	if !errors.As(err, &ae) || ae.ErrorCode() != "ValidationError" || !strings.Contains(ae.ErrorMessage(), "is an adapter of inference component llm, which no longer exists") {
		t.Fatalf("invoke of an adapter without its base: %v", err)
	}
	refused("an adapter of the deleted base", adapter("a3", "llm", "file://"+filepath.Join(dir, "a2")), "Could not find base inference component")
	for _, name := range []string{"a1", "a2"} {
		if _, err := h.sm.DeleteInferenceComponent(ctx, &sagemaker.DeleteInferenceComponentInput{InferenceComponentName: aws.String(name)}); err != nil {
			t.Fatal(err)
		}
		waitGone(t, h, name)
	}
	if n := len(copies(t, cli, instance, "llm")); n != 0 {
		t.Fatalf("the copies of the base no record owns still run: %d", n)
	}
}

// adaptersIn asks a container (on the Docker network's address, as mce
// reaches it) which adapters it has registered: GET /adapters of the
// adapter API, names joined by commas.
func adaptersIn(t *testing.T, cli *client.Client, id string) string {
	t.Helper()
	res, err := cli.ContainerInspect(context.Background(), id, client.ContainerInspectOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var url string
	for _, ep := range res.Container.NetworkSettings.Networks {
		if ep.IPAddress.IsValid() {
			url = "http://" + ep.IPAddress.String() + ":8080/adapters"
		}
	}
	for port, bs := range res.Container.NetworkSettings.Ports { // published on loopback instead
		for _, b := range bs {
			if port.Num() == 8080 && b.HostPort != "" {
				url = "http://127.0.0.1:" + b.HostPort + "/adapters"
			}
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var list struct{ Adapters []struct{ Name string } }
	if err := json.NewDecoder(resp.Body).Decode(&list); err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, a := range list.Adapters {
		names = append(names, a.Name)
	}
	return strings.Join(names, ",")
}

// invokeDense invokes component ic of ep with lX and returns the output.
func invokeDense(h *icHost, ep, ic string) ([]float64, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	out, err := h.run.InvokeEndpoint(ctx, &sagemakerruntime.InvokeEndpointInput{EndpointName: aws.String(ep),
		InferenceComponentName: aws.String(ic), ContentType: aws.String("application/json"), Body: denseInput()})
	if err != nil {
		return nil, err
	}
	return denseOutput(out.Body)
}

// invokeDenseStream is invokeDense through InvokeEndpointWithResponseStream.
func invokeDenseStream(h *icHost, ep, ic string) ([]float64, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	out, err := h.run.InvokeEndpointWithResponseStream(ctx, &sagemakerruntime.InvokeEndpointWithResponseStreamInput{
		EndpointName: aws.String(ep), InferenceComponentName: aws.String(ic), ContentType: aws.String("application/json"), Body: denseInput()})
	if err != nil {
		return nil, err
	}
	defer out.GetStream().Close()
	var got bytes.Buffer
	for ev := range out.GetStream().Events() {
		if p, ok := ev.(*rttypes.ResponseStreamMemberPayloadPart); ok {
			got.Write(p.Value.Bytes)
		}
	}
	if err := out.GetStream().Err(); err != nil {
		return nil, err
	}
	return denseOutput(got.Bytes())
}

func denseInput() []byte {
	body, _ := json.Marshal(map[string]any{"inputs": []any{map[string]any{"name": "INPUT0", "shape": []int{1, 2}, "datatype": "FP64", "data": lX}}})
	return body
}

func denseOutput(body []byte) ([]float64, error) {
	var r struct {
		Outputs []struct{ Data []float64 } `json:"outputs"`
	}
	if err := json.Unmarshal(body, &r); err != nil || len(r.Outputs) != 1 {
		return nil, errors.New("unexpected answer " + string(body))
	}
	return r.Outputs[0].Data, nil
}

func near(a, b []float64) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if math.Abs(a[i]-b[i]) > 1e-9 {
			return false
		}
	}
	return true
}

// waitGone waits until DescribeInferenceComponent no longer finds name.
func waitGone(t *testing.T, h *icHost, name string) {
	t.Helper()
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(100 * time.Millisecond) {
		_, err := h.sm.DescribeInferenceComponent(context.Background(), &sagemaker.DescribeInferenceComponentInput{InferenceComponentName: aws.String(name)})
		if err != nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s is still there", name)
		}
	}
}
