// Package layering has no code: its test keeps the import arrows of the
// module pointing the way the design says (docs/layout.md):
//   - host (and its sub-packages), pipeline, authz and the shared root of
//     containers link no engine client (moby, Docker, any k8s.io package)
//     and no engine package; engines implement containers.Engine, which
//     host drives;
//   - nothing under containers imports a host package: the seam's
//     vocabulary (plans, capabilities) lives in containers;
//   - an engine (containers/docker, containers/kubernetes) imports no
//     other engine;
//   - the Kubernetes engine links no Docker client.
package layering
