package service

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/wardenhq/warden/mirror"
	"github.com/wardenhq/warden/mirror/store"
)

// TestReconcileDoneMetric: each repository's last complete reconcile is
// the later of the database's record and the passes this process saw
// complete; a pass that ran out of budget does not count; an unreadable
// database fails the scrape instead of exporting a partial view.
func TestReconcileDoneMetric(t *testing.T) {
	t0 := time.Date(2030, 1, 2, 3, 0, 0, 0, time.UTC)
	var rows []store.ReconcileDone
	var readErr error
	c := newReconcileDone(func(context.Context) ([]store.ReconcileDone, error) { return rows, readErr })
	reg := prometheus.NewRegistry()
	reg.MustRegister(c)

	if n, err := testutil.GatherAndCount(reg, "warden_reconcile_last_complete_timestamp_seconds"); err != nil || n != 0 {
		t.Fatalf("before any pass: %d series, %v; want none", n, err)
	}
	rows = []store.ReconcileDone{{Repo: "acme/a", Finished: t0.UnixMilli()}, {Repo: "acme/b", Finished: t0.Add(time.Minute).UnixMilli()}}
	// acme/a completed later here (its row since overwritten by a pass that
	// ran out of budget would say nothing); acme/c only ran out of budget.
	c.note([]mirror.PassResult{{Repo: "acme/a", Complete: true}, {Repo: "acme/c", Stopped: "budget of 500 requests spent"}}, t0.Add(10*time.Minute))
	c.note([]mirror.PassResult{{Repo: "acme/b", Complete: true}}, t0.Add(-time.Hour)) // older than the database's

	want := `
# HELP warden_reconcile_last_complete_timestamp_seconds When the last complete reconcile pass of a repository finished (Unix seconds); a pass that ran out of budget does not count.
# TYPE warden_reconcile_last_complete_timestamp_seconds gauge
warden_reconcile_last_complete_timestamp_seconds{repository="acme/a"} 1.8935538e+09
warden_reconcile_last_complete_timestamp_seconds{repository="acme/b"} 1.89355326e+09
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "warden_reconcile_last_complete_timestamp_seconds"); err != nil {
		t.Error(err)
	}

	readErr = errors.New("database is locked")
	if _, err := reg.Gather(); err == nil || !strings.Contains(err.Error(), "database is locked") {
		t.Errorf("an unreadable reconcile state: Gather error %v, want it named", err)
	}
}
