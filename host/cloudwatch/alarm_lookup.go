package cloudwatch

// AlarmState is the state of the alarm named name, and whether it exists
// (deployment guardrails' AutoRollbackConfiguration reads its alarms by
// name).
func (s *Service) AlarmState(name string) (State, bool) {
	s.al.mu.Lock()
	defer s.al.mu.Unlock()
	e, ok := s.al.byName[name]
	if !ok {
		return "", false
	}
	return e.a.StateValue, true
}
