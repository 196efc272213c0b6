package pipeline

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/http"
	"runtime"
	"strings"
	"testing"
)

func prefixVariant(n int, prefixLength, threshold int) (*Variant, []*Instance) {
	insts := make([]*Instance, n)
	for i := range insts {
		insts[i] = NewInstance([]Container{newFake("model", fmt.Sprintf("http://10.0.0.%d:8080", i+1))})
	}
	v := NewVariant("v", 1, insts)
	v.SetStrategy(PrefixAware)
	v.SetPrefixAware(prefixLength, threshold)
	return v, insts
}

// TestPrefixAwareSticks: calls sharing their first PrefixLength bytes land
// on one instance while it is under the threshold; past it they spill to the
// least loaded; PrefixAwareId separates equal prefixes.
func TestPrefixAwareSticks(t *testing.T) {
	v, insts := prefixVariant(3, 16, 2)
	req := func(body, id string) *Request { return &Request{Body: []byte(body), PrefixAwareID: id} }
	first, _, _ := v.choosePrefix(insts, false, "", req("system prompt A|question 1", ""))
	for i := range 50 {
		got, _, _ := v.choosePrefix(insts, false, "", req(fmt.Sprintf("system prompt A|question %d", i), ""))
		if got != first {
			t.Fatalf("call %d with the same 16-byte prefix went to another instance", i)
		}
	}
	// Different prefixes spread over the instances.
	hits := map[*Instance]int{}
	for i := range 300 {
		got, _, _ := v.choosePrefix(insts, false, "", req(fmt.Sprintf("prompt %09d|tail", i), ""))
		hits[got]++
	}
	for i, in := range insts {
		if hits[in] < 50 {
			t.Errorf("instance %d got %d of 300 distinct prefixes", i, hits[in])
		}
	}
	// PrefixAwareId changes the key.
	moved := 0
	for i := range 30 {
		a, _, _ := v.choosePrefix(insts, false, "", req("same prefix here!", fmt.Sprint("app-", i)))
		if a != first {
			moved++
		}
	}
	if moved == 0 {
		t.Error("PrefixAwareId never changed the instance")
	}
	// At the threshold the call spills to the least loaded instance.
	first.outstanding.Store(2)
	for _, in := range insts {
		if in != first {
			in.outstanding.Store(1)
		}
	}
	got, _, _ := v.choosePrefix(insts, false, "", req("system prompt A|question 1", ""))
	if got == first {
		t.Fatal("an instance at the threshold kept the call")
	}
	first.outstanding.Store(1)
	if got, _, _ := v.choosePrefix(insts, false, "", req("system prompt A|question 1", "")); got != first {
		t.Fatal("below the threshold again, the prefix's instance should take the call")
	}
}

// TestPrefixAwareConsistent: adding an instance moves about a quarter of
// the prefixes (to the new one), none between the old ones.
func TestPrefixAwareConsistent(t *testing.T) {
	v, insts := prefixVariant(3, 64, 100)
	const n = 2000
	before := make([]*Instance, n)
	for i := range n {
		before[i], _, _ = v.choosePrefix(insts, false, "", &Request{Body: []byte(fmt.Sprint("p", i))})
	}
	added := NewInstance([]Container{newFake("model", "http://10.0.0.99:8080")})
	insts = append(insts, added)
	moved := 0
	for i := range n {
		got, _, _ := v.choosePrefix(insts, false, "", &Request{Body: []byte(fmt.Sprint("p", i))})
		if got != before[i] {
			if got != added {
				t.Fatalf("prefix %d moved between old instances", i)
			}
			moved++
		}
	}
	if moved < n/8 || moved > n*3/8 {
		t.Errorf("%d of %d prefixes moved, want about a quarter", moved, n)
	}
}

// TestPrefixAwareEndToEnd measures through Invoke: concurrent calls sharing
// a prefix land on one server until the calls in flight pass the
// threshold.
func TestPrefixAwareEndToEnd(t *testing.T) {
	release := make(chan struct{})
	var servers []*fakeServer
	var insts []*Instance
	for i := range 3 {
		fs := startServer(t, func(w http.ResponseWriter, r *http.Request, body []byte) {
			if bytes.HasPrefix(body, []byte("hold")) {
				<-release
			}
			fmt.Fprint(w, i)
		})
		servers = append(servers, fs)
		insts = append(insts, NewInstance([]Container{newFake("model", fs.srv.URL)}))
	}
	v := NewVariant("v", 1, insts)
	v.SetStrategy(PrefixAware)
	v.SetPrefixAware(1024, 4)
	route := NewRoute("ep", Serial, []*Variant{v})
	iv := NewInvoker(Options{})
	prefix := strings.Repeat("S", 1024)

	// Sequential calls with one prefix: all on one server.
	owner := -1
	for i := range 20 {
		resp, err := iv.Invoke(context.Background(), route, &Request{Body: []byte(prefix + fmt.Sprint(i))})
		if err != nil {
			t.Fatal(err)
		}
		got := int(resp.Body[0] - '0')
		resp.Release()
		if owner < 0 {
			owner = got
		} else if got != owner {
			t.Fatalf("call %d went to server %d, the prefix's is %d", i, got, owner)
		}
	}
	// Hold 4 calls (the threshold) on the owner, then the next spills.
	holdBody := []byte("hold" + strings.Repeat("S", 1020))
	hv := NewVariant("h", 1, insts)
	hv.SetStrategy(PrefixAware)
	hv.SetPrefixAware(1024, 4)
	hroute := NewRoute("ep", Serial, []*Variant{hv})
	holder, _, _ := hv.choosePrefix(insts, false, "", &Request{Body: holdBody})
	errs := make(chan error, 4)
	for range 4 {
		go func() {
			resp, err := iv.Invoke(context.Background(), hroute, &Request{Body: holdBody})
			resp.Release()
			errs <- err
		}()
	}
	for holder.Outstanding() < 4 {
		runtime.Gosched()
	}
	for i := range 3 {
		if insts[i] != holder && insts[i].Outstanding() != 0 {
			t.Fatalf("held calls spread before the threshold")
		}
	}
	got, _, _ := hv.choosePrefix(insts, false, "", &Request{Body: holdBody})
	if got == holder {
		t.Fatal("the fifth call stayed on an instance at its threshold")
	}
	close(release)
	for range 4 {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
}

// TestSessionPinned: a call with SessionInstance goes to that instance
// whatever the load, and a missing instance is a SessionGoneError (a
// ValidationError to the host).
func TestSessionPinned(t *testing.T) {
	var insts []*Instance
	for i := range 3 {
		fs := startServer(t, func(w http.ResponseWriter, r *http.Request, body []byte) {
			w.Header().Set("X-Amzn-SageMaker-New-Session-Id", r.Header.Get("X-Amzn-Sagemaker-Session-Id")+"; Expires=2030-01-01T00:00:00Z")
			fmt.Fprint(w, i)
		})
		insts = append(insts, NewInstance([]Container{newFake("model", fs.srv.URL)}))
	}
	v := NewVariant("v", 1, insts)
	route := NewRoute("ep", Serial, []*Variant{v})
	iv := NewInvoker(Options{})
	insts[2].outstanding.Store(100) // least outstanding would never pick it
	for range 10 {
		resp, err := iv.Invoke(context.Background(), route, &Request{Body: []byte("x"), SessionID: "abc", SessionInstance: insts[2].Key(), TargetVariant: "v"})
		if err != nil {
			t.Fatal(err)
		}
		if string(resp.Body) != "2" || resp.Instance != insts[2].Key() || resp.NewSessionID != "abc; Expires=2030-01-01T00:00:00Z" {
			t.Fatalf("body %q, instance %q, new session %q", resp.Body, resp.Instance, resp.NewSessionID)
		}
		resp.Release()
	}
	insts[2].containers[0].(*fakeContainer).ready.Store(false)
	var unavail *UnavailableError
	if _, err := iv.Invoke(context.Background(), route, &Request{Body: []byte("x"), SessionID: "abc", SessionInstance: insts[2].Key(), TargetVariant: "v"}); !errors.As(err, &unavail) {
		t.Fatalf("not ready: err = %v, want an UnavailableError", err)
	}
	v.SetInstances(insts[:2])
	_, err := iv.Invoke(context.Background(), route, &Request{Body: []byte("x"), SessionID: "abc", SessionInstance: insts[2].Key(), TargetVariant: "v"})
	var gone *SessionGoneError
	var verr *ValidationError
	if !errors.As(err, &gone) || !errors.As(err, &verr) || gone.Session != "abc" {
		t.Fatalf("err = %v, want a SessionGoneError", err)
	}
}

// BenchmarkChoosePrefix: the cost of a prefix-aware pick among 3 instances,
// at the smallest and largest PrefixLength.
func BenchmarkChoosePrefix(b *testing.B) {
	for _, n := range []int{1024, 65536} {
		b.Run(fmt.Sprint(n), func(b *testing.B) {
			v, insts := prefixVariant(3, n, 1024)
			req := &Request{Body: bytes.Repeat([]byte("p"), n)}
			b.SetBytes(int64(n))
			for b.Loop() {
				v.choosePrefix(insts, false, "", req)
			}
		})
	}
}
