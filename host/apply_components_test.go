package host

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/mce-run/mce/host/spec"
	"github.com/mce-run/mce/host/store"
)

const applyComponentsFile = `EndpointConfigs:
  - EndpointConfigName: icc
    ExecutionRoleArn: arn:aws:iam::123456789012:role/mce-ic
    ProductionVariants:
      - {VariantName: AllTraffic, InitialInstanceCount: 1, InstanceType: local}
Endpoints:
  - {EndpointName: icep, EndpointConfigName: icc}
InferenceComponents:
  - InferenceComponentName: alpha
    EndpointName: icep
    VariantName: AllTraffic
    Specification:
      Container: {Image: "-a", ArtifactUrl: "file://artifacts/alpha"}
      ComputeResourceRequirements: {NumberOfCpuCoresRequired: 1, MinMemoryRequiredInMb: 256}
    RuntimeConfig: {CopyCount: COPIES}
  - InferenceComponentName: beta
    EndpointName: icep
    VariantName: AllTraffic
    Specification:
      Container: {Image: "-b"}
      ComputeResourceRequirements: {MinMemoryRequiredInMb: 128}
    RuntimeConfig: {CopyCount: 1}
    Tags: [{Key: team, Value: ml}]
`

// TestApplyInferenceComponents: components of the files are created after
// their endpoint and reach InService; on a restart with the same file the
// API's copy count is kept, and a changed file wins.
func TestApplyInferenceComponents(t *testing.T) {
	st, err := store.Open(filepath.Join(t.TempDir(), "state.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	dir := t.TempDir()
	file := filepath.Join(dir, "f.yaml")
	write := func(copies string) {
		if err := os.WriteFile(file, []byte(strings.Replace(applyComponentsFile, "COPIES", copies, 1)), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	start := func() (*Server, *syncBuffer) {
		t.Helper()
		logs := &syncBuffer{}
		s := New(Config{Backend: &capBackend{fakeBackend: &fakeBackend{t: t}}, Logger: zerolog.New(logs), Store: st})
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		if err := s.Recover(ctx); err != nil {
			t.Fatal(err)
		}
		b, err := spec.LoadFiles(file)
		if err != nil {
			t.Fatal(err)
		}
		if _, _, err := b.Plans("us-east-1", "123456789012"); err != nil {
			t.Fatal(err)
		}
		if _, err := s.Apply(ctx, b); err != nil {
			t.Fatal(err)
		}
		waitSettled(t, s, "icep")
		return s, logs
	}
	copies := func(s *Server, name string) int {
		t.Helper()
		deadline := time.Now().Add(20 * time.Second)
		for time.Now().Before(deadline) {
			if c := s.ics.Get(name); c != nil {
				rec := c.Record()
				if rec.Status == spec.StatusInService && c.CurrentCopies() == rec.Desired {
					return rec.Desired
				}
				if rec.Status == spec.StatusFailed {
					t.Fatalf("component %s Failed: %s", name, rec.FailureReason)
				}
			}
			time.Sleep(20 * time.Millisecond)
		}
		t.Fatalf("component %s never reached InService with its copies", name)
		return 0
	}
	stop := func(s *Server) {
		if err := s.Close(context.Background()); err != nil {
			t.Fatal(err)
		}
	}

	write("2")
	s, _ := start()
	if n := copies(s, "alpha"); n != 2 {
		t.Errorf("alpha has %d copies, want 2", n)
	}
	if n := copies(s, "beta"); n != 1 {
		t.Errorf("beta has %d copies, want 1", n)
	}
	rec := s.ics.Get("alpha").Record()
	if rec.EndpointName != "icep" || rec.VariantName != "AllTraffic" {
		t.Errorf("alpha is on %s/%s", rec.EndpointName, rec.VariantName)
	}
	// The relative file:// artifact resolves against the file's folder.
	if c := rec.Template.Containers[0]; c.BaseDir != dir || c.ModelDataURL != "file://artifacts/alpha" {
		t.Errorf("alpha's container resolves %q against %q, want %q", c.ModelDataURL, c.BaseDir, dir)
	}
	if tags, _, _ := s.tagsOf(spec.KindInferenceComponent, "beta"); len(tags) != 1 || tags[0].Key != "team" {
		t.Errorf("beta's tags = %+v", tags)
	}
	one := int32(1)
	if _, err := s.opUpdateComponentRuntime(context.Background(), &updateComponentRuntimeInput{InferenceComponentName: "alpha",
		DesiredRuntimeConfig: &spec.InferenceComponentRuntimeConfig{CopyCount: &one}}); err != nil {
		t.Fatal(err)
	}
	if n := copies(s, "alpha"); n != 1 {
		t.Fatalf("alpha has %d copies after scaling to 1", n)
	}
	stop(s)

	// Same file: the API's copy count stays.
	s, logs := start()
	if n := copies(s, "alpha"); n != 1 {
		t.Errorf("restart with the same file: alpha has %d copies, want the API's 1", n)
	}
	if !strings.Contains(logs.String(), "keeping the inference component as the API left it") {
		t.Errorf("no log line says the component was kept:\n%s", logs)
	}
	stop(s)

	// The file changed: it wins.
	write("3")
	s, logs = start()
	if n := copies(s, "alpha"); n != 3 {
		t.Errorf("restart with a changed file: alpha has %d copies, want the file's 3", n)
	}
	if !strings.Contains(logs.String(), "updating the inference component to the file's definition: its definition in the file changed") {
		t.Errorf("no log line says the file won and why:\n%s", logs)
	}
	if n := copies(s, "beta"); n != 1 {
		t.Errorf("beta has %d copies, want 1", n)
	}
	stop(s)

	// The file moves alpha to another endpoint: it is deleted and created
	// again there, and beta stays as it was.
	moved := strings.Replace(applyComponentsFile, "COPIES", "2", 1)
	moved = strings.Replace(moved, "Endpoints:\n", "Endpoints:\n  - {EndpointName: icep2, EndpointConfigName: icc}\n", 1)
	moved = strings.Replace(moved, "- InferenceComponentName: alpha\n    EndpointName: icep\n", "- InferenceComponentName: alpha\n    EndpointName: icep2\n", 1)
	if !strings.Contains(moved, "EndpointName: icep2\n    VariantName") {
		t.Fatal("the moved file did not move alpha")
	}
	if err := os.WriteFile(file, []byte(moved), 0o644); err != nil {
		t.Fatal(err)
	}
	alphaBefore, betaBefore := s.ics.Get("alpha").Record().Created, s.ics.Get("beta").Record().Created
	s, logs = start()
	waitSettled(t, s, "icep2")
	if n := copies(s, "alpha"); n != 2 {
		t.Errorf("alpha moved: %d copies, want the file's 2", n)
	}
	if rec := s.ics.Get("alpha").Record(); rec.EndpointName != "icep2" {
		t.Errorf("alpha is on %s, want icep2", rec.EndpointName)
	}
	if !strings.Contains(logs.String(), "deleting the inference component to create it again on the endpoint and variant the file names") {
		t.Errorf("no log line says alpha was recreated:\n%s", logs)
	}
	if n := copies(s, "beta"); n != 1 || !s.ics.Get("beta").Record().Created.Equal(betaBefore) {
		t.Errorf("beta: %d copies, created %v (before: %v); want 1 and the same", n, s.ics.Get("beta").Record().Created, betaBefore)
	}
	if rec := s.ics.Get("alpha").Record(); !rec.Created.After(alphaBefore) {
		t.Errorf("alpha created %v, not after the first one (%v): not recreated", rec.Created, alphaBefore)
	}
	stop(s)
}

// TestApplyComponentOnMissingEndpoint: a component naming an endpoint that
// is neither in the files nor existing fails Apply, naming file and path.
func TestApplyComponentOnMissingEndpoint(t *testing.T) {
	file := filepath.Join(t.TempDir(), "f.yaml")
	body := `InferenceComponents:
  - InferenceComponentName: lost
    EndpointName: nowhere
    VariantName: AllTraffic
    Specification:
      Container: {Image: "-a"}
      ComputeResourceRequirements: {MinMemoryRequiredInMb: 128}
    RuntimeConfig: {CopyCount: 1}
`
	if err := os.WriteFile(file, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	b, err := spec.LoadFiles(file)
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := b.Plans("us-east-1", "123456789012"); err != nil {
		t.Fatalf("Plans: %v (the endpoint could exist)", err)
	}
	s := New(Config{Backend: &capBackend{fakeBackend: &fakeBackend{t: t}}, Logger: zerolog.Nop(), Store: openStore(t)})
	t.Cleanup(func() { s.Close(context.Background()) })
	_, err = s.Apply(context.Background(), b)
	if err == nil {
		t.Fatal("Apply: no error")
	}
	if want := file + ": InferenceComponents[0]: "; !strings.HasPrefix(err.Error(), want) || !strings.Contains(err.Error(), "nowhere") {
		t.Errorf("Apply: %v, want it to start %q and name the endpoint", err, want)
	}
	if s.ics.Get("lost") != nil {
		t.Error("the component was created")
	}
}
