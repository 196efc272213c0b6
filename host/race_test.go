package host

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/mce-run/mce/host/apierr"
	"github.com/mce-run/mce/host/spec"
	"github.com/mce-run/mce/host/store"
)

// callOp runs a control-plane operation in-process, allowed.
func callOp(s *Server, op, body string) error {
	_, err := s.control(context.Background(), operations[op], []byte(body), func(string, requestKeys) *apierr.Error { return nil })
	return err
}

// waitGone waits until the endpoint has left the registry and the store.
func waitGone(t *testing.T, s *Server, name string) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); s.reg.get(name) != nil; {
		if time.Now().After(deadline) {
			t.Fatalf("%s: still %s", name, s.reg.get(name).Status())
		}
		time.Sleep(time.Millisecond)
	}
	var rec EndpointRecord
	if err := s.store.Get(store.Endpoints, name, &rec); err == nil {
		t.Fatalf("%s: the record outlived the endpoint: %+v", name, rec)
	}
}

// TestUpdateRacesDelete: UpdateEndpointWeightsAndCapacities (and
// UpdateEndpoint) racing DeleteEndpoint on the same endpoint. The update
// checked that the endpoint was not being deleted, then loaded its route; a
// deletion in between left the route nil and the update's background work
// panicked, taking mce down. Now the update either starts before the
// deletion (which then waits for it) or is refused; nothing panics, the
// endpoint ends deleted, and every generation launched is removed.
func TestUpdateRacesDelete(t *testing.T) {
	rounds := 200
	if testing.Short() {
		rounds = 30
	}
	h := newHarness(t, Config{})
	s := h.srv
	updates := []string{
		`{"EndpointName":"%s","DesiredWeightsAndCapacities":[{"VariantName":"AllTraffic","DesiredWeight":0.5}]}`,
		`{"EndpointName":"%s","DesiredWeightsAndCapacities":[{"VariantName":"AllTraffic","DesiredInstanceCount":2}]}`,
		`{"EndpointName":"%s","DesiredWeightsAndCapacities":[{"VariantName":"AllTraffic","DesiredInstanceCount":1,"DesiredWeight":2}]}`,
	}
	accepted := 0
	for i := range rounds {
		name := fmt.Sprintf("race%d", i)
		p := plan(name, "Serial", map[string][]string{"AllTraffic": {"c:A"}})
		if i%3 == 2 {
			p.Variants[0].InstanceCount = 2
		}
		if err := h.deploy(p); err != nil {
			t.Fatal(err)
		}
		var wg sync.WaitGroup
		start := make(chan struct{})
		var updErr, delErr error
		wg.Add(2)
		go func() {
			defer wg.Done()
			<-start
			updErr = callOp(s, "UpdateEndpointWeightsAndCapacities", fmt.Sprintf(updates[i%len(updates)], name))
		}()
		go func() {
			defer wg.Done()
			<-start
			if i%2 == 1 {
				time.Sleep(time.Duration(i%7) * 50 * time.Microsecond) // let some updates reach their background work
			}
			delErr = callOp(s, "DeleteEndpoint", fmt.Sprintf(`{"EndpointName":%q}`, name))
		}()
		close(start)
		wg.Wait()
		if delErr != nil {
			t.Fatalf("round %d: DeleteEndpoint: %v", i, delErr)
		}
		if updErr == nil {
			accepted++
		} else if api := s.controlError("", updErr); api.Code != apierr.CodeValidationException {
			t.Fatalf("round %d: UpdateEndpointWeightsAndCapacities: %v", i, updErr)
		}
		if e := s.reg.get(name); e != nil && e.Status() != spec.StatusDeleting {
			t.Fatalf("round %d: status %s after DeleteEndpoint", i, e.Status())
		}
		waitGone(t, s, name)
	}
	s.bg.Wait()
	if l, c := h.backend.launches.Load(), h.backend.closed.Load(); l != c {
		t.Errorf("%d generations launched, %d removed", l, c)
	}
	t.Logf("%d of %d updates were accepted before the deletion", accepted, rounds)
}

// TestUpdateEndpointRacesDelete: the same race with UpdateEndpoint, whose
// new generation may come up after the deletion began: it must not be put
// in service and must be removed.
func TestUpdateEndpointRacesDelete(t *testing.T) {
	rounds := 100
	if testing.Short() {
		rounds = 20
	}
	h := newHarness(t, Config{})
	s := h.srv
	createAll(t, h.sm(), "cfg", "-v1", 1)
	for i := range rounds {
		name := fmt.Sprintf("upd%d", i)
		if err := callOp(s, "CreateEndpoint", fmt.Sprintf(`{"EndpointName":%q,"EndpointConfigName":"cfg-config"}`, name)); err != nil {
			t.Fatal(err)
		}
		if err := s.WaitEndpoint(context.Background(), name); err != nil {
			t.Fatal(err)
		}
		var wg sync.WaitGroup
		start := make(chan struct{})
		wg.Add(2)
		go func() {
			defer wg.Done()
			<-start
			callOp(s, "UpdateEndpoint", fmt.Sprintf(`{"EndpointName":%q,"EndpointConfigName":"cfg-config"}`, name))
		}()
		go func() {
			defer wg.Done()
			<-start
			time.Sleep(time.Duration(i%5) * 100 * time.Microsecond)
			if err := callOp(s, "DeleteEndpoint", fmt.Sprintf(`{"EndpointName":%q}`, name)); err != nil {
				t.Errorf("DeleteEndpoint: %v", err)
			}
		}()
		close(start)
		wg.Wait()
		if e := s.reg.get(name); e != nil && (e.Status() != spec.StatusDeleting || e.route.Load() != nil) {
			t.Fatalf("round %d: status %s, route %v after DeleteEndpoint", i, e.Status(), e.route.Load() != nil)
		}
		waitGone(t, s, name)
	}
	callOp(s, "DeleteEndpoint", `{"EndpointName":"cfg"}`)
	waitGone(t, s, "cfg")
	s.bg.Wait()
	if l, c := h.backend.launches.Load(), h.backend.closed.Load(); l != c {
		t.Errorf("%d generations launched, %d removed", l, c)
	}
}

// TestConcurrentUpdatesOneWins: two UpdateEndpointWeightsAndCapacities at
// once on an InService endpoint: each either starts or is refused as
// in progress; the endpoint ends InService with a consistent plan.
func TestConcurrentUpdatesOneWins(t *testing.T) {
	h := newHarness(t, Config{})
	s := h.srv
	h.backend.delay = 0
	if err := h.deploy(plan("twice", "Serial", map[string][]string{"AllTraffic": {"c:A"}})); err != nil {
		t.Fatal(err)
	}
	for i := range 50 {
		var wg sync.WaitGroup
		errs := make([]error, 2)
		for g := range 2 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				errs[g] = callOp(s, "UpdateEndpointWeightsAndCapacities",
					fmt.Sprintf(`{"EndpointName":"twice","DesiredWeightsAndCapacities":[{"VariantName":"AllTraffic","DesiredInstanceCount":%d}]}`, 1+(i+g)%3))
			}()
		}
		wg.Wait()
		if errs[0] != nil && errs[1] != nil {
			t.Fatalf("round %d: both refused: %v; %v", i, errs[0], errs[1])
		}
		if err := s.WaitEndpoint(context.Background(), "twice"); err != nil {
			t.Fatal(err)
		}
		rec := s.reg.get("twice").record()
		if n := len(s.reg.get("twice").route.Load().Variants()[0].Instances()); n != rec.Plan.Variants[0].InstanceCount {
			t.Fatalf("round %d: %d instances routed, the record says %d", i, n, rec.Plan.Variants[0].InstanceCount)
		}
	}
}
