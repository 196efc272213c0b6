// Package layering has no code: its test keeps the import arrows of the
// module pointing the way the design says. host, pipeline and authz (and the
// shared root of containers) link no engine client (moby, client-go) and no
// engine package; the engines (containers/docker, containers/kubernetes)
// never import host. Engines implement containers.Engine, which host drives.
package layering
