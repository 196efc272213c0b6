package docker

func (rt *Runtime) track(c *Container) {
	rt.mu.Lock()
	rt.byID[c.ID()] = c
	rt.mu.Unlock()
}

func (rt *Runtime) untrack(c *Container) {
	rt.mu.Lock()
	delete(rt.byID, c.ID())
	rt.mu.Unlock()
}

// retrack follows a recreated container to its new Docker ID.
func (rt *Runtime) retrack(c *Container, old, id string) {
	rt.mu.Lock()
	delete(rt.byID, old)
	c.id.Store(&id)
	rt.byID[id] = c
	rt.mu.Unlock()
}

func (rt *Runtime) lookup(id string) *Container {
	rt.mu.Lock()
	defer rt.mu.Unlock()
	return rt.byID[id]
}
