package store

import (
	"encoding/json"
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

// TestBatchedWrites: concurrent PutBatched calls are all durable when they
// return (they survive reopening), and DeleteBatched removes them.
func TestBatchedWrites(t *testing.T) {
	path := filepath.Join(t.TempDir(), "state.db")
	s, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	errs := make(chan error, 100)
	for i := range 100 {
		go func() { errs <- s.PutBatched(AsyncRequests, strconv.Itoa(i), rec{strconv.Itoa(i), i}) }()
	}
	for range 100 {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	for i := range 50 {
		go func() { errs <- s.DeleteBatched(AsyncRequests, strconv.Itoa(i)) }()
	}
	for range 50 {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	s.Close()
	if s, err = Open(path); err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	n := 0
	List(s, AsyncRequests, func(r rec) error {
		if r.N < 50 {
			t.Errorf("deleted record %d came back", r.N)
		}
		n++
		return nil
	})
	if n != 50 {
		t.Errorf("%d records after reopening, want 50", n)
	}
}

// TestUpdate: Update rewrites an existing record from its stored JSON, and
// for a missing one reports false without calling fn, so it never recreates
// a deleted record.
func TestUpdate(t *testing.T) {
	s, err := Open(filepath.Join(t.TempDir(), "state.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	s.Put(Endpoints, "ep", rec{"ep", 1})
	found, err := s.Update(Endpoints, "EP", func(b []byte) ([]byte, error) {
		var r rec
		if err := json.Unmarshal(b, &r); err != nil {
			return nil, err
		}
		r.N++
		return json.Marshal(r)
	})
	if !found || err != nil {
		t.Fatalf("Update of an existing record: %v, %v", found, err)
	}
	var got rec
	if err := s.Get(Endpoints, "ep", &got); err != nil || got.N != 2 {
		t.Errorf("after Update: %+v, %v", got, err)
	}
	s.Delete(Endpoints, "ep")
	found, err = s.Update(Endpoints, "ep", func([]byte) ([]byte, error) {
		t.Error("fn called for a missing record")
		return []byte(`{}`), nil
	})
	if found || err != nil {
		t.Errorf("Update of a missing record: %v, %v", found, err)
	}
	if err := s.Get(Endpoints, "ep", &got); !errors.Is(err, ErrNotFound) {
		t.Errorf("Update recreated a deleted record: %v", err)
	}
}
