package store

import (
	"context"
	"os"
	"testing"
	"time"

	"github.com/wardenhq/warden/gating"
	"github.com/wardenhq/warden/internal/db"
	"github.com/wardenhq/warden/internal/db/dbtest"
)

func TestTransitionRecordsSQLite(t *testing.T) {
	runTransitionRecords(t, dbtest.SQLite(t))
}

func TestTransitionRecordsPostgres(t *testing.T) {
	if os.Getenv(dbtest.PostgresEnv) == "" {
		t.Skip("PostgreSQL transition records skipped: set " + dbtest.PostgresEnv + " to a postgres:// URL to run it")
	}
	runTransitionRecords(t, dbtest.Postgres(t))
}

// runTransitionRecords: each record is versioned by the time it was
// written, so a request finishing late never clears a newer one; a close is
// decided once; a reopening counts only after the completion closed the
// issue; edge removals are dropped, acknowledged and re-recorded per edge.
func runTransitionRecords(t *testing.T, d *db.DB) {
	ctx := context.Background()
	st, err := Open(ctx, d, Config{Region: "local"})
	if err != nil {
		t.Fatal(err)
	}
	a := st.Acts
	const repo = 9
	t0 := time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)
	t1 := t0.Add(time.Second)

	// Sub-issue records: due, versioned, kept on a stale Done.
	if err := a.PlanSubIssueSync(ctx, repo, 4, 0, 7, t0, t0.Add(time.Minute)); err != nil {
		t.Fatal(err)
	}
	if s, err := a.SubIssueSyncs(ctx, repo, t0, 10); err != nil || len(s) != 0 {
		t.Errorf("a record inside its grace is due: %+v %v", s, err)
	}
	if err := a.PlanSubIssueSync(ctx, repo, 4, 7, 8, t1, t1.Add(time.Minute)); err != nil {
		t.Fatal(err)
	}
	s, err := a.SubIssueSyncs(ctx, repo, time.Time{}, 10)
	if err != nil || len(s) != 1 || s[0].FromParent != 0 || s[0].ToParent != 8 || !s[0].CreatedAt.Equal(t1) {
		t.Fatalf("after two plans: %+v %v (want from 0 kept, to 8, version t1)", s, err)
	}
	if err := a.DoneSubIssueSync(ctx, repo, 4, t0); err != nil {
		t.Fatal(err)
	}
	if s, _ := a.SubIssueSyncs(ctx, repo, time.Time{}, 10); len(s) != 1 {
		t.Errorf("Done with the older version cleared the newer record: %+v", s)
	}
	if err := a.RetrySubIssueSync(ctx, repo, 4, t1, "boom", t1.Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	if s, _ := a.SubIssueSyncs(ctx, repo, time.Time{}, 10); len(s) != 1 || s[0].Tries != 1 || s[0].LastError != "boom" {
		t.Errorf("after a retry: %+v", s)
	}
	if err := a.DoneSubIssueSync(ctx, repo, 4, t1); err != nil {
		t.Fatal(err)
	}
	if s, _ := a.SubIssueSyncs(ctx, repo, time.Time{}, 10); len(s) != 0 {
		t.Errorf("Done left %+v", s)
	}

	// Completion closes.
	if err := a.PlanCompleteClose(ctx, repo, 5, t0, t0.Add(time.Minute)); err != nil {
		t.Fatal(err)
	}
	if ok, err := a.NoteReopened(ctx, repo, 5, "maria", t1); err != nil || ok {
		t.Errorf("a reopening before the close was decided counted: %v %v", ok, err)
	}
	if p, err := a.PendingCompleteCloses(ctx, repo, t0.Add(time.Minute), 10); err != nil || len(p) != 1 {
		t.Fatalf("pending: %+v %v", p, err)
	}
	if ok, err := a.DecideCompleteClose(ctx, repo, 5, t1, gating.CloseIssue, t1); err != nil || ok {
		t.Errorf("a decision for another completion applied: %v %v", ok, err)
	}
	if ok, err := a.DecideCompleteClose(ctx, repo, 5, t0, gating.CloseIssue, t1); err != nil || !ok {
		t.Fatalf("decide: %v %v", ok, err)
	}
	if ok, err := a.DecideCompleteClose(ctx, repo, 5, t0, gating.CloseSkipClosed, time.Time{}); err != nil || ok {
		t.Errorf("a close was decided twice: %v %v", ok, err)
	}
	if p, _ := a.PendingCompleteCloses(ctx, repo, t0.Add(time.Hour), 10); len(p) != 0 {
		t.Errorf("a decided close is still pending: %+v", p)
	}
	if ok, err := a.NoteReopened(ctx, repo, 5, "maria", t1); err != nil || !ok {
		t.Errorf("a reopening after the close did not count: %v %v", ok, err)
	}
	if ok, _ := a.NoteReopened(ctx, repo, 5, "maria", t1); ok {
		t.Errorf("the same reopening (a redelivery) counted twice")
	}
	c, err := a.CompleteCloseOf(ctx, repo, 5)
	if err != nil || c == nil || c.Stage != gating.CloseIssue || c.ReopenedBy != "maria" || !c.ReopenedAt.Equal(t1) || !c.ClosedAt.Equal(t1) {
		t.Errorf("record: %+v %v", c, err)
	}
	if err := a.DropCompleteClose(ctx, repo, 5, t0); err != nil {
		t.Fatal(err)
	}
	if c, _ := a.CompleteCloseOf(ctx, repo, 5); c == nil {
		t.Errorf("Drop removed a decided close (only pending ones go)")
	}

	// Edge removals.
	rm := []EdgeRemoval{{Rel: gating.BlockedBy, Target: "issue-2", Actor: "pm", Role: gating.RolePM, RemovedAt: t0},
		{Rel: gating.BlockedBy, Target: "issue-3", Actor: "pm", Role: gating.RolePM, RemovedAt: t0}}
	if err := a.PlanEdgeRemovals(ctx, repo, 6, rm); err != nil {
		t.Fatal(err)
	}
	if n, err := a.AckEdgeRemovals(ctx, repo, 6, gating.BlockedBy, "issue-2", "pm", "restored", t1); err != nil || n != 1 {
		t.Errorf("ack one: %d %v", n, err)
	}
	if err := a.DropEdgeRemovals(ctx, repo, 6, rm); err != nil {
		t.Fatal(err)
	}
	all, err := a.EdgeRemovals(ctx, repo, 6, true)
	if err != nil || len(all) != 1 || all[0].Target != "issue-2" || all[0].AckedHow != "restored" {
		t.Errorf("after ack and drop: %+v %v (want the acknowledged one kept, the open one dropped)", all, err)
	}
	if err := a.PlanEdgeRemovals(ctx, repo, 6, rm[:1]); err != nil {
		t.Fatal(err)
	}
	if open, _ := a.EdgeRemovals(ctx, repo, 6, false); len(open) != 1 {
		t.Errorf("a second removal of an acknowledged edge is not open again: %+v", open)
	}
	if n, err := a.AckEdgeRemovals(ctx, repo, 6, "", "", "maria", "/backlog resolve", t1); err != nil || n != 1 {
		t.Errorf("ack all: %d %v", n, err)
	}
	if n, _ := a.AckEdgeRemovals(ctx, repo, 6, "", "", "maria", "/backlog resolve", t1); n != 0 {
		t.Errorf("a second /backlog resolve acknowledged %d", n)
	}
}
