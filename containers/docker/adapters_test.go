package docker_test

import (
	"archive/tar"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"strings"
	"testing"

	"github.com/mce-run/mce/containers/artifact"
	"github.com/mce-run/mce/containers/docker"
	"github.com/mce-run/mce/internal/testenv"
)

// TestAdaptersCountAgainstTheDiskBudget: staged adapters hold the disk
// budget as model data does (issue 26: with 64 MiB, twelve adapters of
// 10 MB were staged while an 80 MB model was refused). With a budget of
// 64 KiB and adapters of 10 KiB, the seventh is refused naming the flag
// and leaves no files; a model that would fit an empty budget is refused
// while the adapters hold it; an adapter staged again is counted once; removing one gives its bytes back, and removing them all lets
// the model in.
func TestAdaptersCountAgainstTheDiskBudget(t *testing.T) {
	dir := t.TempDir()
	f, err := artifact.NewFetcher(artifact.Options{ModelRoots: []string{dir}})
	if err != nil {
		t.Fatal(err)
	}
	rt, o := testenv.Runtime(t, docker.Options{Fetcher: f, ArtifactDiskBudget: 64 << 10})
	e := &docker.Engine{Runtime: rt}
	ctx := context.Background()
	writeTarGz(t, filepath.Join(dir, "adapter.tar.gz"), []tar.Header{{Name: "adapter.bin", Mode: 0o644, Typeflag: tar.TypeReg}},
		map[string]string{"adapter.bin": strings.Repeat("a", 10<<10)})
	writeTarGz(t, filepath.Join(dir, "model.tar.gz"), []tar.Header{{Name: "w", Mode: 0o644, Typeflag: tar.TypeReg}},
		map[string]string{"w": strings.Repeat("m", 40<<10)})
	adapterURL := "file://" + filepath.Join(dir, "adapter.tar.gz")
	stage := func(name string) error {
		_, err := e.StageAdapter(ctx, "ep", "base", name, adapterURL, "")
		return err
	}
	adapterFiles := func() (n int) {
		filepath.WalkDir(filepath.Join(o.StateDir, "instances", o.Instance, "adapters"), func(_ string, d fs.DirEntry, err error) error {
			if err == nil && d.Type().IsRegular() {
				n++
			}
			return nil
		})
		return n
	}
	deployModel := func() error {
		s := probeSpec(testenv.Image(t, "probe"), 1, nil)
		s.Variants[0].Containers[0].ModelDataURL = "file://" + filepath.Join(dir, "model.tar.gz")
		d, err := rt.Deploy(ctx, s)
		if err == nil {
			d.Close(ctx)
		}
		return err
	}

	for i := range 5 {
		if err := stage(fmt.Sprintf("a%d", i)); err != nil {
			t.Fatalf("adapter %d (%d KiB of 64): %v", i, 10*(i+1), err)
		}
	}
	// Staged again (an update, a restart): both are on disk while the new
	// one is extracted, then the old one's bytes are given back.
	if err := stage("a1"); err != nil {
		t.Fatalf("staging a1 again: %v", err)
	}
	if err := stage("a5"); err != nil {
		t.Fatalf("the sixth adapter (60 KiB of 64; a1 counted once): %v", err)
	}
	err = stage("a6")
	if !errors.Is(err, artifact.ErrTooLarge) || !strings.Contains(err.Error(), artifact.DiskBudgetFlag) {
		t.Fatalf("the seventh adapter (70 KiB of 64): err = %v, want ErrTooLarge naming %s", err, artifact.DiskBudgetFlag)
	}
	if n := adapterFiles(); n != 6 {
		t.Errorf("%d adapter files on disk, want the 6 staged ones (the refused one deleted)", n)
	}
	if err := deployModel(); !errors.Is(err, artifact.ErrTooLarge) {
		t.Fatalf("a 40 KiB model while the adapters hold 60 KiB of 64: err = %v, want ErrTooLarge", err)
	}
	if err := e.RemoveAdapter("ep", "base", "a0"); err != nil {
		t.Fatal(err)
	}
	if err := stage("a6"); err != nil {
		t.Fatalf("an adapter in the room a removed one gave back: %v", err)
	}
	for i := range 7 {
		if err := e.RemoveAdapter("ep", "base", fmt.Sprintf("a%d", i)); err != nil {
			t.Fatal(err)
		}
	}
	if n := adapterFiles(); n != 0 {
		t.Errorf("%d adapter files left after removing them all", n)
	}
	if err := deployModel(); err != nil {
		t.Fatalf("the 40 KiB model once the adapters are gone: %v", err)
	}
}
