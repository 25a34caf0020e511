package harness

import (
	"context"
	"testing"

	"github.com/wardenhq/warden/gating"
)

// TestE2EStaleReportIsEditedBack: a report comment written from a judgement
// that no longer holds (as warden wrote before settling judged an item
// again after its admission repair: admission-unrecorded on an item that
// carries the admission label) is edited back by the timer pass, with no
// delivery about the item to prompt it, once the coalescing minute is up.
func TestE2EStaleReportIsEditedBack(t *testing.T) {
	t.Parallel()
	x := newE2E(t)
	agent := x.agent("builder[bot]", "write")
	iss, err := agent.OpenIssue(x.Repo, "Proposed by an agent", "spec", lblItem)
	if err != nil {
		t.Fatal(err)
	}
	n := iss.Number
	x.MustSettle(t)
	if !x.labels(n)[lblAdmission] {
		t.Fatalf("#%d lacks %s: %v", n, lblAdmission, x.labels(n))
	}
	ctx := context.Background()
	repo, err := x.Service.Ledger.RepoByID(ctx, x.Repo.ID)
	if err != nil {
		t.Fatal(err)
	}
	stale := gating.ReportFinding{Code: "admission-unrecorded", Detail: "written from a stale snapshot"}
	if _, err := x.Service.Mirror.Reports.Publish(ctx, repo, n, []gating.ReportFinding{stale}); err != nil {
		t.Fatal(err)
	}
	x.MustSettle(t)
	x.mustReportWith(t, n, []string{"admission-unrecorded"})

	x.MustSweep(t) // judged again: the edit is coalesced (written just now)
	x.flush(t)     // a minute later it is written
	x.reportLacks(t, n, "admission-unrecorded")
	if body := x.report(t, n); body == "" {
		t.Errorf("#%d: the report comment is gone; it is kept and edited in place", n)
	}
}
