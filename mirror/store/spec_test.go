package store

import (
	"context"
	"fmt"
	"os"
	"slices"
	"testing"
	"time"

	"github.com/wardenhq/warden/gating"
	"github.com/wardenhq/warden/internal/db"
	"github.com/wardenhq/warden/internal/db/dbtest"
)

func TestSpecRecordsSQLite(t *testing.T) { testSpecRecords(t, dbtest.SQLite(t)) }

func TestSpecRecordsPostgres(t *testing.T) {
	if os.Getenv(dbtest.PostgresEnv) == "" {
		t.Skip("set " + dbtest.PostgresEnv + " to run on PostgreSQL")
	}
	testSpecRecords(t, dbtest.Postgres(t))
}

// testSpecRecords: the recorded issue text has its own ordering guard (a
// label warden noted does not hide a later text), an admission keeps the
// newest admitted text, edits are logged once per delivery and pruned to
// the newest SpecEditsKept, and SpecsToJudge lists exactly the admitted
// items whose recorded text is not the admitted one.
func testSpecRecords(t *testing.T, d *db.DB) {
	ctx := context.Background()
	t0 := time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)
	st, err := Open(ctx, d, Config{Region: "local", Now: func() time.Time { return t0 }})
	if err != nil {
		t.Fatal(err)
	}
	l, a := st.Ledger, st.Acts
	const repo = 42
	if err := l.PutRepo(ctx, Repo{ID: repo, FullName: "acme/app", Installation: 1, DefaultBranch: "main"}); err != nil {
		t.Fatal(err)
	}
	at := func(s int) time.Time { return t0.Add(time.Duration(s) * time.Second) }
	record := func(n int, s int, digest string, labels ...string) bool {
		t.Helper()
		ok, err := l.RecordIssueState(ctx, repo, n, IssueState{State: IssueOpen, Labels: labels, UpdatedAt: at(s), SpecDigest: digest})
		if err != nil {
			t.Fatal(err)
		}
		return ok
	}
	spec := func(n int) gating.SpecState {
		t.Helper()
		s, err := a.IssueSpec(ctx, repo, n)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}

	// The text's guard is its own.
	if !record(1, 10, "d1", "backlog") {
		t.Fatal("first state not applied")
	}
	if err := l.NoteLabel(ctx, repo, 1, "needs-specification", true, at(20)); err != nil {
		t.Fatal(err)
	}
	if record(1, 15, "d2", "backlog") {
		t.Error("a state older than the noted label was applied")
	}
	if s := spec(1); s.Digest != "d2" || !s.At.Equal(at(15)) {
		t.Errorf("text %+v, want d2 as of +15s (newer than the text, though older than the noted label)", s)
	}
	if is, _ := l.IssueState(ctx, repo, 1); is == nil || !is.HasLabel("needs-specification") {
		t.Errorf("the older state undid the noted label: %+v", is)
	}
	record(1, 12, "d0", "backlog")
	record(1, 30, "", "backlog") // no text: the text stays
	if s := spec(1); s.Digest != "d2" {
		t.Errorf("text %+v, want d2 kept (older text, and a state without text)", s)
	}

	// The admitted text: the first act's who, the newest act's text.
	if err := a.RecordAdmission(ctx, repo, 1, Admission{By: "tom", At: at(11), How: "t", Spec: gating.SpecState{Digest: "d1", At: at(11)}}); err != nil {
		t.Fatal(err)
	}
	if err := a.RecordAdmission(ctx, repo, 1, Admission{By: "maria", At: at(9), How: "t", Spec: gating.SpecState{Digest: "d9", At: at(9)}}); err != nil {
		t.Fatal(err)
	}
	adm, err := a.Admission(ctx, repo, 1)
	if err != nil || adm.By != "tom" || adm.Spec.Digest != "d1" || !adm.Spec.At.Equal(at(11)) {
		t.Errorf("admission %+v (%v), want tom's with d1 as of +11s", adm, err)
	}
	if ok, err := a.AcceptSpec(ctx, repo, 1, gating.SpecState{Digest: "d2", At: at(15)}); err != nil || !ok {
		t.Errorf("AcceptSpec newer: %v %v", ok, err)
	}
	if ok, _ := a.AcceptSpec(ctx, repo, 1, gating.SpecState{Digest: "dx", At: at(12)}); ok {
		t.Error("AcceptSpec of an older text applied")
	}
	f, ok, err := a.SpecFacts(ctx, repo, 1)
	if err != nil || !ok || f.Accepted.Digest != "d2" || f.Current.Digest != "d2" || !f.AdmittedAt.Equal(at(11)) {
		t.Errorf("facts %+v %v %v", f, ok, err)
	}
	if _, ok, _ := a.SpecFacts(ctx, repo, 99); ok {
		t.Error("facts of an issue with no admission")
	}

	// The edit log.
	for i := range SpecEditsKept + 5 {
		e := gating.SpecEdit{At: at(100 + i), Editor: "pm[bot]", Standing: gating.SpecEditorAgent, Digest: fmt.Sprint("e", i), Prior: fmt.Sprint("e", i-1), Delivery: fmt.Sprint("g", i)}
		if fresh, err := a.RecordSpecEdit(ctx, repo, 1, e); err != nil || !fresh {
			t.Fatalf("edit %d: %v %v", i, fresh, err)
		}
		if fresh, _ := a.RecordSpecEdit(ctx, repo, 1, e); fresh {
			t.Fatalf("edit %d logged twice", i)
		}
	}
	edits, err := a.SpecEdits(ctx, repo, 1)
	if err != nil || len(edits) != SpecEditsKept || edits[0].Digest != "e5" || edits[len(edits)-1].Prior != fmt.Sprint("e", SpecEditsKept+3) {
		t.Errorf("%d edits kept (%v), first %+v; want the newest %d", len(edits), err, edits[0], SpecEditsKept)
	}

	// What the reconcile still has to judge.
	mk := func(n int) {
		t.Helper()
		if _, err := l.Create(ctx, repo, NewItem{Number: n, Title: "t", Body: "b", Author: "a", Provenance: "p",
			Tags: []string{"backlog", "priority:P1", "phase:implementation", "homeRegion:local", "baseBranch:main"}},
			Actor{Role: gating.RoleWarden, Name: "warden"}, WriteOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	admit := func(n int, digest string, s int) {
		t.Helper()
		if err := a.RecordAdmission(ctx, repo, n, Admission{By: "tom", At: at(s), How: "t", Spec: gating.SpecState{Digest: digest, At: at(s)}}); err != nil {
			t.Fatal(err)
		}
	}
	for n := 2; n <= 7; n++ {
		mk(n)
	}
	record(2, 20, "new", "backlog") // changed since: judge
	admit(2, "old", 10)
	record(3, 20, "same", "backlog") // unchanged
	admit(3, "same", 10)
	record(4, 20, "new", "backlog", "Needs-Specification") // gated: no
	admit(4, "old", 10)
	record(5, 5, "older", "backlog") // older than the admitted text: no
	admit(5, "old", 10)
	record(6, 20, "new", "backlog") // re-gated already: no
	admit(6, "old", 10)
	if err := a.NoteSpecFinding(ctx, repo, 6, "pm[bot]", "rewritten", "spec:x", at(20)); err != nil {
		t.Fatal(err)
	}
	record(7, 20, "any", "backlog") // admitted before digests: trust on first use
	admit(7, "", 10)
	got, err := a.SpecsToJudge(ctx, repo, "needs-specification")
	if err != nil || !slices.Equal(got, []int{2, 7}) {
		t.Errorf("SpecsToJudge = %v (%v), want [2 7]", got, err)
	}
	// A spec finding seen before is opened again (judged from what is
	// recorded now, not replayed).
	if err := a.CloseLabelFinding(ctx, repo, 6, gating.CodeSpecChangedByAgent); err != nil {
		t.Fatal(err)
	}
	if err := a.NoteSpecFinding(ctx, repo, 6, "pm[bot]", "rewritten", "spec:x", at(21)); err != nil {
		t.Fatal(err)
	}
	fs, err := a.LabelFindings(ctx, repo, 6, false)
	if err != nil || len(fs) != 1 || fs[0].Count != 1 {
		t.Errorf("findings %+v (%v), want spec-changed-by-agent open again, counted once", fs, err)
	}
}
