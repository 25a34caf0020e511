package service

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/wardenhq/warden/mirror"
	"github.com/wardenhq/warden/mirror/store"
)

// reconcileDoneDesc is the time of each served repository's last complete
// reconcile pass: `time() - warden_reconcile_last_complete_timestamp_seconds`
// is how stale warden's view of a repository may be.
var reconcileDoneDesc = prometheus.NewDesc("warden_reconcile_last_complete_timestamp_seconds",
	"When the last complete reconcile pass of a repository finished (Unix seconds); a pass that ran out of budget does not count.",
	[]string{"repository"}, nil)

// reconcileDone exports reconcileDoneDesc at each scrape. Its answer is the
// later of two sources: the reconcile state in the database (the latest
// pass of each repository, when it completed: a pass any replica, or
// `warden reconcile`, ran) and the completions this process saw itself (a
// complete pass followed by one that ran out of budget leaves no trace in
// the database's row).
type reconcileDone struct {
	read func(context.Context) ([]store.ReconcileDone, error)

	mu   sync.Mutex
	seen map[string]time.Time // repository → finish of a complete pass run here
}

func newReconcileDone(read func(context.Context) ([]store.ReconcileDone, error)) *reconcileDone {
	return &reconcileDone{read: read, seen: map[string]time.Time{}}
}

// note records the complete passes among results, finished at.
func (c *reconcileDone) note(results []mirror.PassResult, at time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, r := range results {
		if r.Complete && at.After(c.seen[r.Repo]) {
			c.seen[r.Repo] = at
		}
	}
}

// latest merges the two sources; an unreadable database is an error.
func (c *reconcileDone) latest(ctx context.Context) (map[string]time.Time, error) {
	out := map[string]time.Time{}
	c.mu.Lock()
	for repo, t := range c.seen {
		out[repo] = t
	}
	c.mu.Unlock()
	rows, err := c.read(ctx)
	if err != nil {
		return out, err
	}
	for _, d := range rows {
		if t := time.UnixMilli(d.Finished); t.After(out[d.Repo]) {
			out[d.Repo] = t
		}
	}
	return out, nil
}

// Describe implements prometheus.Collector.
func (c *reconcileDone) Describe(ch chan<- *prometheus.Desc) { ch <- reconcileDoneDesc }

// Collect implements prometheus.Collector. A failed read fails the scrape
// (an invalid metric naming the error) rather than export a partial view.
func (c *reconcileDone) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	done, err := c.latest(ctx)
	if err != nil {
		ch <- prometheus.NewInvalidMetric(reconcileDoneDesc, fmt.Errorf("read the reconcile state: %w", err))
		return
	}
	for repo, t := range done {
		ch <- prometheus.MustNewConstMetric(reconcileDoneDesc, prometheus.GaugeValue, float64(t.UnixMilli())/1000, repo)
	}
}
