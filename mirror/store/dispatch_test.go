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

func TestDispatchRecordsSQLite(t *testing.T) {
	runDispatchRecords(t, dbtest.SQLite(t))
}

func TestDispatchRecordsPostgres(t *testing.T) {
	if os.Getenv(dbtest.PostgresEnv) == "" {
		t.Skip("PostgreSQL dispatch records skipped: set " + dbtest.PostgresEnv + " to a postgres:// URL to run it")
	}
	runDispatchRecords(t, dbtest.Postgres(t))
}

// runDispatchRecords: a dispatch is recorded once per delivery (a
// redelivery gets the first record back); a live dispatch ends once; the
// latest dispatch of an item decides whether agent-dispatch-refused is
// listed.
func runDispatchRecords(t *testing.T, d *db.DB) {
	ctx := context.Background()
	st, err := Open(ctx, d, Config{Region: "local"})
	if err != nil {
		t.Fatal(err)
	}
	a := st.Acts
	const repo = 9
	t0 := time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)

	findings := func() map[int][]gating.Defect {
		t.Helper()
		into := map[int][]gating.Defect{}
		if err := loadDispatchFindings(ctx, d.Read, repo, nil, into); err != nil {
			t.Fatal(err)
		}
		return into
	}

	refused := Dispatch{Number: 4, Delivery: "d-1", Login: "Copilot", Owner: "copilot/issue-4", AssignedAt: t0,
		Outcome: DispatchRefused, Reason: gating.ExAwaitingAdmission, Detail: "refused: awaiting admission"}
	if _, fresh, err := a.RecordDispatch(ctx, repo, refused); err != nil || !fresh {
		t.Fatalf("first record: fresh %v, %v", fresh, err)
	}
	again := refused
	again.Detail = "another detail"
	got, fresh, err := a.RecordDispatch(ctx, repo, again)
	if err != nil || fresh || got.Detail != refused.Detail {
		t.Fatalf("a redelivery: fresh %v, detail %q, %v; want the first record", fresh, got.Detail, err)
	}
	if f := findings(); len(f[4]) != 1 || f[4][0].Code != gating.CodeAgentDispatchRefused || f[4][0].Detail != refused.Detail {
		t.Fatalf("findings after the refusal: %+v", f)
	}

	// A later grant ends the line; it is live until ended, once.
	granted := Dispatch{Number: 4, Delivery: "d-2", Login: "Copilot", Owner: "copilot/issue-4", Fence: 3, AssignedAt: t0.Add(time.Minute), Outcome: DispatchGranted}
	if _, fresh, err := a.RecordDispatch(ctx, repo, granted); err != nil || !fresh {
		t.Fatalf("the grant: fresh %v, %v", fresh, err)
	}
	if f := findings(); len(f[4]) != 0 {
		t.Fatalf("a granted dispatch after the refusal still lists it: %+v", f)
	}
	if some, err := a.AnyLiveDispatch(ctx, repo); err != nil || !some {
		t.Fatalf("AnyLiveDispatch with a grant: %v %v", some, err)
	}
	live, err := a.LiveDispatches(ctx, repo, 4)
	if err != nil || len(live) != 1 || live[0].Fence != 3 || !live[0].Live() {
		t.Fatalf("live dispatches %+v, %v", live, err)
	}
	if ended, err := a.EndDispatch(ctx, repo, 4, 3, DispatchReleased, t0.Add(2*time.Minute)); err != nil || !ended {
		t.Fatalf("end: %v %v", ended, err)
	}
	if ended, err := a.EndDispatch(ctx, repo, 4, 3, DispatchReleased, t0.Add(3*time.Minute)); err != nil || ended {
		t.Fatalf("a second end: %v %v, want nothing ended", ended, err)
	}
	if live, err := a.LiveDispatches(ctx, repo, 4); err != nil || len(live) != 0 {
		t.Fatalf("live after the end: %+v %v", live, err)
	}
	if some, err := a.AnyLiveDispatch(ctx, repo); err != nil || some {
		t.Fatalf("AnyLiveDispatch after the end: %v %v", some, err)
	}
	all, err := a.Dispatches(ctx, repo, 4)
	if err != nil || len(all) != 2 || all[1].Outcome != DispatchReleased || !all[1].EndedAt.Equal(t0.Add(2*time.Minute)) {
		t.Fatalf("dispatches %+v %v", all, err)
	}

	// Another item's refusal is its own; refusing twice lists the latest.
	for i, det := range []string{"first", "second"} {
		r := Dispatch{Number: 5, Delivery: "e-" + det, Login: "bot", Owner: "bot/issue-5", AssignedAt: t0.Add(time.Duration(i) * time.Second),
			Outcome: DispatchRefused, Reason: gating.ExParked, Detail: det}
		if _, _, err := a.RecordDispatch(ctx, repo, r); err != nil {
			t.Fatal(err)
		}
	}
	if f := findings(); len(f[5]) != 1 || f[5][0].Detail != "second" || len(f[4]) != 0 {
		t.Fatalf("findings %+v, want #5's latest refusal only", f)
	}
	// A forced dispatch keeps who forced it.
	forced := Dispatch{Number: 6, Delivery: "command:77", Login: "Copilot", Owner: "copilot/issue-6", Fence: 1, AssignedAt: t0,
		Outcome: DispatchGranted, ForcedBy: "alice"}
	if _, fresh, err := a.RecordDispatch(ctx, repo, forced); err != nil || !fresh {
		t.Fatalf("the forced dispatch: fresh %v, %v", fresh, err)
	}
	if live, err := a.LiveDispatches(ctx, repo, 6); err != nil || len(live) != 1 || !live[0].Forced() || live[0].ForcedBy != "alice" {
		t.Fatalf("the forced dispatch read back: %+v %v", live, err)
	}
	if all, err := a.Dispatches(ctx, repo, 4); err != nil || all[0].Forced() {
		t.Fatalf("an assignment reads back as forced: %+v %v", all, err)
	}
	if _, _, err := a.RecordDispatch(ctx, repo, Dispatch{Number: 5, Login: "x"}); err == nil {
		t.Fatal("a dispatch without a delivery id was recorded")
	}
}
