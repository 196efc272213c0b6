package mme

import "time"

// sweep unloads models idle for IdleTTL until Close.
func (m *Manager) sweep() {
	defer m.wg.Done()
	period := min(max(m.o.IdleTTL/4, 10*time.Millisecond), time.Minute)
	tick := time.NewTicker(period)
	defer tick.Stop()
	for {
		select {
		case <-m.life.Done():
			return
		case now := <-tick.C:
			m.sweepOnce(now)
		}
	}
}

// sweepOnce unloads the idle models whose last call is older than IdleTTL.
// The idle list is ordered by last release, so it stops at the first young one.
func (m *Manager) sweepOnce(now time.Time) {
	var ts []*unloadTicket
	m.mu.Lock()
	for {
		_, st, ok := m.idle.oldest()
		if !ok || now.Sub(st.lastUsed) < m.o.IdleTTL {
			break
		}
		ts = append(ts, m.beginUnloadLocked(st, false))
	}
	m.mu.Unlock()
	for _, t := range ts {
		if err := m.finishUnload(t); err != nil {
			m.logEvent("unload failed", m.log.Warn).Err(err).Str("model", t.st.target).Msg("unloading an idle model failed")
		}
	}
}
