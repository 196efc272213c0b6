// Package components owns mce's inference components
// (https://docs.aws.amazon.com/sagemaker/latest/dg/realtime-endpoints-deploy-models.html):
// an endpoint whose variants name no model hosts components, each with its
// own model or image, resources and copy count. A Manager holds them all.
//
// What it owns, one job per file:
//   - manager.go: the Manager, the Options it is built from (narrow
//     dependencies with documented zero values), what it needs of an
//     endpoint (HostEndpoint), and the registry by name.
//   - lifecycle.go: what the operations ask of it, the caller authorized:
//     Create, Update, Scale, Delete, ChangeTags, Lookup; the checks of a
//     new specification (merged over the current one for an update, its
//     template, one copy fitting an empty instance, the copy and adapter
//     bounds) and the records they leave.
//   - components.go: the records (Record, CopyRecord), the copies' numbers
//     (never used twice on an endpoint), reconcile (desired against
//     running copies, placed by the engine, launched in parallel, surplus
//     ones drained and stopped), the component's status and
//     FailureReason, deletion, recovery after a restart (Recover), and the
//     snapshots the inventory and the metrics read (RunningCopies,
//     Gauges, PlacedCopies).
//   - rolling.go: UpdateInferenceComponent's rolling update (a changed
//     specification replaces the copies batch by batch, rolled back when
//     a new copy does not start; an unchanged one only scales), its
//     record (Rollout) and the room it needs.
//   - adapters.go: adapter components, staged through the engine's
//     containers.AdapterStore and registered with every copy of their base
//     through the containers' adapter API.
//   - route.go: the route of an invocation that names a component (Route).
//
// Where a copy goes is the engine's answer (containers.CopyPlacer): the
// Manager never packs copies or reads a machine's capacity itself. An
// engine that is no CopyPlacer gets containers.LaunchPlacer.
//
// What it must not do: authorize (host checks the caller on the component,
// its endpoint and an adapter's base before it calls the Manager, and
// DeleteEndpoint checks each component it deletes), write HTTP or decode
// the API's JSON (host's thin adapters in control_components.go do, and
// shape the answers; the Manager returns *apierr.Error and spec's errors
// for host to write), or reach an endpoint's internals: it sees endpoints
// only through HostEndpoint, and registers a new component only under the
// endpoint's lock while the endpoint is not being deleted
// (HostEndpoint.UnlessDeleting), so that no component outlives its
// endpoint. It imports no engine and nothing of host but its shared
// pieces (apierr, spec, store).
//
// Concurrency: a Manager is safe for concurrent use. Each component runs
// one lifecycle operation at a time; placement decisions of all
// components are serialized, so that copy numbers, GPUs and the container
// limit are never handed out twice. Work that outlives a call runs in
// Options.Background, whose context is the Manager's lifetime.
package components
