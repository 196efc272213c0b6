package store

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
)

type rec struct {
	Name string
	N    int
}

func TestStoreRoundTrip(t *testing.T) {
	path := filepath.Join(t.TempDir(), "state.db")
	s, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	if ok, err := s.Create(Models, "Alpha", rec{"Alpha", 1}); !ok || err != nil {
		t.Fatalf("Create = %v, %v", ok, err)
	}
	if ok, _ := s.Create(Models, "alpha", rec{"alpha", 2}); ok {
		t.Error("names must be unique regardless of case")
	}
	s.Put(Models, "beta", rec{"beta", 3})
	var got rec
	if err := s.Get(Models, "ALPHA", &got); err != nil || got.N != 1 {
		t.Fatalf("Get = %+v, %v", got, err)
	}
	if err := s.Get(Endpoints, "alpha", &got); !errors.Is(err, ErrNotFound) {
		t.Errorf("other kind: %v", err)
	}
	var names []string
	List(s, Models, func(r rec) error { names = append(names, r.Name); return nil })
	if len(names) != 2 || names[0] != "Alpha" || names[1] != "beta" {
		t.Errorf("List = %v", names)
	}
	if ok, _ := s.Delete(Models, "beta"); !ok {
		t.Error("Delete of an existing record said none existed")
	}
	s.Close()

	s, err = Open(path) // survives reopening
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if err := s.Get(Models, "alpha", &got); err != nil || got.N != 1 {
		t.Errorf("after reopen: %+v %v", got, err)
	}
	if err := s.Get(Models, "beta", &got); !errors.Is(err, ErrNotFound) {
		t.Errorf("deleted record came back: %v", err)
	}
}

// TestKilledWriterLeavesWholeRecords kills a process that writes in a loop and
// checks that every record in the database decodes whole.
func TestKilledWriterLeavesWholeRecords(t *testing.T) {
	if p := os.Getenv("STORE_WRITER"); p != "" {
		s, err := Open(p)
		if err != nil {
			os.Exit(1)
		}
		big := make([]byte, 64<<10)
		for i := 0; ; i++ {
			s.Put(Endpoints, "e"+strconv.Itoa(i%50), map[string]any{"i": i, "pad": big})
		}
	}
	path := filepath.Join(t.TempDir(), "state.db")
	for round := range 3 {
		cmd := exec.Command(os.Args[0], "-test.run=^TestKilledWriterLeavesWholeRecords$")
		cmd.Env = append(os.Environ(), "STORE_WRITER="+path)
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		// Let it write for a while, then SIGKILL it mid-transaction.
		waitForFile(t, path)
		cmd.Process.Kill()
		cmd.Wait()
		s, err := Open(path)
		if err != nil {
			t.Fatalf("round %d: reopen after SIGKILL: %v", round, err)
		}
		n := 0
		err = List(s, Endpoints, func(m map[string]any) error {
			if _, ok := m["i"]; !ok {
				t.Errorf("round %d: record without its fields", round)
			}
			n++
			return nil
		})
		s.Close()
		if err != nil {
			t.Fatalf("round %d: a record does not decode: %v", round, err)
		}
		t.Logf("round %d: %d whole records", round, n)
	}
}

func waitForFile(t *testing.T, path string) {
	for range 200 {
		if st, err := os.Stat(path); err == nil && st.Size() > 1<<20 {
			return
		}
		sleepMs(10)
	}
}
