package webhooks

import (
	"github.com/prometheus/client_golang/prometheus"
)

// Metrics are the ingress and dispatch instruments. Label values come only
// from warden's own vocabulary (reasons, outcomes) or from events that passed
// the signature check and are in the subscribed set, so a stranger cannot
// inflate their cardinality.
type Metrics struct {
	Received   prometheus.Counter
	Rejected   *prometheus.CounterVec // by reason
	Accepted   *prometheus.CounterVec // by event, result
	AckSeconds prometheus.Histogram
	Depth      prometheus.Gauge
	Dead       prometheus.Gauge
	Processing *prometheus.HistogramVec // handler time by event
	Latency    *prometheus.HistogramVec // receipt to done, by event
	Retries    *prometheus.CounterVec   // by event
	Deferred   *prometheus.CounterVec   // put back to wait for a rate limit, no try spent; by event
	DeadTotal  *prometheus.CounterVec   // deliveries that became dead letters, by event
	Outcomes   *prometheus.CounterVec   // by event, outcome
}

// NewMetrics creates the instruments and registers them with reg (if not nil).
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		Received: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "warden_deliveries_received_total", Help: "Webhook requests received on POST /webhooks."}),
		Rejected: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "warden_deliveries_rejected_total", Help: "Webhook requests refused, by reason."}, []string{"reason"}),
		Accepted: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "warden_deliveries_accepted_total", Help: "Verified deliveries acknowledged, by event and result (stored, duplicate, requeued, ignored)."},
			[]string{"event", "result"}),
		AckSeconds: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "warden_delivery_ack_seconds", Help: "Time from request to acknowledgement of a verified delivery.",
			Buckets: prometheus.ExponentialBuckets(0.0005, 2, 14)}),
		Depth: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "warden_inbox_depth", Help: "Deliveries waiting to be processed (including those waiting for a retry)."}),
		Dead: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "warden_inbox_dead_letters", Help: "Deliveries that failed their last try and wait for an operator."}),
		Processing: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "warden_delivery_processing_seconds", Help: "Handler time per try, by event.",
			Buckets: prometheus.ExponentialBuckets(0.001, 2, 15)}, []string{"event"}),
		Latency: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "warden_delivery_latency_seconds", Help: "Time from receipt to processed, by event.",
			Buckets: prometheus.ExponentialBuckets(0.001, 2, 20)}, []string{"event"}),
		Retries: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "warden_delivery_retries_total", Help: "Failed tries scheduled for a retry, by event."}, []string{"event"}),
		Deferred: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "warden_delivery_deferred_total", Help: "Deliveries put back to wait for a GitHub rate limit's reset (no try spent), by event."}, []string{"event"}),
		DeadTotal: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "warden_delivery_dead_letters_total", Help: "Deliveries that became dead letters, by event."}, []string{"event"}),
		Outcomes: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "warden_delivery_outcomes_total", Help: "Processed deliveries by event and outcome."}, []string{"event", "outcome"}),
	}
	if reg != nil {
		reg.MustRegister(m.Received, m.Rejected, m.Accepted, m.AckSeconds, m.Depth, m.Dead,
			m.Processing, m.Latency, m.Retries, m.Deferred, m.DeadTotal, m.Outcomes)
	}
	return m
}
