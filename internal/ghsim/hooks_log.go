package ghsim

// ExpireDeliveryLog empties the App's webhook delivery log, as GitHub's
// does for deliveries older than three days: a warden down longer than
// that has nothing to catch up from it, and must converge by reading
// GitHub. Deliveries sent from now on are logged as usual.
func (s *Sim) ExpireDeliveryLog() {
	s.hooks.mu.Lock()
	defer s.hooks.mu.Unlock()
	s.hooks.log = nil
}
