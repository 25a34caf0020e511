package store

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/wardenhq/warden/gating"
	"github.com/wardenhq/warden/internal/db"
	"github.com/wardenhq/warden/internal/db/dbtest"
)

// summaryBackends runs f on SQLite and, when WARDEN_TEST_POSTGRES is set,
// on PostgreSQL.
func summaryBackends(t *testing.T, f func(t *testing.T, open func(t *testing.T) *Ledger)) {
	t.Run("SQLite", func(t *testing.T) { f(t, openSQLiteLedger) })
	t.Run("Postgres", func(t *testing.T) {
		if os.Getenv(dbtest.PostgresEnv) == "" {
			t.Skip("set " + dbtest.PostgresEnv + " to run on PostgreSQL")
		}
		f(t, openPostgresLedger)
	})
}

// judgedBothWays reads, in a transaction it rolls back, item n's stored
// summary (if true), the claim judgement of every owner through the
// summaries and through the whole history, and the summary of the whole
// history. It fails the test when the two judgements differ in anything
// gating.Claimable reads, or a stored summary is not the whole history's.
// It reports whether a stored summary was there.
func (e *env) judgedBothWays(n int, owners []string, what string) bool {
	e.t.Helper()
	ctx := e.ctx
	tx, err := e.l.db.Write.BeginTx(ctx, nil)
	if err != nil {
		e.t.Fatal(err)
	}
	defer tx.Rollback()
	repo, err := servedRepo(ctx, tx, e.repo)
	if err != nil {
		e.t.Fatal(err)
	}
	it, err := e.l.loadItem(ctx, tx, lockNone, e.repo, n)
	if err != nil || it == nil {
		e.t.Fatalf("%s: read issue-%d: %v", what, n, err)
	}
	set := e.l.settingsFor(ctx, repo)
	stored, had, err := readSummary(ctx, tx, e.repo, n)
	if err != nil {
		e.t.Fatal(err)
	}
	full, err := e.l.claimSnapshot(ctx, tx, repo, set, it)
	if err != nil {
		e.t.Fatal(err)
	}
	judged, _, err := e.l.judgeSnapshot(ctx, tx, repo, set, it)
	if err != nil {
		e.t.Fatal(err)
	}
	byID := map[gating.ItemID]gating.Candidate{}
	for _, c := range judged.Items {
		byID[c.Item.ID] = c
	}
	for _, c := range full.Snapshot.Items {
		j := byID[c.Item.ID]
		if j.Attempts != c.Attempts || j.CollisionHold != c.CollisionHold || j.Claim != c.Claim {
			e.t.Fatalf("%s: %s judged from the summary as attempts %d hold %v claim %+v; the whole history says %d %v %+v",
				what, c.Item.ID, j.Attempts, j.CollisionHold, j.Claim, c.Attempts, c.CollisionHold, c.Claim)
		}
	}
	for _, o := range owners {
		ok1, ex1 := gating.Claimable(judged, it.ID, o)
		ok2, ex2 := gating.Claimable(full.Snapshot, it.ID, o)
		if ok1 != ok2 || ex1 != ex2 {
			e.t.Fatalf("%s: claimable for %s through the summary %v %+v; through the whole history %v %+v", what, o, ok1, ex1, ok2, ex2)
		}
	}
	if had {
		if _, err := tx.ExecContext(ctx, `UPDATE ledger_summaries SET summary_gen = -1 WHERE repo_id = $1 AND number = $2`, e.repo, n); err != nil {
			e.t.Fatal(err)
		}
		_, j, err := e.l.judgeSnapshot(ctx, tx, repo, set, it)
		if err != nil {
			e.t.Fatal(err)
		}
		a, _ := json.Marshal(stored)
		b, _ := json.Marshal(j.sums[n])
		if string(a) != string(b) {
			e.t.Fatalf("%s: the stored summary of issue-%d\n%s\nis not the whole history's\n%s", what, n, a, b)
		}
	}
	return had
}

// TestSummaryAgreesWithTheWholeHistory: over random sequences of claims
// (maintenance ones too), renewals, releases, lapses, claim and outcome
// markers (in and out of order, forged, edited), pushes, unparks, resolves
// and adopted fences on the real store, a claim judged through the
// summaries answers what the whole history answers, and every stored
// summary is the whole history's. Most of the time there is one to read.
func TestSummaryAgreesWithTheWholeHistory(t *testing.T) {
	summaryBackends(t, func(t *testing.T, open func(t *testing.T) *Ledger) {
		seeds, steps := 6, 70
		if testing.Short() {
			seeds = 2
		}
		stored, judged := 0, 0
		for seed := range uint64(seeds) {
			e := newEnv(t, open)
			e.create(1, tags())
			e.create(2, tags("resource:db")) // another item in flight, read beside it
			e.create(3, tags("resource:db"))
			s := &summarySim{e: e, r: rand.New(rand.NewPCG(seed, 11)), acts: &Acts{db: e.l.db}}
			for i := range steps {
				what := s.step(i)
				judged++
				if e.judgedBothWays(1, []string{"pm/a", "pm/b", "pm/c"}, what) {
					stored++
				}
			}
		}
		t.Logf("%d judgements, %d with a stored summary", judged, stored)
		if stored < judged/3 {
			t.Errorf("only %d of %d judgements had a stored summary to read", stored, judged)
		}
	})
}

type summarySim struct {
	e      *env
	r      *rand.Rand
	acts   *Acts
	nextID int64
	marks  []TrailRecord
}

func (s *summarySim) token(n int) (int64, string) {
	st := s.e.status(n)
	if st.FencingToken == nil || !st.Claimed {
		return 0, ""
	}
	owner := ""
	if st.Owner != nil {
		owner = *st.Owner
	}
	return *st.FencingToken, owner
}

// step makes one random change to issue 1's history (sometimes issue
// 2's) and says what it was.
func (s *summarySim) step(i int) string {
	e, r, ctx := s.e, s.r, s.e.ctx
	n := 1
	if r.IntN(6) == 0 {
		n = 2
	}
	id := gating.IDFor(n)
	owners := []string{"pm/a", "pm/b"}
	tok, holder := s.token(n)
	switch k := r.IntN(100); {
	case k < 25:
		owner := holder
		if owner == "" || r.IntN(4) == 0 {
			owner = owners[r.IntN(2)] // mostly the holder comes back; sometimes a takeover
		}
		req := ClaimRequest{Owner: owner, LeaseSeconds: f64(float64(1 + r.IntN(60))), Branch: []string{"", "feat-1", "feat-2"}[r.IntN(3)]}
		if r.IntN(10) == 0 {
			req.Purpose = "maintenance"
		}
		if _, err := e.l.Claim(ctx, e.repo, id, req, pm); err != nil {
			e.t.Fatalf("step %d claim: %v", i, err)
		}
		return fmt.Sprintf("step %d: claim of %s by %s (%s)", i, id, req.Owner, req.Purpose)
	case k < 32 && tok > 0:
		if _, err := e.l.Renew(ctx, e.repo, id, tok, f64(float64(1+r.IntN(60))), pm); err != nil {
			e.t.Fatalf("step %d renew: %v", i, err)
		}
		return fmt.Sprintf("step %d: renew of %s", i, id)
	case k < 45 && tok > 0:
		e.release(n, tok)
		return fmt.Sprintf("step %d: release of %s", i, id)
	case k < 55:
		d := time.Duration(r.IntN(90)) * time.Second
		if r.IntN(8) == 0 {
			d = 2 * time.Hour // past the quarantine: abandoned
		}
		e.clock.Advance(d)
		return fmt.Sprintf("step %d: %s pass", i, d)
	case k < 80:
		s.nextID++
		at := e.clock.Now().Add(time.Duration(r.IntN(4000)-1000) * time.Millisecond).Truncate(time.Second)
		if r.IntN(4) == 0 {
			at = at.Add(time.Duration(r.IntN(1_000_000)) * time.Nanosecond).Local() // as precise as a delivery may be
		}
		rec := TrailRecord{CommentID: s.nextID, Author: "bot", AuthorType: "Bot", CreatedAt: at, EarliestAt: at, CurrentAt: at, IsAgent: r.IntN(8) > 0}
		owner, fence := holder, tok
		if owner == "" || r.IntN(5) == 0 {
			owner, fence = owners[r.IntN(2)], max(1, e.item(n).Fence.Token+int64(r.IntN(3))-1)
		}
		switch r.IntN(4) {
		case 0:
			rec.EarliestBody = gating.ClaimMarker(string(id), owner, testRegion, fence, at, nil) + "\nclaimed"
		case 1:
			rec.EarliestBody = fmt.Sprintf("<!-- backlog-worker: outcome item=%s owner=%s fence=%d result=%s -->\ndone", id, owner, fence,
				[]string{gating.ResultReleased, gating.ResultComplete}[r.IntN(2)])
		case 2:
			rec.EarliestBody = "<!-- backlog-worker: claim item=" + string(id) + " -->"
		default:
			rec.EarliestBody = "prose"
		}
		rec.CurrentBody = rec.EarliestBody
		if _, err := e.l.RecordTrailComment(ctx, e.repo, n, rec); err != nil {
			e.t.Fatalf("step %d comment: %v", i, err)
		}
		s.marks = append(s.marks, rec)
		return fmt.Sprintf("step %d: comment %d on %s: %.60q", i, rec.CommentID, id, rec.EarliestBody)
	case k < 86 && len(s.marks) > 0:
		rec := s.marks[r.IntN(len(s.marks))]
		switch r.IntN(3) {
		case 0:
			rec.CurrentBody, rec.CurrentAt, rec.Edited = "edited", rec.CurrentAt.Add(time.Minute), true
		case 1:
			rec.Deleted = true
		default:
			rec.HasWrite = true
		}
		// The comment may be on either item: recording it on issue 1 is a
		// new comment there when it was issue 2's.
		if _, err := e.l.RecordTrailComment(ctx, e.repo, 1, rec); err != nil {
			e.t.Fatalf("step %d edit: %v", i, err)
		}
		return fmt.Sprintf("step %d: comment %d on issue-1 seen again", i, rec.CommentID)
	case k < 94:
		br := []string{"feat-1", "feat-2", "other"}[r.IntN(3)]
		if _, err := e.l.RecordBranchPush(ctx, e.repo, br, e.clock.Now(), []string{"bot", "carol"}[r.IntN(2)], []string{"", "", gating.RewriteForced, gating.RewriteDeleted}[r.IntN(4)]); err != nil {
			e.t.Fatalf("step %d push: %v", i, err)
		}
		return fmt.Sprintf("step %d: push to %s", i, br)
	case k < 96:
		if err := s.acts.StartEpoch(ctx, e.repo, n, e.clock.Now(), "alice"); err != nil {
			e.t.Fatal(err)
		}
		return fmt.Sprintf("step %d: unpark of %s", i, id)
	case k < 98:
		if err := s.acts.Resolve(ctx, e.repo, n, e.clock.Now(), "alice"); err != nil {
			e.t.Fatal(err)
		}
		return fmt.Sprintf("step %d: resolve of %s", i, id)
	default:
		if _, err := e.l.AdoptFence(ctx, e.repo, n, e.item(n).Fence.Token+1); err != nil {
			e.t.Fatal(err)
		}
		return fmt.Sprintf("step %d: adopted fence on %s", i, id)
	}
}

// TestClaimCycleReadsNoHistory: once an item's summary is written, claims,
// renewals and releases judge it without reading its history, however long.
func TestClaimCycleReadsNoHistory(t *testing.T) {
	summaryBackends(t, func(t *testing.T, open func(t *testing.T) *Ledger) {
		e := newEnv(t, open)
		e.create(1, tags())
		e.l.cfg.Settings = func(context.Context, Repo) gating.Settings {
			s := gating.DefaultSettings()
			s.PoisonThreshold = 1000
			return s
		}
		cycle := func() {
			r := e.claim(1, "pm/a", 60)
			if _, err := e.l.Renew(e.ctx, e.repo, "issue-1", *r.FencingToken, f64(60), pm); err != nil {
				t.Fatal(err)
			}
			e.release(1, *r.FencingToken)
		}
		cycle() // the first judgement reads the history and writes the summary
		before := summaryFullReads.Load()
		for range 20 {
			cycle()
		}
		if d := summaryFullReads.Load() - before; d != 0 {
			t.Errorf("20 claim cycles read the whole history of %d items, want none", d)
		}
		if st := e.l.mustAttempts(t, 1); st != 21 {
			t.Errorf("attempts %d after 21 released claims, want 21", st)
		}
	})
}

func (l *Ledger) mustAttempts(t *testing.T, n int) int {
	t.Helper()
	rs, err := l.ClaimSnapshot(context.Background(), 42, gating.IDFor(n))
	if err != nil {
		t.Fatal(err)
	}
	a, _ := rs.Attempts(gating.IDFor(n))
	return a
}

// TestSummarySeesWritesItDidNotMake: a change to the history made around
// the ledger (an operator's SQL, an older replica) bumps the generation by
// trigger, so the next claim reads the whole history: here an operator
// deletes a poisoned item's grants, and the item is claimable again; an
// outcome marker inserted by hand is read too.
func TestSummarySeesWritesItDidNotMake(t *testing.T) {
	summaryBackends(t, func(t *testing.T, open func(t *testing.T) *Ledger) {
		e := newEnv(t, open)
		e.create(1, tags())
		for range 3 { // three released attempts: poisoned at the default threshold
			e.release(1, *e.claim(1, "pm/a", 60).FencingToken)
		}
		r, err := e.l.Claim(e.ctx, e.repo, "issue-1", ClaimRequest{Owner: "pm/a"}, pm)
		if err != nil || r.Granted || r.Exclusion == nil || *r.Exclusion != gating.ExPoisoned {
			t.Fatalf("a fourth claim: %+v %v, want not-ready poisoned", r, err)
		}
		if !e.judgedBothWays(1, []string{"pm/a"}, "poisoned") {
			t.Fatal("no stored summary after the refused claim")
		}
		if _, err := e.l.db.Write.ExecContext(e.ctx, `DELETE FROM ledger_grants WHERE repo_id = $1 AND number = 1 AND fence < 3`, e.repo); err != nil {
			t.Fatal(err)
		}
		before := summaryFullReads.Load()
		e.judgedBothWays(1, []string{"pm/a"}, "after the operator's delete")
		tok := *e.claim(1, "pm/a", 60).FencingToken
		if summaryFullReads.Load() == before {
			t.Error("the claim after the operator's delete read no history")
		}
		// A same-owner re-claim after a lapse is no attempt, unless an
		// outcome closed the claim before it: inserted by hand here.
		e.clock.Advance(2 * time.Minute)
		at := e.clock.Now().Add(-time.Minute).UnixMilli()
		body := fmt.Sprintf("<!-- backlog-worker: outcome item=issue-1 owner=pm/a fence=%d result=released -->", tok)
		if _, err := e.l.db.Write.ExecContext(e.ctx, `INSERT INTO trail_comments (repo_id, number, comment_id, author, author_type, created_at,
			earliest_body, earliest_at, current_body, current_at, edited, deleted, is_agent, is_warden, has_write, recorded_at)
			VALUES ($1, 1, 99, 'bot', 'Bot', $2, $3, $2, $3, $2, 0, 0, 1, 0, 0, $2)`, e.repo, at, body); err != nil {
			t.Fatal(err)
		}
		e.judgedBothWays(1, []string{"pm/a", "pm/b"}, "after the hand-made outcome")
		if got := e.l.mustAttempts(t, 1); got != 3 {
			t.Fatalf("attempts %d, want 3 (the unknown claims below the log, fences 3 and 4)", got)
		}
		e.claim(1, "pm/a", 60)
		if got := e.l.mustAttempts(t, 1); got != 4 {
			t.Errorf("attempts %d after a re-claim closed by the hand-made outcome, want 4", got)
		}
		e.judgedBothWays(1, []string{"pm/a", "pm/b"}, "after the re-claim")
	})
}

// TestSummaryOnADatabaseMigratedBefore: a database an older warden
// migrated (no summary tables) with a history already in it carries on:
// the first claim reads the whole history, judges as it did, and writes the
// summary the next ones read.
func TestSummaryOnADatabaseMigratedBefore(t *testing.T) {
	ctx := context.Background()
	d, err := db.Open(ctx, "sqlite:"+filepath.Join(t.TempDir(), "old.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	for _, c := range schema {
		if c.component == "trail_summary" {
			continue
		}
		if err := d.Migrate(ctx, c.component, c.steps); err != nil {
			t.Fatal(err)
		}
	}
	now := time.Now().UnixMilli()
	err = withTx(ctx, d.Write, func(tx *sql.Tx) error {
		stmts := []string{
			`INSERT INTO ledger_repos (id, full_name, name_key, installation, default_branch, served, updated_at) VALUES (42, 'Acme/Widgets', 'acme/widgets', 7, 'main', 1, 0)`,
			`INSERT INTO ledger_items (repo_id, number, title, body, author, provenance, created_at, updated_at, fence, released) VALUES (42, 1, 't', '', 'pm', '', 0, 0, 2, 2)`,
			`INSERT INTO ledger_tags (repo_id, number, tag) VALUES (42, 1, 'backlog'), (42, 1, 'priority:P1'), (42, 1, 'phase:implementation'), (42, 1, 'homeRegion:local'), (42, 1, 'baseBranch:main')`,
			`INSERT INTO admissions (repo_id, number, admitted_by, admitted_at, how) VALUES (42, 1, 'alice', 0, 'test')`,
			`INSERT INTO issue_state (repo_id, number, state, labels, updated_at, recorded_at) VALUES (42, 1, 'open', '["backlog"]', 0, 0)`,
			fmt.Sprintf(`INSERT INTO ledger_grants (repo_id, number, fence, owner, region, branch, purpose, granted_at, lease_expires_at, released_at)
				VALUES (42, 1, 1, 'pm/a', 'local', '', '', %[1]d, %[1]d, %[1]d), (42, 1, 2, 'pm/b', 'local', '', '', %[1]d + 1000, %[1]d + 1000, %[1]d + 1000)`, now-10000),
		}
		for _, q := range stmts {
			if _, err := tx.ExecContext(ctx, q); err != nil {
				return fmt.Errorf("%s: %w", q, err)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	l, err := openLedger(ctx, d, Config{Region: "local"})
	if err != nil {
		t.Fatal(err)
	}
	e := &env{t: t, ctx: ctx, l: l, repo: 42}
	if e.judgedBothWays(1, []string{"pm/a"}, "migrated") {
		t.Fatal("a summary before any claim")
	}
	// Two attempts: the third claim is granted, the fourth poisoned.
	r := e.claim(1, "pm/a", 60)
	if !e.judgedBothWays(1, []string{"pm/a", "pm/b"}, "first claim") {
		t.Fatal("the first claim wrote no summary")
	}
	e.release(1, *r.FencingToken)
	if got, err := l.Claim(ctx, 42, "issue-1", ClaimRequest{Owner: "pm/a"}, pm); err != nil || got.Granted {
		t.Fatalf("a claim after three attempts: %+v %v, want poisoned", got, err)
	}
}

func withTx(ctx context.Context, d *sql.DB, fn func(*sql.Tx) error) error {
	tx, err := d.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback()
	if err := fn(tx); err != nil {
		return err
	}
	return tx.Commit()
}

// TestSummaryPushAfterTakeover: a push to the branch of a claim that was
// taken over is a collision, and a stored summary must say so: after it the
// item is held until a resolve, through the summary as through the history.
func TestSummaryPushAfterTakeover(t *testing.T) {
	summaryBackends(t, func(t *testing.T, open func(t *testing.T) *Ledger) {
		e := newEnv(t, open)
		e.create(1, tags())
		e.l.cfg.Settings = func(context.Context, Repo) gating.Settings {
			s := gating.DefaultSettings()
			s.PoisonThreshold = 100 // three attempts below: poison would come first
			return s
		}
		claim := func(owner, branch string) int64 {
			r, err := e.l.Claim(e.ctx, e.repo, "issue-1", ClaimRequest{Owner: owner, Branch: branch, LeaseSeconds: f64(60)}, pm)
			if err != nil || !r.Granted {
				t.Fatalf("claim by %s: %+v %v", owner, r, err)
			}
			return *r.FencingToken
		}
		claim("pm/a", "feat-1")
		e.clock.Advance(2 * time.Hour) // abandoned: another owner may take it over
		e.release(1, claim("pm/b", "feat-2"))
		e.release(1, claim("pm/b", "feat-2")) // the claim that wrote a summary holding the takeover
		if !e.judgedBothWays(1, []string{"pm/b"}, "after the takeover") {
			t.Fatal("no stored summary after the takeover")
		}
		e.clock.Advance(time.Minute)
		if _, err := e.l.RecordBranchPush(e.ctx, e.repo, "feat-1", e.clock.Now(), "carol", ""); err != nil {
			t.Fatal(err)
		}
		e.judgedBothWays(1, []string{"pm/a", "pm/b"}, "after the push to the prior branch")
		r, err := e.l.Claim(e.ctx, e.repo, "issue-1", ClaimRequest{Owner: "pm/b"}, pm)
		if err != nil || r.Granted || r.Exclusion == nil || *r.Exclusion != gating.ExCollisionHold {
			t.Fatalf("a claim after the prior owner's push: %+v (%v) %v, want not-ready collision-hold", r, r.Exclusion, err)
		}
	})
}

// TestSummaryMarkerTimesAsStored: a marker delivered with a time finer than
// the trail keeps (milliseconds) extends the summary as the stored row
// reads back, so the summary is the whole history's.
func TestSummaryMarkerTimesAsStored(t *testing.T) {
	e := newEnv(t, openSQLiteLedger)
	e.create(1, tags())
	e.release(1, *e.claim(1, "pm/a", 60).FencingToken)
	tok := *e.claim(1, "pm/a", 60).FencingToken
	at := e.clock.Now().Add(1500*time.Millisecond + 123456*time.Nanosecond).Local()
	body := gating.ClaimMarker("issue-1", "pm/a", testRegion, tok, at, nil)
	rec := TrailRecord{CommentID: 7, Author: "bot", AuthorType: "Bot", CreatedAt: at, EarliestBody: body, EarliestAt: at,
		CurrentBody: body, CurrentAt: at, IsAgent: true}
	if _, err := e.l.RecordTrailComment(e.ctx, e.repo, 1, rec); err != nil {
		t.Fatal(err)
	}
	if !e.judgedBothWays(1, []string{"pm/a", "pm/b"}, "after a marker with a sub-millisecond time") {
		t.Fatal("the marker did not extend the summary")
	}
}
