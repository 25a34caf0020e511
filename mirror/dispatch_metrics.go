package mirror

import "github.com/prometheus/client_golang/prometheus"

// DispatchMetrics count what dispatch by assignment did (dispatch.go).
type DispatchMetrics struct {
	// Refused is warden_agent_dispatch_refused_total{reason}: assignments
	// of an agent to an item that was not claimable, by the exclusion code
	// (or the ledger's reason) the refusal named. A redelivery is not
	// counted twice.
	Refused *prometheus.CounterVec
}

// NewDispatchMetrics makes the dispatch counters and registers them on reg
// (nil: not registered).
func NewDispatchMetrics(reg prometheus.Registerer) *DispatchMetrics {
	d := &DispatchMetrics{Refused: prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "warden_agent_dispatch_refused_total",
		Help: "Assignments of an agent to an item that was not claimable, undone by warden, by reason (agent-dispatch-refused).",
	}, []string{"reason"})}
	if reg != nil {
		reg.MustRegister(d.Refused)
	}
	return d
}

// refused counts one refusal; a nil DispatchMetrics counts nothing.
func (d *DispatchMetrics) refused(reason string) {
	if d == nil || d.Refused == nil {
		return
	}
	d.Refused.WithLabelValues(reason).Inc()
}
