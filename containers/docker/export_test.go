package docker

// RestartForLeak lets the engine's tests stop a container as a multi-model
// manager does when its server keeps GPU memory (mme RestartOnLeak), which
// needs a GPU to happen on its own.
func RestartForLeak(c *Container, reason string) { c.restartForLeak(reason) }
