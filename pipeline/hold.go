package pipeline

import "sync"

// Hold is one ready instance held for a long-lived call that does not go
// through Invoke (a bidirectional stream): it counts as one call in flight
// on the instance, as an invocation does, until Release.
type Hold struct {
	// Variant is the production variant picked (TargetVariant, or by
	// weight).
	Variant string
	// Instance is the instance picked, the least loaded ready one as the
	// variant's routing strategy chooses.
	Instance *Instance
	once     sync.Once
}

// Release gives the instance's slot back; later calls do nothing.
func (l *Hold) Release() {
	l.once.Do(func() { l.Instance.outstanding.Add(-1) })
}

// Acquire picks a production variant (the one named targetVariant, or one by
// weight) and in it a ready instance whose containers all pass their health
// checks, as Invoke picks them for a Serial call, and holds it.
// The errors are Invoke's: *ValidationError for an unknown or shadow
// variant, *UnavailableError when nothing is ready.
func (r *Route) Acquire(targetVariant string) (*Hold, error) {
	v, err := r.pickVariant(targetVariant)
	if err != nil {
		return nil, err
	}
	in, _, _ := choose(v.Instances(), false, "", nil, v.Strategy() == Random)
	if in == nil {
		return nil, &UnavailableError{Endpoint: r.Endpoint, Variant: v.name,
			Message: "No instance of variant " + v.name + " of endpoint " + r.Endpoint + " is ready."}
	}
	in.outstanding.Add(1)
	return &Hold{Variant: v.name, Instance: in}, nil
}
